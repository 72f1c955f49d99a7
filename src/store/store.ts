// The current state of one cached resource, its indexes and recent point-in-time snapshots. The
// reflector writes it; the read path lists from it. It knows nothing about HTTP.
import { newObjectTree, type Tree } from './btree.ts';
import { InvertedIndex, LabelIndex } from './index.ts';
import type { CachedObject } from './object.ts';
import { EventWindow, type StoreEvent } from './events.ts';

export interface StoreListener {
  /** One event, after the store applied it. */
  event(e: StoreEvent): void;
  /**
   * The whole state was replaced (a relist): history before it is gone. `changes` are the
   * differences from the previous state as events at the list's resourceVersion, in key order.
   */
  replaced(resourceVersion: number, changes: readonly StoreEvent[]): void;
  /** The store's resourceVersion moved without an event (a bookmark). */
  progressed(resourceVersion: number): void;
}

export type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface Snapshot {
  resourceVersion: number;
  tree: Tree;
  takenAt: number;
}

export interface StoreOptions {
  /** Selectable fields to index by value (pods: spec.nodeName). */
  fieldIndexes?: readonly string[];
  /** How long snapshots are kept for continue tokens and Exact reads (the apiserver's window is 75 s). */
  snapshotWindowMs?: number;
  /** And at most this many (one per change), so a busy resource keeps fewer seconds of them. */
  maxSnapshots?: number;
  now?: () => number;
}

export class Store {
  #tree: Tree = newObjectTree();
  // The live objects by key, beside the tree: a GET finds its object with one hash probe instead
  // of a descent through the tree's nodes, which on a CPU shared with other servers means a cache
  // miss at each level. The tree stays for ordered scans and snapshots.
  #byKey = new Map<string, CachedObject>();
  readonly #labels = new LabelIndex();
  readonly #fields = new Map<string, InvertedIndex>();
  #resourceVersion = 0;
  #synced = false;
  #bytes = 0;
  // Ascending by resourceVersion. The first one marks where the window starts: states at any RV
  // from there to now are known exactly.
  #snapshots: Snapshot[] = [];
  #waiters: Array<{ rv: number; resolve: (fresh: boolean) => void }> = [];
  readonly events = new EventWindow();
  readonly #listeners = new Set<StoreListener>();
  readonly #windowMs: number;
  readonly #maxSnapshots: number;
  readonly #now: () => number;

  constructor(opts: StoreOptions = {}) {
    for (const f of opts.fieldIndexes ?? []) this.#fields.set(f, new InvertedIndex());
    this.#windowMs = opts.snapshotWindowMs ?? 75_000;
    this.#maxSnapshots = opts.maxSnapshots ?? 1024;
    this.#now = opts.now ?? Date.now;
  }

  get resourceVersion(): number {
    return this.#resourceVersion;
  }

  /** True once a full list has been stored; false again only if the store is reset. */
  get synced(): boolean {
    return this.#synced;
  }

  get size(): number {
    return this.#tree.size;
  }

  /** Raw JSON bytes held for current objects. */
  get bytes(): number {
    return this.#bytes;
  }

  get tree(): Tree {
    return this.#tree;
  }

