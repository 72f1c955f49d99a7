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
// One LIST serves every reader that arrived before it began, and a probe's bookmark every reader
// waiting; while readers keep coming, a probe begins every second (src/reflector/probes.ts).
// LISTs begin at least MIN_LIST_SPACING_MS apart: a crowd (a DaemonSet's agents restarting at
// once) otherwise keeps them running back to back, each a quorum read for the apiserver and a
// request for Levee, while its readers then mostly wait far longer for the bookmark (a mean of
// 0.6–0.7 s in bench:massrestart before the spacing).
import type { ResourceInfo } from '../api/resource.ts';
import { getJson } from '../upstream/client.ts';
import type { UpstreamPools } from '../upstream/pools.ts';
import { parseResourceVersion } from '../store/object.ts';
import type { Store } from '../store/store.ts';
import type { UpstreamSelector } from '../reflector/reflector.ts';
import { within } from '../within.ts';

/** What the proof needs of the reflector: a bookmark soon. */
export interface BookmarkSource {
  readonly canProbe: boolean;
  bookmarkSoon(): Promise<void>;
}

/** Why no proof: the revision could not be learned, or the store did not reach it in time. */
export type Unproven = 'consistency-probe-failed' | 'consistency-unproven';

// A probe that settles without the proof (its bookmark was older than the revision, or it failed)
// is followed by the next, this many in all; after them the store can still catch up by itself.
const MAX_PROBES = 3;

/** The least time between the starts of two LISTs; what a reader may wait beyond the LIST itself. */
export const MIN_LIST_SPACING_MS = 50;

/** The revision source: a consistent LIST's resourceVersion. */
export type RevisionSource = () => Promise<number>;

/** The consistent `limit=1` LIST of a resource (its reflector's selection) that gives the revision. */
export function listRevision(pools: UpstreamPools, info: ResourceInfo, selector?: UpstreamSelector): RevisionSource {
  // The reflector's own selection: an identity allowed to list only that part (a kubelet, under
  // the Node authorizer) may still learn the revision, and an index makes it cheap.
  const q = new URLSearchParams({ limit: '1' });
  if (selector?.labelSelector) q.set('labelSelector', selector.labelSelector);
  if (selector?.fieldSelector) q.set('fieldSelector', selector.fieldSelector);
  const path = `${info.prefix}/${info.resource}?${q.toString()}`;
  return () =>
    getJson<{ metadata?: { resourceVersion?: string } }>(pools, path).then((list) => {
      const n = parseResourceVersion(list.metadata?.resourceVersion ?? '');
      if (n === undefined) throw new Error(`consistency probe answered resourceVersion "${list.metadata?.resourceVersion}"`);
      return n;
    });
}

export class ConsistencyProof {
  readonly #revision: RevisionSource;
  readonly #store: Store;
  readonly #bookmarks: BookmarkSource;
  readonly #spacingNs: bigint;
  #inflight: { startedAt: bigint; rv: Promise<number> } | undefined;
  /** When the last LIST began (process.hrtime.bigint()). */
  #lastStart: bigint | undefined;
  /** The next LIST, shared by every reader that arrives before it begins. */
  #next: Promise<number> | undefined;

  constructor(revision: RevisionSource, store: Store, bookmarks: BookmarkSource, spacingMs = MIN_LIST_SPACING_MS) {
    this.#revision = revision;
    this.#store = store;
    this.#bookmarks = bookmarks;
    this.#spacingNs = BigInt(Math.round(spacingMs * 1e6));
  }

  /**
   * The apiserver's resourceVersion as of a moment after `arrivedAt` (process.hrtime.bigint()).
   * Readers share a LIST only if it began after they arrived: an earlier one could miss a write the
   * reader already saw completed. While one is in flight, or one began less than the spacing ago,
   * the next is queued and shared by everyone arriving until it starts, so a crowd costs one LIST
   * per spacing, not one each.
   */
  current(arrivedAt: bigint): Promise<number> {
    const inflight = this.#inflight;
    if (inflight && inflight.startedAt >= arrivedAt) return inflight.rv;
    if (this.#next) return this.#next;
    if (!inflight && this.#spacingLeftMs() === 0) return this.#start().rv;
    const settled = inflight ? inflight.rv.then(noop, noop) : Promise.resolve();
    const next = settled
      .then(() => {
        // A timer only for spacing still left: even at 0 ms a timer waits for the event loop's
        // timers phase, behind every socket that was ready with it. When a crowd connects that is
        // a whole batch of TLS handshakes: in bench:massrestart the LIST after the first began
        // 0.54 s after the first was answered, with its readers waiting.
        const left = this.#spacingLeftMs();
        return left > 0 ? new Promise<void>((resolve) => setTimeout(resolve, left)) : undefined;
      })
      .then(() => {
        this.#next = undefined;
        return this.#start().rv;
      });
    this.#next = next;
    return next;
  }

  #spacingLeftMs(): number {
    if (this.#lastStart === undefined) return 0;
    const left = this.#lastStart + this.#spacingNs - process.hrtime.bigint();
    return left > 0n ? Math.ceil(Number(left) / 1e6) : 0;
  }

  #start(): { startedAt: bigint; rv: Promise<number> } {
    const startedAt = process.hrtime.bigint();
    this.#lastStart = startedAt;
    const rv = this.#revision();
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
   * `arrivedAt`, within `timeoutMs`; otherwise the reason it could not be proven. `onRevision`
   * learns that revision once it is known.
   */
  async prove(arrivedAt: bigint, timeoutMs: number, onRevision?: (resourceVersion: number) => void): Promise<true | Unproven> {
    const deadline = performance.now() + timeoutMs;
    // The bookmark probe begins with the LIST, not after it: its bookmark comes at the apiserver's
    // next bookmark tick a second or more later, long after the LIST (~5 ms) has made the
    // apiserver's cache reach the revision, so it carries that revision or a later one; if not,
    // catching up probes again. A LIST slowed by a crowd (a DaemonSet's agents restarting, whose
    // initial events the serving thread is writing) no longer delays the probe: in
    // bench:massrestart the first LIST took 0.6 s, and every agent's sync waited for it.
    // A store that turns out to be there already costs at most a probe watch a second, shared by
    // every reader: proofs are for watch-list starts and large LISTs, not every read.
    if (this.#bookmarks.canProbe) void this.#bookmarks.bookmarkSoon();
    let rv: number | undefined;
    try {
      rv = await within(this.current(arrivedAt), deadline - performance.now());
    } catch {
      return 'consistency-probe-failed';
    }
    if (rv === undefined) return 'consistency-probe-failed';
    onRevision?.(rv);
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
      await within(this.current(process.hrtime.bigint()), deadline - performance.now());
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

function noop(): void {}
