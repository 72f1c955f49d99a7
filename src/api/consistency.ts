// How a read without resourceVersion (a consistent read) is answered (docs/design.md, "Consistent
// reads"): `verify` serves it from the cache only once the cache is proven at least as new as the
// apiserver; `cache` serves it like resourceVersion=0 (what YurtHub does), only where configured;
// `forward` always asks the apiserver.
export const CONSISTENT_READS = ['verify', 'cache', 'forward'] as const;

export type ConsistentReads = (typeof CONSISTENT_READS)[number];

export function isConsistentReads(s: string): s is ConsistentReads {
  return (CONSISTENT_READS as readonly string[]).includes(s);
}
