// Splitting Kubernetes JSON into per-object byte ranges without parsing the whole.
//
// Levee keeps each object's raw JSON bytes. A LIST body can be far larger than the biggest string
// V8 can hold (~512 MiB; a pod list can be gigabytes), and parsing all of it only to re-serialize
// each item is slow and keeps everything alive at once. So the body is cut at the byte level: a
// scanner follows nesting depth, whether it is inside a string, and whether the next byte is
// escaped, and reports where each value ends. Only the small parts around the items (kind,
// apiVersion, metadata) are handed to JSON.parse.
//
// Working on bytes rather than decoded text is safe for UTF-8: every byte of a multi-byte sequence
// is >= 0x80, so none of them can be mistaken for { } [ ] " or \.
//
// ListBodySplitter is for a LIST response arriving in chunks; ValueScanner is the shared byte
// scanner, also used to frame watch events (watchframe.ts).

/** The top-level fields of a LIST body other than its items. */
export interface ListEnvelope {
  kind: string;
  apiVersion: string;
  metadata: ListMetadata;
}

export interface ListMetadata {
  resourceVersion?: string;
  continue?: string;
  remainingItemCount?: number;
}

export interface ListBodySplitterOptions {
  /** Largest single item accepted, in bytes. An item is buffered whole before it is returned. */
  maxItemBytes?: number;
  /** Largest top-level field other than items (kind, metadata, ...), in bytes. */
  maxFieldBytes?: number;
  /** Deepest nesting accepted inside one value (Go's encoding/json stops at 10000). */
  maxDepth?: number;
}

export const DEFAULT_MAX_ITEM_BYTES = 64 * 1024 * 1024;
export const DEFAULT_MAX_FIELD_BYTES = 1024 * 1024;
export const DEFAULT_MAX_DEPTH = 10000;

// Byte values used below. Numeric constants rather than string compares: the scanner only ever
// looks at single bytes.
const QUOTE = 0x22; // "
const BACKSLASH = 0x5c; // \
const LBRACE = 0x7b; // {
const RBRACE = 0x7d; // }
const LBRACKET = 0x5b; // [
const RBRACKET = 0x5d; // ]
const COMMA = 0x2c; // ,
const COLON = 0x3a; // :

// What a byte outside strings means to the scanner. A table lookup plus a small switch costs the
// same as switching on the byte, and also rejects bytes that can never appear outside a string in
// JSON (letters other than those of true/false/null and exponents, control characters, non-ASCII),
// so garbage is caught here rather than only when the item is parsed later.
const C_PLAIN = 0; // whitespace , : and the characters of numbers and literals
const C_QUOTE = 1;
const C_OPEN = 2; // { or [
const C_CLOSE_OBJECT = 3;
const C_CLOSE_ARRAY = 4;
const C_INVALID = 5;

const CLASS = new Uint8Array(256).fill(C_INVALID);
for (const c of ' \t\n\r,:0123456789+-.eEtrufalsn') CLASS[c.charCodeAt(0)] = C_PLAIN;
CLASS[QUOTE] = C_QUOTE;
CLASS[LBRACE] = C_OPEN;
CLASS[LBRACKET] = C_OPEN;
CLASS[RBRACE] = C_CLOSE_OBJECT;
CLASS[RBRACKET] = C_CLOSE_ARRAY;

// Strings are walked byte by byte up to this length before indexOf takes over (see scan).
const SHORT_STRING = 64;

// Bytes that may make up a bare scalar (number, true, false, null) at the top of a value.
const SCALAR = new Uint8Array(256);
for (const c of '0123456789+-.eEtrufalsn') SCALAR[c.charCodeAt(0)] = 1;

export function isJsonWhitespace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/** A LIST body that is malformed, too large, or not a list. */
export class ListBodyError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'ListBodyError';
  }
}

/** A malformed value; `index` is the offending byte's position in the buffer passed to scan. */
export class JsonScanError extends Error {
  readonly index: number;
  constructor(message: string, index: number) {
    super(message);
    this.name = 'JsonScanError';
    this.index = index;
  }
}

/** Shows a byte in an error message. */
export function describeByte(c: number | undefined): string {
  if (c === undefined) return 'end of input';
  if (c >= 0x21 && c < 0x7f) return `'${String.fromCharCode(c)}'`;
  return `byte 0x${c.toString(16).padStart(2, '0')}`;
}

/**
 * Finds where one JSON value ends, over input that may arrive in pieces. Call reset() before each
 * value, then scan() with successive ranges until it returns the end. It checks structure (brackets
 * match, strings close, no bytes that cannot occur outside strings) but not the grammar of scalars
 * or of commas and colons inside containers: whoever uses the value parses it anyway.
 */
