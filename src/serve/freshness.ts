// Whether the cache is fresh enough to answer a read (docs/design.md, "Consistent reads"): one
// proof for a GET, a LIST and the initial state of a watch, so all three wait, count and give up
// the same way.
import type { CachedResource } from '../cache/cache.ts';
import type { ForwardReason, Freshness } from './decide.ts';

/** How long a read for resourceVersion N waits for the cache to reach N (the apiserver waits 3 s). */
export const FRESHNESS_WAIT_MS = 3_000;

/**
 * How long a read without resourceVersion waits for the cache to catch up with the apiserver
 * before it is forwarded instead. Short: forwarding is always correct, waiting only saves work.
 */
export const CONSISTENT_WAIT_MS = 150;

/** The response header that says how a read without resourceVersion was answered from the cache. */
export const CONSISTENCY_HEADER = 'levee-consistent-read';

export interface ConsistentReadObserver {
  consistentRead(resource: string, result: 'verified' | 'cache-policy' | 'forwarded', waitSeconds: number): void;
}

/** Why the cache could not be shown fresh enough: the read is forwarded, counted by this reason. */
export type Stale = Extract<ForwardReason, 'consistency-probe-failed' | 'consistency-unproven' | 'resource-version-ahead'>;

/** Fresh enough: with, for a read without resourceVersion, how that was established. */
export type Proof = { fresh: true; consistency?: 'verified' | 'cache' } | { fresh: false; stale: Stale };

/**
 * Waits until the cache may answer as `freshness` asks, within a bound. `consistentRead` marks a
 * read without resourceVersion that the `cache` policy answers as it stands (freshness `any`).
 * Exact reads are not this function's: they are answered from a snapshot, or not at all.
 */
export async function prove(
  r: CachedResource,
  freshness: Freshness,
  consistentRead: boolean,
  arrivedAt: bigint,
  observer: ConsistentReadObserver,
): Promise<Proof> {
  const store = r.store;
  switch (freshness.mode) {
    case 'consistent': {
      const started = process.hrtime.bigint();
      const waited = (): number => Number(process.hrtime.bigint() - started) / 1e9;
      let rv: number;
      try {
        rv = await r.probe.current(arrivedAt);
      } catch {
        observer.consistentRead(r.name, 'forwarded', waited());
        return { fresh: false, stale: 'consistency-probe-failed' };
      }
      if (store.resourceVersion < rv && !(await store.waitUntilFresh(rv, CONSISTENT_WAIT_MS))) {
        observer.consistentRead(r.name, 'forwarded', waited());
        return { fresh: false, stale: 'consistency-unproven' };
      }
      observer.consistentRead(r.name, 'verified', waited());
      return { fresh: true, consistency: 'verified' };
    }
    case 'notOlderThan':
      // The apiserver may already be there: it answers (or gives its own 504) rather than Levee guessing.
      if (store.resourceVersion < freshness.resourceVersion && !(await store.waitUntilFresh(freshness.resourceVersion, FRESHNESS_WAIT_MS))) {
        return { fresh: false, stale: 'resource-version-ahead' };
      }
      return { fresh: true };
    case 'any':
      if (!consistentRead) return { fresh: true };
      // The `cache` policy: a read without resourceVersion answered from the cache as it is.
      observer.consistentRead(r.name, 'cache-policy', 0);
      return { fresh: true, consistency: 'cache' };
    case 'exact':
      return { fresh: true };
  }
}
