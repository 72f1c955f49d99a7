// Where one watch event ends and the next begins in a forwarded watch stream, so that a watch Levee
// ends (at shutdown) stops between two events: the client sees a stream that ended normally and
// re-watches from the last resourceVersion it received, instead of failing to decode half an event.
// Only the framing is followed, never the events themselves: a forwarded stream costs no parsing.

export interface EventBoundary {
  /** Follows the stream through these bytes. */
  advance(chunk: Buffer): void;
  /** Whether the bytes followed so far end with a complete event. */
  readonly atBoundary: boolean;
  /** How many bytes of `chunk` (not yet advanced through) complete the current event; -1 if all of them do not. */
  firstEnd(chunk: Buffer): number;
}

const NEWLINE = 0x0a;
const LBRACE = 0x7b;

/**
 * A JSON watch stream: the apiserver writes each event as compact JSON and a newline (Go's
 * json.Encoder), and a raw newline cannot occur inside a JSON value. With `pretty` the lines of one
 * event are indented, so only a newline followed by `{` (or by nothing yet: the apiserver flushes
 * whole events) ends one.
 */
export class JsonEventBoundary implements EventBoundary {
  #last = NEWLINE;

  advance(chunk: Buffer): void {
    if (chunk.length > 0) this.#last = chunk[chunk.length - 1]!;
  }

  get atBoundary(): boolean {
    return this.#last === NEWLINE;
  }

  firstEnd(chunk: Buffer): number {
    if (chunk.length > 0 && this.#last === NEWLINE && chunk[0] === LBRACE) return 0;
    for (let i = chunk.indexOf(NEWLINE); i !== -1; i = chunk.indexOf(NEWLINE, i + 1)) {
      if (i + 1 === chunk.length || chunk[i + 1] === LBRACE) return i + 1;
    }
    return -1;
  }
}

/**
 * A protobuf watch stream (`application/vnd.kubernetes.protobuf;stream=watch`): each event is a
 * 4-byte big-endian length and that many bytes (apimachinery's LengthDelimitedFramer).
 */
export class LengthPrefixedEventBoundary implements EventBoundary {
  // Bytes of the current frame's length still to come, then of its body.
  #header = Buffer.alloc(4);
  #headerRead = 0;
  #bodyLeft = 0;

  advance(chunk: Buffer): void {
    this.#walk(chunk, false);
  }

  get atBoundary(): boolean {
    return this.#headerRead === 0 && this.#bodyLeft === 0;
  }

  firstEnd(chunk: Buffer): number {
    if (this.atBoundary) return 0;
    const saved = { header: Buffer.from(this.#header), headerRead: this.#headerRead, bodyLeft: this.#bodyLeft };
    const end = this.#walk(chunk, true);
    this.#header = saved.header;
    this.#headerRead = saved.headerRead;
    this.#bodyLeft = saved.bodyLeft;
    return end;
  }

  /** Consumes `chunk`; with `stopAtEnd`, stops at the first frame's end and returns its offset. */
  #walk(chunk: Buffer, stopAtEnd: boolean): number {
    let i = 0;
    while (i < chunk.length) {
      if (this.#bodyLeft > 0) {
        const take = Math.min(this.#bodyLeft, chunk.length - i);
        this.#bodyLeft -= take;
        i += take;
        if (this.#bodyLeft === 0 && stopAtEnd) return i;
        continue;
      }
      this.#header[this.#headerRead++] = chunk[i++]!;
      if (this.#headerRead === 4) {
        this.#headerRead = 0;
        this.#bodyLeft = this.#header.readUInt32BE(0);
        if (this.#bodyLeft === 0 && stopAtEnd) return i;
      }
    }
    return -1;
  }
}

/**
 * Any other stream (CBOR sequences, for one): its framing is not followed, and the apiserver flushes
 * each event as it writes it, so the end of a chunk is taken as the end of an event.
 */
export class ChunkEventBoundary implements EventBoundary {
  advance(): void {}

  get atBoundary(): boolean {
    return true;
  }

  firstEnd(chunk: Buffer): number {
    return chunk.length;
  }
}

/** The boundary tracker for a watch response of this content type. */
export function eventBoundaryFor(contentType: string | string[] | undefined): EventBoundary {
  const type = (Array.isArray(contentType) ? contentType[0] : contentType)?.toLowerCase() ?? '';
  const media = type.split(';')[0]!.trim();
  if (media === 'application/json') return new JsonEventBoundary();
  if (media === 'application/vnd.kubernetes.protobuf') return new LengthPrefixedEventBoundary();
  return new ChunkEventBoundary();
}
