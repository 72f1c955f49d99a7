// Inverted indexes over the current state: value -> the objects that have it, keyed by object key.
// Used for label key=value and key existence, and for configured field indexes such as pods
// spec.nodeName, so a LIST for one node or one app costs O(result), not O(all objects). The index
// holds the objects themselves: looking each key up in the tree again cost ~1.6 µs per object.
import type { CachedObject } from './object.ts';

export type IndexEntries = ReadonlyMap<string, CachedObject>;

const EMPTY: IndexEntries = new Map();

export class InvertedIndex {
  readonly #byValue = new Map<string, Map<string, CachedObject>>();

  add(value: string, o: CachedObject): void {
    let entries = this.#byValue.get(value);
    if (!entries) {
      entries = new Map();
      this.#byValue.set(value, entries);
    }
    entries.set(o.key, o);
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

  clear(): void {
    this.#byValue.clear();
  }
}

/** label key -> (value -> objects), and label key -> objects for existence. */
export class LabelIndex {
  readonly #values = new Map<string, InvertedIndex>();
  readonly #exists = new InvertedIndex();

  add(o: CachedObject): void {
    for (const [k, v] of Object.entries(o.labels)) {
      let idx = this.#values.get(k);
      if (!idx) {
        idx = new InvertedIndex();
        this.#values.set(k, idx);
      }
      idx.add(v, o);
      this.#exists.add(k, o);
    }
  }

  remove(o: CachedObject): void {
    for (const [k, v] of Object.entries(o.labels)) {
      this.#values.get(k)?.remove(v, o.key);
      this.#exists.remove(k, o.key);
    }
  }

  withValue(labelKey: string, value: string): IndexEntries {
    return this.#values.get(labelKey)?.get(value) ?? EMPTY;
  }

  withKey(labelKey: string): IndexEntries {
    return this.#exists.get(labelKey);
  }

  clear(): void {
    this.#values.clear();
    this.#exists.clear();
  }
}
