// Counts the items of a LIST body as it streams in, without parsing it. A pod list can be hundreds
// of MB: JSON.parse would need the whole body as one string (V8 caps strings near 512 MiB) and its
// time would swamp the latency being measured. The scan follows only nesting depth and string
// state, byte by byte, and counts every object that opens directly inside the top-level "items"
// array (the only array member of a List).
//
// This is deliberately separate from Levee's own splitter (src/reflector/jsonsplit.ts): a benchmark
// that checks Levee's answers should not share code with what it checks.
//
// UTF-8 is safe at the byte level: every byte of a multi-byte sequence is >= 0x80, so none can be
// mistaken for { } [ ] " or \.

const OPEN_OBJECT = 0x7b; // {
const CLOSE_OBJECT = 0x7d; // }
const OPEN_ARRAY = 0x5b; // [
const CLOSE_ARRAY = 0x5d; // ]
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

const OBJECT = 1;
const ARRAY = 2;

export class ListScanner {
  /** Objects seen directly inside the top-level array. */
  items = 0;
  /** Sum of the byte lengths of those objects (what a cache holding raw items would keep). */
  itemBytes = 0;
  /** All bytes of the body. */
  bytes = 0;

  #stack = new Uint8Array(512);
  #depth = 0;
  #inString = false;
  #escaped = false;
  /** Absolute offset where the current item began, or -1 outside an item. */
  #itemStart = -1;

  push(chunk: Uint8Array): void {
    // Hot loop: state lives in locals and is written back once per chunk.
    const stack = this.#stack;
    const base = this.bytes;
    let depth = this.#depth;
    let inString = this.#inString;
    let escaped = this.#escaped;
    let itemStart = this.#itemStart;
    let items = this.items;
    let itemBytes = this.itemBytes;
    for (let i = 0; i < chunk.length; i++) {
      const c = chunk[i]!;
      if (inString) {
        if (escaped) escaped = false;
        else if (c === BACKSLASH) escaped = true;
        else if (c === QUOTE) inString = false;
        continue;
      }
      if (c === QUOTE) {
        inString = true;
      } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
        if (c === OPEN_OBJECT && depth === 2 && stack[0] === OBJECT && stack[1] === ARRAY) {
          items++;
          itemStart = base + i;
        }
        if (depth === stack.length) throw new Error(`list body nests deeper than ${stack.length}`);
        stack[depth++] = c === OPEN_OBJECT ? OBJECT : ARRAY;
      } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
        depth--;
        if (depth === 2 && itemStart >= 0) {
          itemBytes += base + i + 1 - itemStart;
          itemStart = -1;
        }
      }
    }
    this.#depth = depth;
    this.#inString = inString;
    this.#escaped = escaped;
    this.#itemStart = itemStart;
    this.items = items;
    this.itemBytes = itemBytes;
    this.bytes = base + chunk.length;
  }

  /** True once the body closed its top-level value. */
  get complete(): boolean {
    return this.bytes > 0 && this.#depth === 0 && !this.#inString;
  }
}
