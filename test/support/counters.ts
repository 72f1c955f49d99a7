// Levee's own counters, as the representation tests read them: answers from the cache, reads
// forwarded (all, or for their media type), and the forwarded lines to print when one fails.
import type { Dispatcher } from 'undici';
import { get } from './http.ts';

export function sum(text: string, pattern: RegExp): number {
  return [...text.matchAll(pattern)].reduce((n, m) => n + Number(m[1]), 0);
}

/** Counters of the Levee at `origin()`, read when asked: a test's Levee and agent are made after this. */
export function leveeCounters(origin: () => string, agent: () => Dispatcher) {
  const metrics = async (): Promise<string> => (await get(`${origin()}/metrics`, agent())).body;
  return {
    metrics,
    fromCache: async (): Promise<number> => sum(await metrics(), /^levee_request_total\{[^}]*source="cache"[^}]*\} (\d+)$/gm),
    forwardedForMedia: async (): Promise<number> => sum(await metrics(), /^levee_read_forwarded_total\{[^}]*reason="(?:media-type|representation)"[^}]*\} (\d+)$/gm),
    forwardedAll: async (): Promise<number> => sum(await metrics(), /^levee_read_forwarded_total\{[^}]*\} (\d+)$/gm),
    forwardedLines: async (): Promise<string> => (await metrics()).split('\n').filter((l) => l.startsWith('levee_read_forwarded_total')).join('; '),
  };
}
