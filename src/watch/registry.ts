// The watchers of one cached resource and the dispatch of each store event to them. Watchers are
// indexed as the apiserver's cacher indexes them: by an exact value of an indexed field (a kubelet
// or agent watching its node's pods) and by namespace, so an event costs only the watchers that
// might want it, not every watcher of the resource (cacher.go's indexedWatchers).
import type { Store } from '../store/store.ts';
import type { StoreEvent } from '../store/events.ts';
import type { FieldSelector } from '../selectors/fields.ts';
import { watchClock, type WatchClock } from './clock.ts';

/** A watcher as its registry sees it: where it is indexed, and what the registry tells it. */
export interface RegisteredWatcher {
  readonly namespace: string;
  readonly fields: FieldSelector;
  /** It asked for bookmarks (allowWatchBookmarks). */
  readonly takesBookmarks: boolean;
  offer(e: StoreEvent): void;
  bookmarkIfAllowed(): void;
  close(): void;
}

export class WatcherRegistry {
  readonly #byField = new Map<string, Map<string, Set<RegisteredWatcher>>>();
  readonly #byNamespace = new Map<string, Set<RegisteredWatcher>>();
  readonly #all = new Set<RegisteredWatcher>();
  #count = 0;
  #ended = false;
  /** What wakes these watchers for their bookmarks and deadlines. */
  readonly clock: WatchClock;

  constructor(store: Store, clock: WatchClock = watchClock) {
    this.clock = clock;
    for (const f of store.indexedFields) this.#byField.set(f, new Map());
    store.listen({
      event: (e) => this.#dispatch(e),
      // A relist: the apiserver would end every watch and make each client relist. Levee
      // delivers the differences between the old and the new state instead, then a bookmark at
      // the list's resourceVersion, and the watches carry on. Only for watchers that take
      // bookmarks: without one, a client would take the last difference's resourceVersion (an
      // object's own, older than the list) as where it is, and a resume from there would replay
      // history over the newer state. Those are ended as the apiserver ends them; each resumes
      // from the last event it really got, older than this window, so the apiserver answers it:
      // the events it missed, or 410 Gone.
      replaced: (_rv, changes) => {
        const everyone = [...this.#everyone()];
        for (const w of everyone) if (!w.takesBookmarks) w.close();
        for (const e of changes) this.#dispatch(e);
        for (const w of everyone) w.bookmarkIfAllowed();
      },
      progressed: () => undefined,
    });
  }

  get size(): number {
    return this.#count;
  }

  /** Registers a watcher under its most selective key. */
  add(watcher: RegisteredWatcher): void {
    // Past endAll() (shutdown) a watch that still arrives ends at once; its client re-watches elsewhere.
    if (this.#ended) {
      watcher.close();
      return;
    }
    const [map, key] = this.#keyOf(watcher);
    let set = map ? map.get(key) : this.#all;
    if (!set) map!.set(key, (set = new Set()));
    if (set.has(watcher)) return;
    set.add(watcher);
    this.#count++;
  }

  remove(watcher: RegisteredWatcher): void {
    const [map, key] = this.#keyOf(watcher);
    const set = map ? map.get(key) : this.#all;
    if (!set?.delete(watcher)) return;
    this.#count--;
    // Nodes and namespaces come and go; their sets should not outlive their last watcher.
    if (map && set.size === 0) map.delete(key);
  }

  /**
   * Where a watcher is registered, worked out again from its filter each time: keeping it, or a
   * closure that removes the watcher, would cost memory in each of tens of thousands of watches.
   * No map means the watchers of everything.
   */
  #keyOf(watcher: RegisteredWatcher): [Map<string, Set<RegisteredWatcher>> | undefined, string] {
    if (!watcher.fields.empty) {
      for (const [field, byValue] of this.#byField) {
        const value = watcher.fields.exact(field);
        if (value !== undefined) return [byValue, value];
      }
    }
    if (watcher.namespace !== '') return [this.#byNamespace, watcher.namespace];
    return [undefined, ''];
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

  *#everyone(): Iterable<RegisteredWatcher> {
    yield* [...this.#all];
    for (const set of this.#byNamespace.values()) yield* [...set];
    for (const byValue of this.#byField.values()) for (const set of byValue.values()) yield* [...set];
  }
}
