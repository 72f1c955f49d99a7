// Whether the cache is fresh enough to answer a read (docs/design.md, "Consistent reads"): one
// proof for a GET, a LIST and the initial state of a watch, so all three wait, count and give up
// the same way.
import type { CachedResource } from '../cache/cache.ts';
import type { ForwardReason, Freshness } from './decide.ts';
import type { Maybe } from '../maybe.ts';

/** How long a read for resourceVersion N waits for the cache to reach N (the apiserver waits 3 s). */
export const FRESHNESS_WAIT_MS = 3_000;

/**
 * How long a read without resourceVersion waits for the proof that the cache is as new as the
 * apiserver before it is forwarded instead: the apiserver's own bound on such a wait (3 s).
 * Only reads for which waiting is worth it wait at all (serve/decide.ts).
 */
export const PROOF_WAIT_MS = 3_000;

/**
 * How long a consistent watch-list whose initial events have gone out waits for its proof before it
 * ends with the apiserver's 504 (docs/design.md, "Consistent reads"). It can no longer be
 * forwarded, and a 504 costs more than the wait: the client starts again a second later and is sent
 * its whole initial state once more, when the server is busiest. The bound is what a healthy
 * upstream needs with no probe at all: the apiserver bookmarks every watch about once a minute (its
 * cacher's bookmark frequency), at a tick up to 1.25 s late, and Levee's own upstream watch carries
 * that bookmark. Past it the upstream is not healthy.
 */
export const STARTED_PROOF_WAIT_MS = 65_000;

/** The response header that says how a read without resourceVersion was answered from the cache. */
export const CONSISTENCY_HEADER = 'levee-consistent-read';

/** How a read without resourceVersion on a cached resource went: `failed`, a watch-list started before its proof, which then did not come. */
export type ConsistentReadResult = 'verified' | 'cache-policy' | 'forwarded' | 'failed';

export interface ConsistentReadObserver {
  /** A read without resourceVersion: answered from a proven cache, under the cache policy, or forwarded; with the wait for a proof. */
  consistentRead(resource: string, result: ConsistentReadResult, waitSeconds?: number): void;
  /** The bytes of an answer to a read without resourceVersion, by who gave it. */
  consistentBytes(resource: string, source: 'cache' | 'upstream', bytes: number): void;
}

/** Why the cache could not be shown fresh enough: the read is forwarded, counted by this reason. */
export type Stale = Extract<ForwardReason, 'consistency-probe-failed' | 'consistency-unproven' | 'resource-version-ahead'>;

/** Fresh enough: with, for a read without resourceVersion, how that was established. */
/** Not fresh: why, and for a consistent read the revision it had to reach, once learned. */
export type Proof = { fresh: true; consistency?: 'verified' | 'cache' } | { fresh: false; stale: Stale; wanted?: number };

/**
 * Waits until the cache may answer as `freshness` asks, within a bound; at once when it already
 * may (src/maybe.ts). `consistentRead` marks a
 * read without resourceVersion that the `cache` policy answers as it stands (freshness `any`).
 * An exact read is then answered from the snapshot at its resourceVersion (serve/read.ts).
 */
export function prove(
  r: CachedResource,
  freshness: Freshness,
  consistentRead: boolean,
  arrivedAt: bigint,
  observer: ConsistentReadObserver,
  /** The answer begins before the proof (a watch-list's initial events): a failed proof ends it rather than forwarding it. */
  answerStarted = false,
): Maybe<Proof> {
  const store = r.store;
  switch (freshness.mode) {
    case 'consistent': {
      const started = process.hrtime.bigint();
      const unprovenAs = answerStarted ? 'failed' : 'forwarded';
      let wanted: number | undefined;
      return r.consistency
        .prove(arrivedAt, answerStarted ? STARTED_PROOF_WAIT_MS : PROOF_WAIT_MS, (rv) => (wanted = rv))
        .then((proof) => {
          const waited = Number(process.hrtime.bigint() - started) / 1e9;
          observer.consistentRead(r.name, proof === true ? 'verified' : unprovenAs, waited);
          return proof === true ? { fresh: true, consistency: 'verified' } : { fresh: false, stale: proof, ...(wanted !== undefined && { wanted }) };
        });
    }
    case 'notOlderThan':
    case 'exact':
      // Ahead of the store (an Exact read or a continue token from the apiserver itself, a
      // resourceVersion another client saw): brought there first; the snapshot at an exact
      // resourceVersion exists once the store has passed it. Not there in the apiserver's own
      // time: it answers (or gives its own 504) rather than Levee.
      if (store.resourceVersion >= freshness.resourceVersion) return { fresh: true };
      return r.consistency.reach(freshness.resourceVersion, FRESHNESS_WAIT_MS).then((reached) => (reached ? { fresh: true } : { fresh: false, stale: 'resource-version-ahead' }));
    case 'any':
      if (!consistentRead) return { fresh: true };
      // The `cache` policy: a read without resourceVersion answered from the cache as it is.
      observer.consistentRead(r.name, 'cache-policy');
      return { fresh: true, consistency: 'cache' };
  }
}