export class ValueScanner {
  readonly maxDepth: number;
  // Open brackets, innermost last. Preallocated and grown by doubling, so scanning allocates
  // nothing in the common case. Never longer than maxDepth, so a full stack is also the depth check.
  private stack: Uint8Array;
  private depth = 0;
  private started = false;
  private inString = false;
  // Inside a string, the last byte seen was an unpaired backslash (it may end a chunk).
  private escaped = false;
  private inScalar = false;

  constructor(maxDepth: number = DEFAULT_MAX_DEPTH) {
    this.maxDepth = maxDepth;
    this.stack = new Uint8Array(Math.min(64, maxDepth));
  }

  reset(): void {
    this.depth = 0;
    this.started = false;
    this.inString = false;
    this.escaped = false;
    this.inScalar = false;
  }

  /**
   * Continues the current value over buf[from, to). The first call must start at the value's first
   * byte (not whitespace). Returns the index just past the value's last byte, or -1 if the value
   * goes on past `to`. A bare number or literal only ends at the next byte that cannot belong to it,
   * so at the very end of the input it is reported as unfinished.
   */
  scan(buf: Buffer, from: number, to: number): number {
    let i = from;
    if (!this.started) {
      if (i >= to) return -1;
      const c = buf[i]!;
      this.started = true;
      if (c === QUOTE) {
        this.inString = true;
        i++;
      } else if (SCALAR[c] === 1) {
        this.inScalar = true;
      } else if (c !== LBRACE && c !== LBRACKET) {
        throw new JsonScanError(`expected a JSON value, found ${describeByte(c)}`, i);
      }
    }
    if (this.inScalar) {
      while (i < to && SCALAR[buf[i]!] === 1) i++;
      if (i === to) return -1;
      this.inScalar = false;
      return i;
    }

    // The hot loop. State lives in locals and is written back only when the range runs out.
    let depth = this.depth;
    let inString = this.inString;
    let escaped = this.escaped;
    let stack = this.stack;
    while (i < to) {
      if (inString) {
        // A pending escape from the previous range covers this byte, whatever it is.
        if (escaped) {
          escaped = false;
          if (++i === to) break;
        }
        // Most strings in Kubernetes objects are short (keys, names: ~12 bytes on average in a pod
        // list), and for those a call to indexOf costs more than walking the bytes here. So the
        // first SHORT_STRING bytes are walked, stepping over each backslash and the byte it
        // escapes; a string still open after that is handed to indexOf (memchr speed).
        const stop = i + SHORT_STRING < to ? i + SHORT_STRING : to;
        while (i < stop) {
          const c = buf[i]!;
          if (c === QUOTE) break;
          i += c === BACKSLASH ? 2 : 1;
        }
        if (i < stop) {
          // The closing quote.
          i++;
          inString = false;
        } else if (i >= to) {
          // The string goes on past this range; i === to + 1 means its last byte was a backslash
          // that escapes the first byte of the next range.
          escaped = i > to;
          i = to;
        } else {
          // A long string: jump from quote to quote with indexOf. A quote ends the string unless
          // an odd run of backslashes precedes it. The run is counted back no further than `s`:
          // at `s` no escape is pending, and the byte before it is the opening quote, an escaped
          // byte or an escaped quote, none of which extend the run.
          const s = i;
          let q = buf.indexOf(QUOTE, i);
          for (;;) {
            if (q < 0 || q >= to) {
              // The string goes on past this range: remember whether its last byte escapes the
              // next one.
              let k = to - 1;
              while (k >= s && buf[k] === BACKSLASH) k--;
              escaped = ((to - 1 - k) & 1) === 1;
              i = to;
              break;
            }
            let k = q - 1;
            while (k >= s && buf[k] === BACKSLASH) k--;
            if (((q - 1 - k) & 1) === 0) {
              i = q + 1;
              inString = false;
              break;
            }
            q = buf.indexOf(QUOTE, q + 1);
          }
        }
        if (inString) break;
        if (depth === 0) {
          // A string was the whole value.
          this.inString = false;
          this.escaped = false;
          return i;
        }
        continue;
      }
      const c = buf[i]!;
      switch (CLASS[c]) {
        case C_PLAIN:
          break;
        case C_QUOTE:
          inString = true;
          break;
        case C_OPEN:
          if (depth === stack.length) {
            if (depth >= this.maxDepth) {
              throw new JsonScanError(`nesting deeper than ${this.maxDepth}`, i);
            }
            const grown = new Uint8Array(Math.min(stack.length * 2, this.maxDepth));
            grown.set(stack);
            stack = this.stack = grown;
          }
          stack[depth++] = c;
          break;
        case C_CLOSE_OBJECT:
        case C_CLOSE_ARRAY: {
          const open = c === RBRACE ? LBRACE : LBRACKET;
          if (depth === 0 || stack[depth - 1] !== open) {
            const what = depth === 0 ? 'nothing' : `'${String.fromCharCode(stack[depth - 1]!)}'`;
            throw new JsonScanError(`'${String.fromCharCode(c)}' closes ${what}`, i);
          }
          if (--depth === 0) {
            this.depth = 0;
            return i + 1;
          }
          break;
        }
        default:
          throw new JsonScanError(`unexpected ${describeByte(c)}`, i);
      }
      i++;
    }
    this.depth = depth;
    this.inString = inString;
    this.escaped = escaped;
    return -1;
  }
}

