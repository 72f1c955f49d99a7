// A worker thread's copy of the cache (docs/design.md, "Workers"): the same resources, each in a
// store of its own that applies, in order, every change the owner's store applied (feed.ts). The
// objects' bytes are the owner's, in shared memory; the indexes, snapshots and event window are
// this thread's, so every read, watch and consistency proof here runs as it would on the owner.
// A proof's revision LIST goes upstream from here; its bookmark probe is asked of the owner, whose
// reflector's watch it is, and the events it brings arrive here before the answer does.
import type { MessagePort } from 'node:worker_threads';
import type { Logger } from '../log/logger.ts';
import type { CacheMetrics } from '../metrics/metrics.ts';
import type { CachedObject } from '../store/object.ts';
import { Store } from '../store/store.ts';
import type { UpstreamPools } from '../upstream/pools.ts';
import { cachedResource, fieldIndexesFor, resolveSelection, type ConsistentReadPolicy, type ResourceOptions } from './cache.ts';
import { StringTable } from './strings.ts';
import { copyFromSharedMemory } from '../store/bytes.ts';
import type { CacheStatus, FeedMessage, FeedRequest } from './feed.ts';
import type { CachedResource, CacheView, ReflectorView } from './view.ts';

interface Replicated {
  resource: CachedResource;
  reflector: ReplicaReflector;
}

export class ReplicaCache implements CacheView {
  readonly #port: MessagePort;
  readonly #pools: UpstreamPools;
  readonly #logger: Logger;
  readonly #metrics: CacheMetrics;
  readonly #policy: ConsistentReadPolicy;
  readonly #resourceOptions: Record<string, ResourceOptions>;
  readonly #byId = new Map<number, Replicated>();
  readonly #byGroupResource = new Map<string, CachedResource>();
  readonly #bookmarks = new Map<number, () => void>();
  readonly #strings = new StringTable();
  #nextRequest = 1;
  #status: CacheStatus = { ready: false, waiting: [], unsynced: ['cache: not received from the owning thread yet'], noWatchList: [] };
  #ready = false;
  #watchesEnded = false;
  #stopped = false;

  constructor(
    port: MessagePort,
    pools: UpstreamPools,
    logger: Logger,
    metrics: CacheMetrics,
    policy: ConsistentReadPolicy = { default: 'verify', byResource: {} },
    resourceOptions: Record<string, ResourceOptions> = {},
  ) {
    this.#port = port;
    this.#pools = pools;
    this.#logger = logger;
    this.#metrics = metrics;
    this.#policy = policy;
    this.#resourceOptions = resourceOptions;
  }

