// One copy of each repeated string in a worker's replica of the cache (replica.ts). Objects reach a
// replica by structured clone, which writes every string out by value: each pod's namespace, node
// name, phase, restart policy and label values arrive as strings of their own, where the owner's
// JSON.parse shares the short ones. Replicated, they are most of what a worker holds per object
// beyond the shared bytes.
//
// Bounded: a value seen once (a pod's IP) is held here as long as the table is, so the table
// starts again once it holds MAX_ENTRIES; values that repeat are found again after it does.

const MAX_ENTRIES = 65_536;
/** Longer strings are rarely shared (names, IPs, hashes are shorter; descriptions are not). */
const MAX_LENGTH = 64;

export class StringTable {
  #strings = new Map<string, string>();

  /** The table's copy of `s`, or `s` itself, kept as the copy from now on. */
  intern(s: string): string {
    if (s.length > MAX_LENGTH) return s;
    const found = this.#strings.get(s);
    if (found !== undefined) return found;
    if (this.#strings.size >= MAX_ENTRIES) this.#strings = new Map();
    this.#strings.set(s, s);
    return s;
  }

  get size(): number {
    return this.#strings.size;
  }
}