/**
 * Copies pieces into one exactly-sized buffer of its own. allocUnsafeSlow rather than allocUnsafe
 * or Buffer.concat: those hand out slices of a shared pool (64 KiB in Node 24) below 32 KiB, and one cached
 * object would then keep its neighbours' pool memory (and the network chunks would stay alive if
 * we kept views of them).
 */
export function ownedCopy(pieces: readonly Buffer[], piecesBytes: number, last: Buffer, start: number, end: number): Buffer {
  const out = Buffer.allocUnsafeSlow(piecesBytes + (end - start));
  let off = 0;
  for (let p = 0; p < pieces.length; p++) {
    const piece = pieces[p]!;
    out.set(piece, off);
    off += piece.length;
  }
  last.copy(out, off, start, end);
  return out;
}

// Where the splitter is in the body's top-level grammar.
const S_START = 0; // before the opening {
const S_KEY_OR_CLOSE = 1; // after {
const S_KEY = 2; // after ,
const S_IN_KEY = 3;
const S_COLON = 4;
const S_VALUE = 5; // after :
const S_IN_FIELD = 6; // inside the value of a field other than items
const S_AFTER_VALUE = 7; // expecting , or }
const S_ITEMS_FIRST = 8; // after items' [
const S_ITEM = 9; // after a , in items
const S_IN_ITEM = 10;
const S_AFTER_ITEM = 11; // expecting , or ]
const S_DONE = 12; // after the closing }
const S_ENDED = 13; // end() returned
const S_FAILED = 14;

const EXPECTING: Record<number, string> = {
  [S_START]: "'{'",
  [S_KEY_OR_CLOSE]: "a key or '}'",
  [S_KEY]: 'a key',
  [S_COLON]: "':'",
  [S_AFTER_VALUE]: "',' or '}'",
  [S_ITEMS_FIRST]: "an item or ']'",
  [S_ITEM]: 'an item',
  [S_AFTER_ITEM]: "',' or ']'",
  [S_DONE]: 'nothing more',
};

/**
 * Splits a LIST response body (`{"kind":..., "metadata":{...}, "items":[...]}`) into its items as
 * the body arrives. Each item comes back as a Buffer of its own holding exactly its bytes. Top-level
 * fields may come in any order. Bodies are checked as they go; anything malformed throws, and the
 * splitter is then unusable.
 *
 * A chunk passed to push() must not be modified afterwards: while an item spans chunks, views of
 * them are kept until the item is complete and copied out (network stream chunks are never reused).
 */
export class ListBodySplitter {
  private readonly maxItemBytes: number;
  private readonly maxFieldBytes: number;
  private readonly scanner: ValueScanner;
  private state = S_START;
  private failure: Error | undefined;
  // Absolute offset of the current chunk's first byte, for error messages.
  private offset = 0;
  // The value being captured (key, field or item), if it started in an earlier chunk.
  private readonly pieces: Buffer[] = [];
  private piecesBytes = 0;
  private key = '';
  private sawItems = false;
  private itemCount = 0;
  private readonly fields = new Map<string, unknown>();

  constructor(options: ListBodySplitterOptions = {}) {
    this.maxItemBytes = options.maxItemBytes ?? DEFAULT_MAX_ITEM_BYTES;
    this.maxFieldBytes = options.maxFieldBytes ?? DEFAULT_MAX_FIELD_BYTES;
    this.scanner = new ValueScanner(options.maxDepth ?? DEFAULT_MAX_DEPTH);
  }

  /** Number of items returned so far. */
  get count(): number {
    return this.itemCount;
  }

