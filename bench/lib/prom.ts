// Just enough of the Prometheus text format to read Levee's /metrics: one sample per line,
// `name{label="value",...} number`, comments skipped.

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parseMetrics(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = LINE.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(LABEL)) labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

/** Sum of the samples named `name` whose labels include all of `match`; undefined when none. */
export function metric(samples: Sample[], name: string, match: Record<string, string> = {}): number | undefined {
  let sum: number | undefined;
  for (const s of samples) {
    if (s.name !== name) continue;
    if (Object.entries(match).some(([k, v]) => s.labels[k] !== v)) continue;
    sum = (sum ?? 0) + s.value;
  }
  return sum;
}
