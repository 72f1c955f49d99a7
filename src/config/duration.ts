// Durations as Kubernetes flags write them (Go's time.ParseDuration): "30s", "1m30s", "500ms", "0".

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Milliseconds of a duration like "1m30s"; throws on anything else. */
export function parseDuration(value: string): number {
  const v = value.trim();
  if (v === '0') return 0;
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h)/gy;
  let total = 0;
  let matched = 0;
  for (let m = re.exec(v); m; m = re.exec(v)) {
    total += Number(m[1]) * UNITS[m[2]!]!;
    matched = re.lastIndex;
  }
  if (v === '' || matched !== v.length) throw new Error(`"${value}" is not a duration (like 30s, 1m30s, 500ms)`);
  return total;
}