  /** Feeds the next chunk; returns the items it completed, in order. */
  push(chunk: Buffer): Buffer[] {
    this.usable();
    try {
      return this.consume(chunk);
    } catch (err) {
      throw this.fail(err);
    }
  }

  /** Checks that the body ended after its closing brace and returns the fields other than items. */
  end(): ListEnvelope {
    this.usable();
    try {
      if (this.state !== S_DONE) {
        const inside = this.state === S_IN_ITEM || this.state === S_IN_KEY || this.state === S_IN_FIELD;
        const what = inside ? `inside ${this.capturing()}` : `expecting ${EXPECTING[this.state]}`;
        throw this.err(`body ends early, ${what},`, 0);
      }
      this.state = S_ENDED;
      return this.envelope();
    } catch (err) {
      throw this.fail(err);
    }
  }

  private usable(): void {
    if (this.state === S_FAILED) throw new ListBodyError('list body: splitter already failed', { cause: this.failure });
    if (this.state === S_ENDED) throw new ListBodyError('list body: splitter already ended');
  }

  // What is being captured, for error messages.
  private capturing(): string {
    if (this.state === S_IN_ITEM) return `items[${this.itemCount}]`;
    if (this.state === S_IN_KEY) return 'a key';
    return `the value of ${JSON.stringify(this.key)}`;
  }

  private fail(err: unknown): Error {
    let e: Error;
    if (err instanceof JsonScanError) {
      e = this.err(`${this.capturing()}: ${err.message}`, err.index);
    } else if (err instanceof Error) {
      e = err;
    } else {
      e = new ListBodyError(`list body: ${String(err)}`);
    }
    this.state = S_FAILED;
    this.failure = e;
    this.pieces.length = 0;
    return e;
  }

  private err(message: string, chunkIndex: number): Error {
    return new ListBodyError(`list body: ${message} at byte ${this.offset + chunkIndex}`);
  }

  private consume(chunk: Buffer): Buffer[] {
    const out: Buffer[] = [];
    const n = chunk.length;
    const scanner = this.scanner;
    // Start of the value being captured within this chunk (0 if it began in an earlier chunk).
    let start = 0;
    let i = 0;
    while (i < n) {
      const state = this.state;
      if (state === S_IN_ITEM) {
        const e = scanner.scan(chunk, i, n);
        if (e < 0) {
          this.keep(chunk, start, n, this.maxItemBytes, `items[${this.itemCount}]`);
          break;
        }
        if (this.piecesBytes + (e - start) > this.maxItemBytes) this.tooBig(`items[${this.itemCount}]`, this.maxItemBytes);
        out.push(ownedCopy(this.pieces, this.piecesBytes, chunk, start, e));
        // Reuse the array: its views were only needed until the copy.
        this.pieces.length = 0;
        this.piecesBytes = 0;
        this.itemCount++;
        this.state = S_AFTER_ITEM;
        i = e;
        continue;
      }
      if (state === S_IN_KEY || state === S_IN_FIELD) {
        const e = scanner.scan(chunk, i, n);
        if (e < 0) {
          this.keep(chunk, start, n, this.maxFieldBytes, this.capturing());
          break;
        }
        this.finishCapture(chunk, start, e);
        i = e;
        continue;
      }
      const c = chunk[i]!;
      if (isJsonWhitespace(c)) {
        i++;
        continue;
      }
      switch (state) {
        case S_START:
          if (c !== LBRACE) throw this.err(`expected '{' (a JSON object), found ${describeByte(c)}`, i);
          this.state = S_KEY_OR_CLOSE;
          i++;
          break;
        case S_KEY_OR_CLOSE:
        case S_KEY:
          if (c === RBRACE && state === S_KEY_OR_CLOSE) {
            this.state = S_DONE;
            i++;
            break;
          }
          if (c !== QUOTE) throw this.err(`expected ${EXPECTING[state]}, found ${describeByte(c)}`, i);
          scanner.reset();
          this.key = '';
          this.state = S_IN_KEY;
          start = i;
          break;
        case S_COLON:
          if (c !== COLON) throw this.err(`expected ':' after key ${JSON.stringify(this.key)}, found ${describeByte(c)}`, i);
          this.state = S_VALUE;
          i++;
          break;
        case S_VALUE:
          if (this.key === 'items') {
            if (this.sawItems) throw this.err('"items" appears twice', i);
            this.sawItems = true;
            if (c === LBRACKET) {
              this.state = S_ITEMS_FIRST;
              i++;
              break;
            }
            // Anything else (null is allowed) is captured as a field and checked in finishCapture.
          }
          scanner.reset();
          this.state = S_IN_FIELD;
          start = i;
          break;
        case S_AFTER_VALUE:
          if (c === COMMA) this.state = S_KEY;
          else if (c === RBRACE) this.state = S_DONE;
          else throw this.err(`expected ',' or '}' after the value of ${JSON.stringify(this.key)}, found ${describeByte(c)}`, i);
          i++;
          break;
        case S_ITEMS_FIRST:
        case S_ITEM:
          if (c === RBRACKET && state === S_ITEMS_FIRST) {
            this.key = 'items';
            this.state = S_AFTER_VALUE;
            i++;
            break;
          }
          if (c !== LBRACE) throw this.err(`expected items[${this.itemCount}] to be an object, found ${describeByte(c)}`, i);
          scanner.reset();
          this.state = S_IN_ITEM;
          start = i;
          break;
        case S_AFTER_ITEM:
          if (c === COMMA) this.state = S_ITEM;
          else if (c === RBRACKET) {
            this.key = 'items';
            this.state = S_AFTER_VALUE;
          } else throw this.err(`expected ',' or ']' after items[${this.itemCount - 1}], found ${describeByte(c)}`, i);
          i++;
          break;
        case S_DONE:
          throw this.err(`unexpected ${describeByte(c)} after the end of the body`, i);
        default:
          throw this.err(`internal: unknown state ${state}`, i);
      }
    }
    this.offset += n;
    return out;
  }

