// HTTP/2 requests without a body, served on Node's core stream API instead of its compat layer.
//
// The compat layer wraps every stream in an Http2ServerRequest (a Readable) and an
// Http2ServerResponse, each with its own state and listeners on the stream: about 2.7 KB of memory
// per stream that stays for as long as the stream does. A cache watch stays open for up to an hour,
// and a gateway holds tens of thousands of them, mostly idle. These two small adapters give the
// chain the same request and response shape over the bare ServerHttp2Stream. Requests with a body
// (and the rare `Expect: 100-continue`) still go through compat, which handles those well.
import { EventEmitter } from 'node:events';
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { constants, type IncomingHttpHeaders as Http2IncomingHeaders, type ServerHttp2Stream } from 'node:http2';
import type { Socket } from 'node:net';

const { NGHTTP2_FLAG_END_STREAM, HTTP2_HEADER_STATUS, HTTP2_HEADER_DATE } = constants;

// The Date header, one string for every response of the same second, as Node's own: a string
// made for each would be kept by its stream for as long as the stream lives.
let dateSecond = -1;
let dateValue = '';
function httpDate(): string {
  const second = Math.floor(Date.now() / 1000);
  if (second !== dateSecond) {
    dateSecond = second;
    dateValue = new Date(second * 1000).toUTCString();
  }
  return dateValue;
}

/** A request whose headers ended its stream (no body follows), and that compat need not see. */
export function servesOnCoreStream(headers: Http2IncomingHeaders, flags: number): boolean {
  return (flags & NGHTTP2_FLAG_END_STREAM) !== 0 && headers.expect === undefined && headers[':method'] !== 'CONNECT';
}

/** What the chain reads of a request, taken from the stream's headers. */
export class StreamRequest {
  readonly stream: ServerHttp2Stream;
  readonly headers: IncomingHttpHeaders;
  readonly rawHeaders: string[];

  constructor(stream: ServerHttp2Stream, headers: Http2IncomingHeaders, rawHeaders: string[]) {
    this.stream = stream;
    this.headers = headers;
    this.rawHeaders = rawHeaders;
  }

  get method(): string {
    return this.headers[':method'] as string;
  }

  get url(): string {
    return this.headers[':path'] as string;
  }

  get socket(): Socket | undefined {
    return this.stream.session?.socket;
  }
}

const kResponse = Symbol('levee.response');
type StreamWithResponse = ServerHttp2Stream & { [kResponse]?: StreamResponse };

// Shared by every stream: one function each, not a closure per response.
function relayClose(this: StreamWithResponse): void {
  this[kResponse]?.emit('close');
}
function relayDrain(this: StreamWithResponse): void {
  this[kResponse]?.emit('drain');
}
// An unhandled 'error' on a stream (a client's reset, a write after it went away) would end the
// process; what matters of it reaches the chain as 'close'.
function ignoreError(): void {}

/**
 * The response side: writeHead, write and end as compat's, and after the stream has gone away
 * each is a quiet no-op, as compat's are, rather than a throw.
 */
export class StreamResponse extends EventEmitter {
  readonly #stream: StreamWithResponse;
  statusCode = 200;

  constructor(stream: ServerHttp2Stream) {
    super();
    this.#stream = stream;
    (stream as StreamWithResponse)[kResponse] = this;
    stream.on('close', relayClose);
    stream.on('drain', relayDrain);
    stream.on('error', ignoreError);
  }

  get headersSent(): boolean {
    return this.#stream.headersSent;
  }

  get destroyed(): boolean {
    return this.#stream.destroyed;
  }

  get writableFinished(): boolean {
    return this.#stream.writableFinished;
  }

  writeHead(statusCode: number, headers?: OutgoingHttpHeaders): this {
    const stream = this.#stream;
    if (stream.destroyed || stream.closed) return this;
    this.statusCode = statusCode;
    // A flat name/value list rather than an object: Node keeps what respond() was given for as long
    // as the stream lives, and an object it builds from one has a null prototype, which V8 keeps
    // as a dictionary of about 500 bytes; the list is a tenth of that.
    // The list holds its Date, which Node would otherwise push onto it, and is passed on as a copy
    // of exactly its length: a list grown by push has room for about twice its entries.
    const head: string[] = [HTTP2_HEADER_STATUS, String(statusCode)];
    let dated = false;
    if (headers) {
      for (const name in headers) {
        const value = headers[name];
        if (value === undefined) continue;
        const lower = name.toLowerCase();
        if (lower === HTTP2_HEADER_DATE) dated = true;
        if (Array.isArray(value)) for (const v of value) head.push(lower, v);
        else head.push(lower, String(value));
      }
    }
    if (!dated) head.push(HTTP2_HEADER_DATE, httpDate());
    stream.respond(head.slice());
    return this;
  }

  write(chunk: Buffer | string, done?: (error?: Error | null) => void): boolean {
    const stream = this.#stream;
    if (stream.destroyed || stream.closed) return false;
    if (!stream.headersSent) this.writeHead(this.statusCode);
    // Core ended the stream with the head (HEAD, 204, 304): there is no body to write.
    if (stream.writableEnded) return true;
    return done ? stream.write(chunk, done) : stream.write(chunk);
  }

  cork(): void {
    this.#stream.cork();
  }

  uncork(): void {
    this.#stream.uncork();
  }

  end(chunk?: Buffer | string, done?: (error?: Error | null) => void): this {
    const stream = this.#stream;
    if (stream.destroyed || stream.closed) return this;
    if (!stream.headersSent) this.writeHead(this.statusCode);
    if (stream.writableEnded) return this;
    if (chunk === undefined) stream.end();
    else if (done) stream.end(chunk, done);
    else stream.end(chunk);
    return this;
  }

  destroy(error?: Error): this {
    this.#stream.destroy(error);
    return this;
  }
}
