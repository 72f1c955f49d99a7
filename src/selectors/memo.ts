// A parse remembered by its input, for the few request fields that are parsed again and again: a
// request's query is read by four stages, its Accept header and field selector by two, and a
// DaemonSet's agents send the same few headers and selectors. (Here, on the ground floor, so that
// the selectors and the api rooms above them share it.) Each parse allocates several KB (strings, arrays, Maps)
// that, in a burst of thousands of requests, outlive the young generation and fragment the old
// one; a hit allocates nothing. What is remembered must never be changed by its readers.
//
// Bounded by entries and by input length, and emptied when full rather than kept in LRU order: a
// hit must cost less than the parse it saves, and a working set that does not fit is parsed as
// before.
export class ParseMemo<T> {
  readonly #entries = new Map<string, T>();
  readonly #max: number;
  readonly #maxKeyLength: number;
  readonly #parse: (input: string) => T;

  constructor(parse: (input: string) => T, opts: { max: number; maxKeyLength: number }) {
    this.#parse = parse;
    this.#max = opts.max;
    this.#maxKeyLength = opts.maxKeyLength;
  }

  get(input: string): T {
    if (input.length > this.#maxKeyLength) return this.#parse(input);
    const hit = this.#entries.get(input);
    if (hit !== undefined || this.#entries.has(input)) return hit as T;
    // A parse that throws is not remembered: it throws again next time, as it should.
    const value = this.#parse(input);
    if (this.#entries.size >= this.#max) this.#entries.clear();
    this.#entries.set(input, value);
    return value;
  }
}