  start(): void {
    // The objects' bytes this thread will join are the owner's shared memory.
    copyFromSharedMemory();
    this.#port.on('message', (batch: FeedMessage[]) => {
      for (const m of batch) this.#apply(m);
    });
    // The owner is gone (shutting down): a proof waiting for its bookmark gives up at once.
    this.#port.on('close', () => {
      for (const resolve of this.#bookmarks.values()) resolve();
      this.#bookmarks.clear();
    });
  }

  #apply(m: FeedMessage): void {
    switch (m.t) {
      case 'run':
        return this.#run(m.id, m.name, m.info);
      case 'drop': {
        const r = this.#byId.get(m.id);
        if (!r) return;
        this.#byId.delete(m.id);
        this.#byGroupResource.delete(`${r.resource.info.group}/${r.resource.info.resource}`);
        r.reflector.stopped = true;
        r.resource.watchers.endAll();
        this.#metrics.forget(r.resource.name);
        return;
      }
      case 'replace':
        this.#byId.get(m.id)?.resource.store.replace(m.objects.map((o) => revive(o, this.#strings)), m.resourceVersion);
        return;
      case 'event':
        this.#byId.get(m.id)?.resource.store.apply(m.type, revive(m.object, this.#strings));
        return;
      case 'progress':
        this.#byId.get(m.id)?.resource.store.bookmark(m.resourceVersion);
        return;
      case 'status':
        this.#status = m.status;
        for (const [id, r] of this.#byId) r.reflector.watchListSupported = !m.status.noWatchList.includes(id);
        return;
      case 'bookmarked': {
        const resolve = this.#bookmarks.get(m.request);
        this.#bookmarks.delete(m.request);
        resolve?.();
        return;
      }
    }
  }

  #run(id: number, name: string, info: CachedResource['info']): void {
    const options = this.#resourceOptions[name] ?? {};
    let selection;
    try {
      selection = resolveSelection(info, options);
    } catch (err) {
      // The owner resolved the same options and would not have cached it.
      this.#logger.error({ resource: name, err: (err as Error).message }, 'cannot replicate resource');
      return;
    }
    const store = new Store({ fieldIndexes: fieldIndexesFor(info, options) });
    const reflector = new ReplicaReflector(store, (request) => this.#askBookmark(id, request));
    const consistentReads = this.#policy.byResource[name] ?? this.#policy.default;
    const resource = cachedResource(this.#pools, { name, info, store, reflector, selection, consistentReads }, this.#watchesEnded);
    this.#byId.set(id, { resource, reflector });
    this.#byGroupResource.set(`${info.group}/${info.resource}`, resource);
    this.#metrics.observeWatchers(name, resource.watchers);
  }

  #askBookmark(id: number, done: () => void): void {
    const request = this.#nextRequest++;
    this.#bookmarks.set(request, done);
    this.#port.postMessage({ t: 'bookmarkSoon', id, request } satisfies FeedRequest);
  }

  lookup(group: string, resource: string): CachedResource | undefined {
    return this.#byGroupResource.get(`${group}/${resource}`);
  }

  get resources(): CachedResource[] {
    return [...this.#byGroupResource.values()];
  }

  /** The owner is ready and every resource it caches has reached this replica. */
  get synced(): boolean {
    if (!this.#ready && this.#status.ready && this.resources.every((r) => r.store.synced)) this.#ready = true;
    return this.#ready;
  }

  waiting(): string[] {
    return this.#status.waiting;
  }

  unsynced(): string[] {
    return this.#status.unsynced;
  }

  endWatches(): void {
    this.#watchesEnded = true;
    for (const r of this.resources) r.watchers.endAll();
  }

  stop(): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    this.#stopped = true;
    for (const { reflector } of this.#byId.values()) reflector.stopped = true;
    for (const resolve of this.#bookmarks.values()) resolve();
    this.#bookmarks.clear();
    this.#port.close();
    return Promise.resolve();
  }
}

/** The owner's reflector as a replica sees it: its watch-list support, and bookmark probes asked of it. */
class ReplicaReflector implements ReflectorView {
  watchListSupported = true;
  stopped = false;
  readonly #store: Store;
  readonly #ask: (done: () => void) => void;
  #probing: Promise<void> | undefined;

  constructor(store: Store, ask: (done: () => void) => void) {
    this.#store = store;
    this.#ask = ask;
  }

  get canProbe(): boolean {
    return this.#store.synced && !this.stopped;
  }

  /** One request to the owner at a time serves every caller, as the reflector's own probe does. */
  bookmarkSoon(): Promise<void> {
    if (!this.canProbe) return Promise.resolve();
    this.#probing ??= new Promise<void>((resolve) => this.#ask(resolve)).finally(() => (this.#probing = undefined));
    return this.#probing;
  }

  stop(): Promise<void> {
    this.stopped = true;
    return Promise.resolve();
  }
}

/**
 * An object as the owner's store holds it; its bytes arrive as a view of the same shared memory,
 * its repeated strings as this replica's one copy of each (strings.ts).
 */
export function revive(o: CachedObject, strings: StringTable): CachedObject {
  const item = o.item as Uint8Array;
  o.item = Buffer.from(item.buffer, item.byteOffset, item.byteLength);
  o.namespace = strings.intern(o.namespace);
  const labels = o.labels as Record<string, string>;
  for (const k in labels) labels[k] = strings.intern(labels[k]!);
  const fields = o.fields as Record<string, string>;
  for (const k in fields) {
    // The object's own name and namespace, rather than copies of them.
    fields[k] = k === 'metadata.name' && fields[k] === o.name ? o.name : k === 'metadata.namespace' && fields[k] === o.namespace ? o.namespace : strings.intern(fields[k]!);
  }
  return o;
}
