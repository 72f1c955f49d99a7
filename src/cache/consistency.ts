// What "now" is at the apiserver, for reads without a resourceVersion. No client of the apiserver
// can ask for watch progress on demand (kubernetes/kubernetes#127693), but a LIST with limit=1 and
// no resourceVersion is a consistent read: its resourceVersion is at least every write completed
// before it began. Levee serves such a read from its cache only once the cache has reached that.
import { getJson } from '../upstream/client.ts';
import type { UpstreamPools } from '../upstream/pools.ts';
import { parseResourceVersion } from '../store/object.ts';
import type { ResourceInfo } from '../api/resource.ts';

export class ConsistencyProbe {
  readonly #pools: UpstreamPools;
  readonly #path: string;
  #inflight: { startedAt: bigint; rv: Promise<number> } | undefined;

  constructor(pools: UpstreamPools, info: ResourceInfo) {
    this.#pools = pools;
    this.#path = `${info.prefix}/${info.resource}?limit=1`;
  }

  /**
   * The apiserver's resourceVersion as of a moment after `arrivedAt` (process.hrtime.bigint()).
   * Concurrent readers share one probe, but only one that began after they arrived: an earlier
   * probe could miss a write the reader already saw completed.
   */
  current(arrivedAt: bigint): Promise<number> {
    const inflight = this.#inflight;
    if (inflight && inflight.startedAt >= arrivedAt) return inflight.rv;
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
    return rv;
  }
}
