// Inverted indexes over the current state: value -> the objects that have it, keyed by object key.
// Used for label key=value and key existence, and for configured field indexes such as pods
// spec.nodeName, so a LIST for one node or one app costs O(result), not O(all objects). The index
// holds the objects themselves: looking each key up in the tree again cost ~1.6 µs per object.
// Every thread holds its own (docs/design.md, "Workers").
import type { CachedObject } from './object.ts';

/** The objects that have one value: by key, and in key order (a LIST's order) once asked for. */
export interface IndexEntries {
  readonly size: number;
  values(): IterableIterator<CachedObject>;
  /**
   * The same objects in key order. Kept until the next change to these entries, so repeated
   * LISTs of one node or one app do not sort again: a LIST of one node's 50 pods out of 50,000
   * spent 72 µs in sorting and visiting its candidates, mostly waiting on memory the sort touched.
   */
  inKeyOrder(): readonly CachedObject[];
}

class Entries implements IndexEntries {
  readonly #byKey = new Map<string, CachedObject>();
  #ordered: CachedObject[] | undefined;

  get size(): number {
    return this.#byKey.size;
  }

  values(): IterableIterator<CachedObject> {
    return this.#byKey.values();
  }

  inKeyOrder(): readonly CachedObject[] {
    if (this.#ordered) return this.#ordered;
    const ordered = [...this.#byKey.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    this.#ordered = ordered;
    return ordered;
  }

  set(o: CachedObject): void {
    this.#byKey.set(o.key, o);
    this.#ordered = undefined;
  }

  delete(key: string): void {
    if (this.#byKey.delete(key)) this.#ordered = undefined;
  }
}

const EMPTY: IndexEntries = new Entries();

export class InvertedIndex {
  readonly #byValue = new Map<string, Entries>();

  add(value: string, o: CachedObject): void {
    let entries = this.#byValue.get(value);
    if (!entries) {
      entries = new Entries();
      this.#byValue.set(value, entries);
    }
    entries.set(o);
  }

  /** The object at `o.key` now has `after` where it had `before`; an unchanged value's entry is overwritten in place. */
  update(before: string, after: string, o: CachedObject): void {
    if (before !== after) this.remove(before, o.key);
    this.add(after, o);
  }

  remove(value: string, key: string): void {
    const entries = this.#byValue.get(value);
    if (!entries) return;
    entries.delete(key);
    if (entries.size === 0) this.#byValue.delete(value);
  }

  get(value: string): IndexEntries {
    return this.#byValue.get(value) ?? EMPTY;
  }

  /** Every value's objects. */
  sets(): IterableIterator<IndexEntries> {
    return this.#byValue.values();
  }

  clear(): void {
    this.#byValue.clear();
  }
}

/**
 * The objects that have a label key, whatever its value: made from that key's value index when a
 * query asks, not kept. A second index by key alone held every labelled object once more per label
 * key (a Map entry each, in every thread), though the query planner scans instead whenever a set
 * holds more than a quarter of the objects, as the keys most objects carry (app, the
 * pod-template-hash) do.
 */
class KeyEntries implements IndexEntries {
  readonly #byValue: InvertedIndex;

  constructor(byValue: InvertedIndex) {
    this.#byValue = byValue;
  }

  get size(): number {
    let n = 0;
    for (const set of this.#byValue.sets()) n += set.size;
    return n;
  }

  *values(): IterableIterator<CachedObject> {
    for (const set of this.#byValue.sets()) yield* set.values();
  }

  inKeyOrder(): readonly CachedObject[] {
    const all: CachedObject[] = [];
    for (const set of this.#byValue.sets()) for (const o of set.values()) all.push(o);
    return all.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }
}

/** label key -> (value -> objects). */
export class LabelIndex {
  readonly #values = new Map<string, InvertedIndex>();

  add(o: CachedObject): void {
    for (const [k, v] of Object.entries(o.labels)) {
      let idx = this.#values.get(k);
      if (!idx) {
        idx = new InvertedIndex();
        this.#values.set(k, idx);
      }
      idx.add(v, o);
    }
  }

  /** `o` replaces `prev` (the same key): only the labels that changed are removed; the rest are overwritten. */
  update(prev: CachedObject, o: CachedObject): void {
    for (const [k, v] of Object.entries(prev.labels)) {
      if (Object.hasOwn(o.labels, k) && o.labels[k] === v) continue;
      this.#remove(k, v, prev.key);
    }
    this.add(o);
  }

  remove(o: CachedObject): void {
    for (const [k, v] of Object.entries(o.labels)) this.#remove(k, v, o.key);
  }

  #remove(labelKey: string, value: string, key: string): void {
    const idx = this.#values.get(labelKey);
    if (!idx) return;
    idx.remove(value, key);
    if (idx.sets().next().done) this.#values.delete(labelKey);
  }

  withValue(labelKey: string, value: string): IndexEntries {
    return this.#values.get(labelKey)?.get(value) ?? EMPTY;
  }

  withKey(labelKey: string): IndexEntries {
    const idx = this.#values.get(labelKey);
    return idx ? new KeyEntries(idx) : EMPTY;
  }

  clear(): void {
    this.#values.clear();
  }
}
