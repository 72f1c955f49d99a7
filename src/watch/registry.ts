// The watchers of one cached resource and the dispatch of each store event to them. Watchers are
// indexed as the apiserver's cacher indexes them: by an exact value of an indexed field (a kubelet
// or agent watching its node's pods) and by namespace, so an event costs only the watchers that
// might want it, not every watcher of the resource (cacher.go's indexedWatchers).
import type { Store } from '../store/store.ts';
import type { StoreEvent } from '../store/events.ts';
import type { CacheWatcher } from './watcher.ts';

interface Entry {
  watcher: CacheWatcher;
  remove(): void;
}

export class WatcherRegistry {
  readonly #byField = new Map<string, Map<string, Set<CacheWatcher>>>();
  readonly #byNamespace = new Map<string, Set<CacheWatcher>>();
  readonly #all = new Set<CacheWatcher>();
  #count = 0;
  #ended = false;

  constructor(store: Store) {
    for (const f of store.indexedFields) this.#byField.set(f, new Map());
    store.listen({
      event: (e) => this.#dispatch(e),
      // A relist: the apiserver would end every watch and make each client relist. Levee
      // delivers the differences between the old and the new state instead, then a bookmark at
      // the list's resourceVersion for watchers that take bookmarks, and the watches carry on.
      replaced: (_rv, changes) => {
        for (const e of changes) this.#dispatch(e);
        for (const w of this.#everyone()) w.bookmarkIfAllowed();
      },
      progressed: () => undefined,
    });
  }

  get size(): number {
    return this.#count;
  }

  /** Registers a watcher under its most selective key; returns how to unregister it. */
  add(watcher: CacheWatcher, namespace: string, exactFields: (field: string) => string | undefined): Entry {
    let set: Set<CacheWatcher> | undefined;
    for (const [field, byValue] of this.#byField) {
      const value = exactFields(field);
      if (value === undefined) continue;
      set = byValue.get(value);
      if (!set) byValue.set(value, (set = new Set()));
      break;
    }
    if (!set && namespace !== '') {
      set = this.#byNamespace.get(namespace);
      if (!set) this.#byNamespace.set(namespace, (set = new Set()));
    }
    set ??= this.#all;
    const target = set;
    // Past endAll() (shutdown) a watch that still arrives ends at once; its client re-watches elsewhere.
    if (this.#ended) watcher.close();
    target.add(watcher);
    this.#count++;
    return {
      watcher,
      remove: () => {
        if (target.delete(watcher)) this.#count--;
      },
    };
  }

  /**
   * Ends every watch cleanly, now and for any watcher added later: at shutdown each client sees its
   * watch end normally and re-watches, on another replica, from the last resourceVersion it got.
   */
  endAll(): void {
    this.#ended = true;
    for (const w of this.#everyone()) w.close();
  }

  #dispatch(e: StoreEvent): void {
    for (const w of this.#all) w.offer(e);
    const ns = this.#byNamespace.get(e.object.namespace);
    if (ns) for (const w of ns) w.offer(e);
    for (const [field, byValue] of this.#byField) {
      const now = e.object.fields[field] ?? '';
      const set = byValue.get(now);
      if (set) for (const w of set) w.offer(e);
      // A watcher of the value the object had before must see it leave (DELETED).
      const before = e.prev?.fields[field];
      if (before !== undefined && before !== now) {
        const prevSet = byValue.get(before);
        if (prevSet) for (const w of prevSet) w.offer(e);
      }
    }
  }

  *#everyone(): Iterable<CacheWatcher> {
    yield* [...this.#all];
    for (const set of this.#byNamespace.values()) yield* [...set];
    for (const byValue of this.#byField.values()) for (const set of byValue.values()) yield* [...set];
  }
}
