// An answer's body written in chunks of about WRITE_CHUNK (downstream.ts), each joined from the
// parts (an envelope, objects' stored bytes, separators) into a buffer used again once written.
//
// Why buffers are used again: a fresh chunk is 128–256 KiB of memory outside V8's heap that dies
// once written. V8 counts such memory against its limits and starts full collections as it
// grows, each marking the whole heap (every cached object): a LIST of all 10,000 pods (114 MB)
// spent about half its CPU marking and sweeping (a perf profile). Measured through Levee, one
// client, LIST of all pods, 10,000 cached, p50 over 20: 178–217 ms and 170–194 ms of CPU per LIST
// with fresh chunks, 57–98 ms and 56–66 ms with spares; RSS grew 46–54 MB during the LISTs
// against 3–4 MB.
//
// A chunk's bytes are no longer needed once its write has called back: a stream calls back once
// it has handed the bytes on (TLS has encrypted them, HTTP/2 has framed and sent them), and the
// buffer goes back to the spares then. A write that fails, or never calls back (the client went
// away), leaves its buffer to the collector.
import { drained, WRITE_CHUNK, type DownstreamResponse } from './downstream.ts';
import { joinBytes, joinInto } from '../store/bytes.ts';

/** A chunk is written once it reaches WRITE_CHUNK, so it stays under this unless one part is large. */
const CAPACITY = 2 * WRITE_CHUNK;
/** Spares kept per thread: one per answer being written at once, up to this many (2 MiB). */
const MAX_SPARES = 8;
const spares: Buffer[] = [];

/**
 * A buffer for a chunk of `size` bytes, to be given back once written; undefined when a buffer of
 * its own size serves better. A full chunk gets a spare or a new buffer that becomes one. The
 * last, smaller chunk of an answer takes a spare only if there is one: a new buffer of CAPACITY
 * for a few KB would hold 256 KiB for every small answer a slow client has not taken yet.
 */
function takeBuffer(size: number): Buffer | undefined {
  if (size > CAPACITY) return undefined;
  const spare = spares.pop();
  if (spare) return spare;
  return size >= WRITE_CHUNK ? Buffer.allocUnsafeSlow(CAPACITY) : undefined;
}

function giveBack(buf: Buffer): void {
  if (spares.length < MAX_SPARES) spares.push(buf);
}

/** How many spare chunk buffers this thread holds (for tests). */
export function spareChunks(): number {
  return spares.length;
}

export class ChunkedBody {
  readonly #res: DownstreamResponse;
  #parts: Uint8Array[] = [];
  #size = 0;
  #written = 0;

  constructor(res: DownstreamResponse) {
    this.#res = res;
  }

  /** Adds a part; it is written with the next chunk. */
  add(part: Uint8Array): void {
    this.#parts.push(part);
    this.#size += part.length;
  }

  /**
   * Writes the parts added so far if they fill a chunk; called between items, so that a chunk
   * ends where an item does. True to go on at once; otherwise the client must take the chunk
   * first, and the promise says whether it did (false: it went away, stop writing).
   */
  writeIfFull(): true | Promise<boolean> {
    if (this.#size < WRITE_CHUNK) return true;
    if (this.#flush()) return true;
    return drained(this.#res);
  }

  /** Bytes handed to the response so far. */
  get written(): number {
    return this.#written;
  }

  /** Writes what is left with the end of the answer; the body's length in bytes. */
  end(): number {
    this.#flush(true);
    return this.#written;
  }

  /** Writes the parts held as one chunk; what write() returned (false: wait for 'drain'). */
  #flush(last = false): boolean {
    const parts = this.#parts;
    const size = this.#size;
    this.#parts = [];
    this.#size = 0;
    this.#written += size;
    const buf = size > 0 ? takeBuffer(size) : undefined;
    const chunk = buf ? joinInto(() => buf.subarray(0, size), parts, size) : size > 0 ? joinBytes(parts, size) : undefined;
    // A spare goes back once the stream is done with it; for an end, once the stream finished.
    const done = buf
      ? (err?: Error | null): void => {
          if (!err) giveBack(buf);
        }
      : undefined;
    if (!last) return this.#res.write(chunk!, done);
    this.#res.end(chunk, done);
    return true;
  }
}