  // Holds on to the unfinished tail of a captured value until a later chunk completes it.
  private keep(chunk: Buffer, start: number, end: number, max: number, what: string): void {
    if (end === start) return;
    this.piecesBytes += end - start;
    if (this.piecesBytes > max) this.tooBig(what, max);
    this.pieces.push(start === 0 && end === chunk.length ? chunk : chunk.subarray(start, end));
  }

  private tooBig(what: string, max: number): never {
    throw new ListBodyError(`list body: ${what} is larger than ${max} bytes`);
  }

  // A key or a non-items field value is complete: decode it with JSON.parse (it is small).
  private finishCapture(chunk: Buffer, start: number, end: number): void {
    const max = this.maxFieldBytes;
    if (this.piecesBytes + (end - start) > max) this.tooBig(this.capturing(), max);
    const text = this.pieces.length === 0 ? chunk.toString('utf8', start, end) : Buffer.concat([...this.pieces, chunk.subarray(start, end)]).toString('utf8');
    this.pieces.length = 0;
    this.piecesBytes = 0;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (err) {
      throw this.err(`malformed ${this.capturing()} (${(err as Error).message}) ending`, end - 1);
    }
    if (this.state === S_IN_KEY) {
      this.key = value as string;
      this.state = S_COLON;
      return;
    }
    if (this.key === 'items') {
      if (value !== null) throw this.err('"items" is not an array', start);
    } else {
      this.fields.set(this.key, value);
    }
    this.state = S_AFTER_VALUE;
  }

  private envelope(): ListEnvelope {
    if (!this.sawItems) {
      const kind = this.fields.get('kind');
      throw new ListBodyError(`list body: not a list: no "items"${typeof kind === 'string' ? ` (kind ${kind})` : ''}`);
    }
    const kind = this.fields.get('kind');
    const apiVersion = this.fields.get('apiVersion');
    if (typeof kind !== 'string') throw new ListBodyError('list body: "kind" is missing or not a string');
    if (typeof apiVersion !== 'string') throw new ListBodyError('list body: "apiVersion" is missing or not a string');
    const raw = this.fields.get('metadata');
    const metadata: ListMetadata = {};
    if (raw !== undefined && raw !== null) {
      if (typeof raw !== 'object' || Array.isArray(raw)) throw new ListBodyError('list body: "metadata" is not an object');
      const m = raw as Record<string, unknown>;
      if (m.resourceVersion !== undefined) {
        if (typeof m.resourceVersion !== 'string') throw new ListBodyError('list body: metadata.resourceVersion is not a string');
        metadata.resourceVersion = m.resourceVersion;
      }
      if (m.continue !== undefined) {
        if (typeof m.continue !== 'string') throw new ListBodyError('list body: metadata.continue is not a string');
        metadata.continue = m.continue;
      }
      if (m.remainingItemCount !== undefined && m.remainingItemCount !== null) {
        if (!Number.isSafeInteger(m.remainingItemCount)) throw new ListBodyError('list body: metadata.remainingItemCount is not an integer');
        metadata.remainingItemCount = m.remainingItemCount as number;
      }
    }
    return { kind, apiVersion, metadata };
  }
}
