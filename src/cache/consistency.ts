// Proof that a cached resource is as new as the apiserver, for reads without a resourceVersion
// (docs/design.md, "Consistent reads"). No client of the apiserver can ask it for watch progress
// on demand (kubernetes/kubernetes#127693), and a quiet resource's watch carries a bookmark only
// every minute while every lease renewal moves the revision. What a client can do, measured in
// bench/freshness.ts against the real apiserver with other objects changing 50 times a second:
//  - a consistent LIST with limit=1 answers in about 5 ms with the current revision R, which
//    every write completed before it began is at or below, and makes the apiserver's own cache
//    reach R (it asks etcd for progress);
//  - a watch resumed from the store's resourceVersion with a 3 s deadline then gets a bookmark
//    at the apiserver's next bookmark tick (p50 0.9 s, p90 1.8 s), carrying its cache revision
//    (≥ R); its events arrive on the same stream as the bookmark, so once it arrives the store
//    holds every event up to it. Proven 20 of 20 times; the main watch's own bookmark took 60 s.
//  - a watch-list with a selector matching nothing ends with a bookmark within 6 ms, but it
//    proves only the apiserver: the data is on another stream, which may still be in flight.
// So: the LIST, then (unless the store is already there) a bookmark probe (Reflector.bookmarkSoon).
// One LIST serves every reader that arrived before it began, and one probe every reader waiting.
import type { ResourceInfo } from '../api/resource.ts';
import { getJson } from '../upstream/client.ts';
import type { UpstreamPools } from '../upstream/pools.ts';
import { parseResourceVersion } from '../store/object.ts';
import type { Store } from '../store/store.ts';
import type { UpstreamSelector } from '../reflector/reflector.ts';

/** What the proof needs of the reflector: a bookmark soon. */
export interface BookmarkSource {
  readonly canProbe: boolean;
  bookmarkSoon(): Promise<void>;
}

/** Why no proof: the revision could not be learned, or the store did not reach it in time. */
export type Unproven = 'consistency-probe-failed' | 'consistency-unproven';

// A probe that ends without the proof (its bookmark was older than the revision, or it failed) is
// followed by another, this many in all; after them the store can still catch up by itself.
const MAX_PROBES = 3;

export class ConsistencyProof {
  readonly #pools: UpstreamPools;
  readonly #path: string;
  readonly #store: Store;
  readonly #bookmarks: BookmarkSource;
  #inflight: { startedAt: bigint; rv: Promise<number> } | undefined;
  /** The LIST after the one in flight, shared by every reader that arrives before it begins. */
  #next: Promise<number> | undefined;

  constructor(pools: UpstreamPools, info: ResourceInfo, store: Store, bookmarks: BookmarkSource, selector?: UpstreamSelector) {
    this.#pools = pools;
    this.#store = store;
    this.#bookmarks = bookmarks;
    // The reflector's own selection: an identity allowed to list only that part (a kubelet, under
    // the Node authorizer) may still learn the revision, and an index makes it cheap.
    const q = new URLSearchParams({ limit: '1' });
    if (selector?.labelSelector) q.set('labelSelector', selector.labelSelector);
    if (selector?.fieldSelector) q.set('fieldSelector', selector.fieldSelector);
    this.#path = `${info.prefix}/${info.resource}?${q.toString()}`;
  }

  /**
   * The apiserver's resourceVersion as of a moment after `arrivedAt` (process.hrtime.bigint()).
   * Readers share a LIST only if it began after they arrived: an earlier one could miss a write the
   * reader already saw completed. While one is in flight, the next is queued and shared by everyone
   * arriving until it starts, so a crowd costs two LISTs in a row, not one each.
   */
  current(arrivedAt: bigint): Promise<number> {
    const inflight = this.#inflight;
    if (inflight && inflight.startedAt >= arrivedAt) return inflight.rv;
    if (!inflight) return this.#start().rv;
    this.#next ??= inflight.rv.then(
      () => this.#startNext(),
      () => this.#startNext(),
    );
    return this.#next;
  }

  #startNext(): Promise<number> {
    this.#next = undefined;
    return this.#start().rv;
  }

  #start(): { startedAt: bigint; rv: Promise<number> } {
    const startedAt = process.hrtime.bigint();
    const rv = getJson<{ metadata?: { resourceVersion?: string } }>(this.#pools, this.#path).then((list) => {
      const n = parseResourceVersion(list.metadata?.resourceVersion ?? '');
      if (n === undefined) throw new Error(`consistency probe answered resourceVersion "${list.metadata?.resourceVersion}"`);
      return n;
    });
    const entry = { startedAt, rv };
    this.#inflight = entry;
    const clear = (): void => {
      if (this.#inflight === entry) this.#inflight = undefined;
    };
    rv.then(clear, clear);
    return entry;
  }

  /**
   * Resolves true once the store holds every event up to a revision the apiserver gave after
   * `arrivedAt`, within `timeoutMs`; otherwise the reason it could not be proven.
   */
  async prove(arrivedAt: bigint, timeoutMs: number): Promise<true | Unproven> {
    const deadline = performance.now() + timeoutMs;
    let rv: number;
    try {
      rv = await this.current(arrivedAt);
    } catch {
      return 'consistency-probe-failed';
    }
    return (await this.#catchUp(rv, deadline)) ? true : 'consistency-unproven';
  }

  /**
   * Resolves true once the store has reached `resourceVersion` (a read not older than it), within
   * `timeoutMs`. A quiet resource's store does not move by itself: the apiserver is first made to
   * reach the revision (a consistent LIST asks etcd for progress), then a bookmark brings the store
   * there, as the apiserver's own cache waits for a revision it has not seen.
   */
  async reach(resourceVersion: number, timeoutMs: number): Promise<boolean> {
    if (this.#store.resourceVersion >= resourceVersion) return true;
    const deadline = performance.now() + timeoutMs;
    try {
      await this.current(process.hrtime.bigint());
    } catch {
      // The store may still get there on its own.
    }
    return this.#catchUp(resourceVersion, deadline);
  }

  /** Waits for the store to reach `rv`, getting it bookmarks meanwhile, until `deadline`. */
  async #catchUp(rv: number, deadline: number): Promise<boolean> {
    if (this.#store.resourceVersion >= rv) return true;
    const left = deadline - performance.now();
    if (left <= 0) return false;
    const fresh = this.#store.waitUntilFresh(rv, left);
    let settled: boolean | undefined;
    void fresh.then((v) => (settled = v));
    for (let probes = 0; probes < MAX_PROBES && this.#bookmarks.canProbe; probes++) {
      await Promise.race([fresh, this.#bookmarks.bookmarkSoon()]);
      // Let a bookmark that just reached the store settle the wait first.
      await Promise.resolve();
      if (settled !== undefined) break;
    }
    return fresh;
  }
}
