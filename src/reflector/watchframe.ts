// Framing of a JSON watch stream. The apiserver writes each event as one line of compact JSON,
// `{"type":"ADDED","object":{...}}\n` (Go's json.Encoder ends every value with a newline, and a raw
// newline cannot occur inside a JSON string, so the first newline always ends the event). Each
// event's object is cut out as raw bytes with the same byte scanner the LIST splitter uses, without
// parsing it: it is stored and served as those bytes.
import { DEFAULT_MAX_DEPTH, JsonScanError, ValueScanner, describeByte, isJsonWhitespace, ownedCopy } from './jsonsplit.ts';

export interface WatchFrame {
  /** ADDED, MODIFIED, DELETED, BOOKMARK or ERROR. */
  type: string;
  /** Exactly the bytes of the event's "object" value, in a buffer of its own. */
  object: Buffer;
  /** The whole event without its newline, in a buffer of its own. */
  line: Buffer;
}

/** A watch stream that is malformed or whose event is too long. */
export class WatchStreamError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'WatchStreamError';
  }
}

export interface WatchFramerOptions {
  /** Longest event line accepted, in bytes; a partial line longer than this throws at once. */
  maxLineBytes?: number;
  /** Deepest nesting accepted inside one event. */
  maxDepth?: number;
}

export const DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024;

const NEWLINE = 0x0a;
const QUOTE = 0x22;
const COMMA = 0x2c;
const COLON = 0x3a;
const LBRACE = 0x7b;
const RBRACE = 0x7d;
const BACKSLASH = 0x5c;

/**
 * Cuts a watch response body into events as it arrives. Blank lines are skipped. Anything malformed
 * throws, and the framer is then unusable.
 *
 * A chunk passed to push() must not be modified afterwards: a partial line is kept as views of the
 * chunks it spans until its newline arrives and it is copied out.
 */
export class WatchFramer {
  private readonly maxLineBytes: number;
  private readonly scanner: ValueScanner;
  private readonly pending: Buffer[] = [];
  private pendingBytes = 0;
  // Absolute offset of the current chunk's first byte and number of lines seen (blank ones
  // included), for error messages.
  private offset = 0;
  private lineNo = 0;
  private failure: Error | undefined;
  private ended = false;

  constructor(options: WatchFramerOptions = {}) {
    this.maxLineBytes = options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
    this.scanner = new ValueScanner(options.maxDepth ?? DEFAULT_MAX_DEPTH);
  }

  /** Feeds the next chunk; returns the events it completed, in order. */
  push(chunk: Buffer): WatchFrame[] {
    this.usable();
    try {
      return this.consume(chunk);
    } catch (err) {
      throw this.fail(err);
    }
  }

  /** Checks that the stream did not stop in the middle of an event. */
  end(): void {
    this.usable();
    this.ended = true;
    for (const piece of this.pending) {
      for (let i = 0; i < piece.length; i++) {
        if (!isJsonWhitespace(piece[i]!)) {
          throw this.fail(new WatchStreamError(`watch stream: ends inside line ${this.lineNo + 1} (${this.pendingBytes} bytes without a newline)`));
        }
      }
    }
    this.pending.length = 0;
    this.pendingBytes = 0;
  }

  private usable(): void {
    if (this.failure !== undefined) throw new WatchStreamError('watch stream: framer already failed', { cause: this.failure });
    if (this.ended) throw new WatchStreamError('watch stream: framer already ended');
  }

  private fail(err: unknown): Error {
    const e = err instanceof Error ? err : new WatchStreamError(`watch stream: ${String(err)}`);
    this.failure = e;
    this.pending.length = 0;
    return e;
  }

  private consume(chunk: Buffer): WatchFrame[] {
    const out: WatchFrame[] = [];
    const n = chunk.length;
    let i = 0;
    while (i < n) {
      const nl = chunk.indexOf(NEWLINE, i);
      if (nl < 0) {
        this.pendingBytes += n - i;
        if (this.pendingBytes > this.maxLineBytes) this.tooLong();
        this.pending.push(i === 0 ? chunk : chunk.subarray(i));
        break;
      }
      if (this.pendingBytes + (nl - i) > this.maxLineBytes) this.tooLong();
      const lineStart = this.offset + i - this.pendingBytes;
      this.lineNo++;
      const line = ownedCopy(this.pending, this.pendingBytes, chunk, i, nl);
      this.pending.length = 0;
      this.pendingBytes = 0;
      const frame = this.frame(line, lineStart);
      if (frame !== undefined) out.push(frame);
      i = nl + 1;
    }
    this.offset += n;
    return out;
  }

