// Summary statistics of latency samples. Quantiles are nearest-rank, as in bench/forward.ts, so
// p99 of 10 samples is simply the slowest one.

export interface Summary {
  n: number;
  p50Ms: number;
  p99Ms: number;
  meanMs: number;
  minMs: number;
  maxMs: number;
}

export function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
}

export function summarize(xs: number[]): Summary {
  return {
    n: xs.length,
    p50Ms: quantile(xs, 0.5),
    p99Ms: quantile(xs, 0.99),
    meanMs: xs.reduce((a, b) => a + b, 0) / xs.length,
    minMs: Math.min(...xs),
    maxMs: Math.max(...xs),
  };
}
