// What the read path sees of the cache, whichever thread it runs on: the cache itself (the thread
// that owns the reflectors), or a replica of it in a worker thread (replica.ts).
import type { ConsistentReads } from '../api/consistency.ts';
import type { ResourceInfo } from '../api/resource.ts';
import type { Store } from '../store/store.ts';
import type { WatcherRegistry } from '../watch/registry.ts';
import type { BookmarkSource, ConsistencyProof } from './consistency.ts';
import type { Selection } from './selection.ts';

/** What serving needs of a resource's reflector. */
export interface ReflectorView extends BookmarkSource {
  /** False once the upstream showed it has no watch-list for this resource. */
  readonly watchListSupported: boolean;
  stop(): Promise<void>;
}

export interface CachedResource {
  name: string;
  info: ResourceInfo;
  store: Store;
  reflector: ReflectorView;
  /** Proves the store as new as the apiserver, for reads without a resourceVersion. */
  consistency: ConsistencyProof;
  consistentReads: ConsistentReads;
  selection?: Selection | undefined;
  watchers: WatcherRegistry;
}

export interface CacheView {
  /** Starts following the resources, in the background. */
  start(): void;
  stop(): Promise<void>;
  lookup(group: string, resource: string): CachedResource | undefined;
  readonly resources: CachedResource[];
  /** Ready: every configured resource that exists has been listed; stays true once true. */
  readonly synced: boolean;
  /** The configured resources that do not exist now. */
  waiting(): string[];
  /** Why each configured resource is not answered from memory; empty when all are. */
  unsynced(): string[];
  /** Ends every watch served from the cache, and any begun from now on (shutdown). */
  endWatches(): void;
}
