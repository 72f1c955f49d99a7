// Inverted indexes over the current state: value -> keys of the objects that have it. Used for
// label key=value and key existence, and for configured field indexes such as pods spec.nodeName,
// so a LIST for one node or one app costs O(result), not O(all objects).

export class InvertedIndex {
  readonly #byValue = new Map<string, Set<string>>();

  add(value: string, key: string): void {
    let keys = this.#byValue.get(value);
    if (!keys) {
      keys = new Set();
      this.#byValue.set(value, keys);
    }
    keys.add(key);
  }

  remove(value: string, key: string): void {
    const keys = this.#byValue.get(value);
    if (!keys) return;
    keys.delete(key);
    if (keys.size === 0) this.#byValue.delete(value);
  }

  get(value: string): ReadonlySet<string> {
    return this.#byValue.get(value) ?? EMPTY;
  }

  clear(): void {
    this.#byValue.clear();
  }
}

const EMPTY: ReadonlySet<string> = new Set();

/** label key -> (value -> keys), and label key -> keys for existence. */
export class LabelIndex {
  readonly #values = new Map<string, InvertedIndex>();
  readonly #exists = new InvertedIndex();

  add(labels: Readonly<Record<string, string>>, key: string): void {
    for (const [k, v] of Object.entries(labels)) {
      let idx = this.#values.get(k);
      if (!idx) {
        idx = new InvertedIndex();
        this.#values.set(k, idx);
      }
      idx.add(v, key);
      this.#exists.add(k, key);
    }
  }

  remove(labels: Readonly<Record<string, string>>, key: string): void {
    for (const [k, v] of Object.entries(labels)) {
      this.#values.get(k)?.remove(v, key);
      this.#exists.remove(k, key);
    }
  }

  withValue(labelKey: string, value: string): ReadonlySet<string> {
    return this.#values.get(labelKey)?.get(value) ?? EMPTY;
  }

  withKey(labelKey: string): ReadonlySet<string> {
    return this.#exists.get(labelKey);
  }

  clear(): void {
    this.#values.clear();
    this.#exists.clear();
  }
}