  get indexedFields(): ReadonlySet<string> {
    return new Set(this.#fields.keys());
  }

  get(key: string): CachedObject | undefined {
    return this.#byKey.get(key);
  }

  labelIndex(): LabelIndex {
    return this.#labels;
  }

  fieldIndex(field: string): InvertedIndex | undefined {
    return this.#fields.get(field);
  }

  /** Replaces the whole state after a (re)list at `resourceVersion`. Older snapshots no longer describe a known history. */
  replace(objects: Iterable<CachedObject>, resourceVersion: number): void {
    const before = this.#synced && this.#listeners.size > 0 ? this.#tree : undefined;
    this.#tree = newObjectTree();
    this.#byKey = new Map();
    this.#labels.clear();
    for (const idx of this.#fields.values()) idx.clear();
    this.#bytes = 0;
    for (const o of objects) this.#insert(o);
    this.#resourceVersion = resourceVersion;
    this.#synced = true;
    this.#snapshots = [{ resourceVersion, tree: this.#tree.clone(), takenAt: this.#now() }];
    this.events.reset(resourceVersion);
    this.#wake();
    const changes = before ? diff(before, this.#tree, resourceVersion, this.#now()) : [];
    for (const l of this.#listeners) l.replaced(resourceVersion, changes);
  }

  listen(l: StoreListener): () => void {
    this.#listeners.add(l);
    return () => this.#listeners.delete(l);
  }

  /** Applies one watch event. Returns the previous version of the object, if any. */
  apply(type: EventType, object: CachedObject): CachedObject | undefined {
    const prev = this.#byKey.get(object.key);
    if (type === 'DELETED') {
      if (prev) this.#remove(prev);
    } else if (prev) this.#update(prev, object);
    else this.#insert(object);
    this.#advance(object.resourceVersion);
    this.#snapshot();
    const e: StoreEvent = { type, object, prev, resourceVersion: object.resourceVersion, at: this.#now() };
    this.events.push(e);
    for (const l of this.#listeners) l.event(e);
    return prev;
  }

  /** A BOOKMARK: nothing changed up to `resourceVersion`. */
  bookmark(resourceVersion: number): void {
    const before = this.#resourceVersion;
    this.#advance(resourceVersion);
    if (this.#resourceVersion > before) for (const l of this.#listeners) l.progressed(this.#resourceVersion);
  }

  /**
   * The state at exactly `resourceVersion`, if it is inside the window: the newest snapshot not
   * newer than it (nothing changed between that snapshot and the RV asked for).
   */
  snapshotAt(resourceVersion: number): Snapshot | undefined {
    this.#prune();
    const snaps = this.#snapshots;
    if (snaps.length === 0 || resourceVersion < snaps[0]!.resourceVersion || resourceVersion > this.#resourceVersion) {
      return undefined;
    }
    let lo = 0;
    let hi = snaps.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (snaps[mid]!.resourceVersion <= resourceVersion) lo = mid;
      else hi = mid - 1;
    }
    return snaps[lo];
  }

  /** The current state as a snapshot, kept so later pages of a list can be read from it. */
  current(): Snapshot {
    const last = this.#snapshots.at(-1);
    if (last && last.resourceVersion === this.#resourceVersion) return last;
    const snap = { resourceVersion: this.#resourceVersion, tree: this.#tree.clone(), takenAt: this.#now() };
    this.#snapshots.push(snap);
    return snap;
  }

  /** Resolves true once the store has seen `resourceVersion`, false after `timeoutMs`. */
  waitUntilFresh(resourceVersion: number, timeoutMs: number): Promise<boolean> {
    if (this.#synced && this.#resourceVersion >= resourceVersion) return Promise.resolve(true);
    return new Promise((resolve) => {
      const waiter = {
        rv: resourceVersion,
        resolve: (fresh: boolean) => {
          clearTimeout(timer);
          resolve(fresh);
        },
      };
      const timer = setTimeout(() => {
        this.#waiters = this.#waiters.filter((w) => w !== waiter);
        resolve(false);
      }, timeoutMs);
      // A waiter serves a reader, whose connection keeps the process alive while it is open; a
      // watch-list's wait (up to 65 s, serve/freshness.ts) must not hold up exit at shutdown.
      timer.unref();
      this.#waiters.push(waiter);
    });
  }

  #insert(o: CachedObject): void {
    this.#tree.set(o.key, o);
    this.#byKey.set(o.key, o);
    this.#labels.add(o);
    for (const [field, idx] of this.#fields) idx.add(o.fields[field] ?? '', o);
    this.#bytes += o.item.length;
  }

  /**
   * A new version of a stored object, written over the old one. Most changes keep the object's
   * labels and indexed fields (a status, an annotation), so each index entry is overwritten where
   * it is rather than deleted and added again: a deleted entry leaves a hole in the hash table,
   * and every few thousand updates the table of a value most objects share (status.phase=Running,
   * a namespace-wide label) was rebuilt whole, holding up the event for milliseconds.
   */
  #update(prev: CachedObject, o: CachedObject): void {
    this.#tree.set(o.key, o);
    this.#byKey.set(o.key, o);
    this.#labels.update(prev, o);
    for (const [field, idx] of this.#fields) idx.update(prev.fields[field] ?? '', o.fields[field] ?? '', o);
    this.#bytes += o.item.length - prev.item.length;
  }

  #remove(o: CachedObject): void {
    this.#tree.delete(o.key);
    this.#byKey.delete(o.key);
    this.#labels.remove(o);
    for (const [field, idx] of this.#fields) idx.remove(o.fields[field] ?? '', o.key);
    this.#bytes -= o.item.length;
  }

  #advance(resourceVersion: number): void {
    if (resourceVersion > this.#resourceVersion) this.#resourceVersion = resourceVersion;
    this.#wake();
  }

  #wake(): void {
    if (this.#waiters.length === 0 || !this.#synced) return;
    const rv = this.#resourceVersion;
    const ready = this.#waiters.filter((w) => w.rv <= rv);
    if (ready.length === 0) return;
    this.#waiters = this.#waiters.filter((w) => w.rv > rv);
    for (const w of ready) w.resolve(true);
  }

  #snapshot(): void {
    // O(1): the tree copies the nodes a later write touches, so each snapshot costs a path.
    this.#snapshots.push({ resourceVersion: this.#resourceVersion, tree: this.#tree.clone(), takenAt: this.#now() });
    this.#prune();
  }

  #prune(): void {
    const cutoff = this.#now() - this.#windowMs;
    const snaps = this.#snapshots;
    // One leaves for every one that arrives once the window is full, on every event. shift()
    // moves the start of a V8 array instead of copying it; slice() copied all of the window's
    // (up to 1,024) entries per event and made as much garbage.
    while (snaps.length > 1 && (snaps.length > this.#maxSnapshots || snaps[0]!.takenAt < cutoff)) snaps.shift();
  }
}

/** What changed between two states, as events at `resourceVersion`, in key order. */
function diff(before: Tree, after: Tree, resourceVersion: number, at: number): StoreEvent[] {
  const changed: StoreEvent[] = [];
  const deleted: StoreEvent[] = [];
  const a = before.values();
  const b = after.values();
  const next = (it: Iterator<CachedObject>): CachedObject | undefined => {
    const r = it.next();
    return r.done ? undefined : r.value;
  };
  let x = next(a);
  let y = next(b);
  while (x || y) {
    if (x && (!y || x.key < y.key)) {
      deleted.push({ type: 'DELETED', object: x, prev: x, resourceVersion, at });
      x = next(a);
    } else if (y && (!x || y.key < x.key)) {
      changed.push({ type: 'ADDED', object: y, prev: undefined, resourceVersion, at });
      y = next(b);
    } else if (x && y) {
      if (x.resourceVersion !== y.resourceVersion) changed.push({ type: 'MODIFIED', object: y, prev: x, resourceVersion, at });
      x = next(a);
      y = next(b);
    }
  }
  // In the order of the resourceVersions a client sees: an ADDED or MODIFIED object carries its own
  // (newer than anything the old state held, older than the list), a DELETED one the list's. A
  // client takes the last one it got as where to resume: in key order it could go backwards, and a
  // resume from there would be sent again what it already has.
  changed.sort((p, q) => p.object.resourceVersion - q.object.resourceVersion);
  return [...changed, ...deleted];
}