  private tooLong(): never {
    throw new WatchStreamError(`watch stream: line ${this.lineNo + 1} is longer than ${this.maxLineBytes} bytes`);
  }

  private err(message: string, lineStart: number, at: number): Error {
    return new WatchStreamError(`watch stream: line ${this.lineNo}: ${message} at byte ${lineStart + at}`);
  }

  // Scans one value of the line (key is undefined for a key itself); it must end within the line.
  private valueEnd(line: Buffer, from: number, key: string | undefined, lineStart: number): number {
    const scanner = this.scanner;
    scanner.reset();
    let e: number;
    try {
      e = scanner.scan(line, from, line.length);
    } catch (x) {
      if (x instanceof JsonScanError) throw this.err(`${describeKey(key)}: ${x.message}`, lineStart, x.index);
      throw x;
    }
    if (e < 0) throw this.err(`${describeKey(key)} is cut off by the end of the line`, lineStart, line.length);
    return e;
  }

  // Finds "type" and "object" among the event's top-level keys, in whatever order they come.
  private frame(line: Buffer, lineStart: number): WatchFrame | undefined {
    const n = line.length;
    let i = skipWhitespace(line, 0);
    if (i === n) return undefined;
    if (line[i] !== LBRACE) throw this.err(`expected '{', found ${describeByte(line[i])}`, lineStart, i);
    i = skipWhitespace(line, i + 1);
    let type: string | undefined;
    let objectStart = -1;
    let objectEnd = -1;
    if (line[i] === RBRACE) {
      i++;
    } else {
      for (;;) {
        if (line[i] !== QUOTE) throw this.err(`expected a key, found ${describeByte(line[i])}`, lineStart, i);
        const keyEnd = this.valueEnd(line, i, undefined, lineStart);
        const key = keyText(line, i, keyEnd);
        if (key === undefined) throw this.err('malformed key', lineStart, i);
        i = skipWhitespace(line, keyEnd);
        if (line[i] !== COLON) throw this.err(`expected ':' after key ${JSON.stringify(key)}, found ${describeByte(line[i])}`, lineStart, i);
        i = skipWhitespace(line, i + 1);
        const end = this.valueEnd(line, i, key, lineStart);
        if (key === 'object') {
          if (objectStart >= 0) throw this.err('"object" appears twice', lineStart, i);
          if (line[i] !== LBRACE) throw this.err('"object" is not a JSON object', lineStart, i);
          objectStart = i;
          objectEnd = end;
        } else if (key === 'type') {
          if (type !== undefined) throw this.err('"type" appears twice', lineStart, i);
          if (line[i] !== QUOTE) throw this.err('"type" is not a string', lineStart, i);
          type = parseString(line, i, end);
          if (type === undefined) throw this.err('malformed "type"', lineStart, i);
        }
        i = skipWhitespace(line, end);
        if (line[i] === COMMA) {
          i = skipWhitespace(line, i + 1);
          continue;
        }
        if (line[i] === RBRACE) {
          i++;
          break;
        }
        throw this.err(`expected ',' or '}', found ${describeByte(line[i])}`, lineStart, i);
      }
    }
    i = skipWhitespace(line, i);
    if (i !== n) throw this.err(`unexpected ${describeByte(line[i])} after the event`, lineStart, i);
    if (type === undefined) throw this.err('no "type"', lineStart, 0);
    if (objectStart < 0) throw this.err('no "object"', lineStart, 0);
    // The object gets a buffer of its own rather than a view of `line`, so a cache that keeps only
    // the object holds exactly its bytes.
    return { type, object: ownedCopy([], 0, line, objectStart, objectEnd), line };
  }
}

function describeKey(key: string | undefined): string {
  return key === undefined ? 'key' : `the value of ${JSON.stringify(key)}`;
}

function skipWhitespace(line: Buffer, from: number): number {
  while (from < line.length && isJsonWhitespace(line[from]!)) from++;
  return from;
}

// A key's text, or undefined if it is malformed. Keys without escapes (all of them, in practice)
// are read directly.
function keyText(line: Buffer, start: number, end: number): string | undefined {
  for (let k = start + 1; k < end - 1; k++) {
    if (line[k] === BACKSLASH) return parseString(line, start, end);
  }
  return line.toString('utf8', start + 1, end - 1);
}

// Decodes a JSON string literal; undefined if it is malformed.
function parseString(line: Buffer, start: number, end: number): string | undefined {
  try {
    return JSON.parse(line.toString('utf8', start, end)) as string;
  } catch {
    return undefined;
  }
}
