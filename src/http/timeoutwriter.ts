// The apiserver's timeout filter (k8s.io/apiserver/pkg/server/filters/timeout.go) for a request
// that is not long-running: whatever it waits on (a review upstream, a seat, the apiserver over a
// connection that went silent), the client has its answer by the deadline. A response not begun
// then is answered with the given Status (504 Timeout) and whatever the handler writes later goes
// nowhere; one already begun is cut, as the apiserver cuts it (http.ErrAbortHandler), so the client
// never takes a truncated body for a whole one.
//
// The clock is set only when the handler first waits (`waiting()`): until then it runs without a
// break and cannot pass the deadline unseen, and most answers from the cache are written before
// any wait. A timer and two listeners per request cost a cached GET about 1 % of its time.
import type { OutgoingHttpHeaders } from 'node:http';
import type { DownstreamResponse } from './downstream.ts';

type ResponseEvent = 'close' | 'drain' | 'finish';

export class TimeoutResponse implements DownstreamResponse {
  readonly #res: DownstreamResponse;
  readonly #deadline: number;
  readonly #answer: (res: DownstreamResponse) => void;
  #timer: NodeJS.Timeout | undefined;
  #timedOut = false;

  /** `answer` writes the timeout's Status on the real response, `ms` from now. */
  constructor(res: DownstreamResponse, ms: number, answer: (res: DownstreamResponse) => void) {
    this.#res = res;
    this.#deadline = performance.now() + ms;
    this.#answer = answer;
  }

  /** The handler is about to wait: from here the deadline is watched. */
  waiting(): void {
    const res = this.#res;
    if (this.#timer !== undefined || res.writableFinished || res.destroyed) return;
    this.#timer = setTimeout(() => {
      this.#timedOut = true;
      if (res.headersSent) res.destroy();
      else if (!res.destroyed) this.#answer(res);
    }, Math.max(0, this.#deadline - performance.now()));
    const done = (): void => clearTimeout(this.#timer);
    res.once('close', done);
    res.once('finish', done);
  }

  /** The deadline passed: the client has been answered or cut already. */
  get timedOut(): boolean {
    return this.#timedOut;
  }

  on(event: ResponseEvent, listener: () => void): this {
    this.#res.on(event, listener);
    return this;
  }

  once(event: ResponseEvent, listener: () => void): this {
    this.#res.once(event, listener);
    return this;
  }

  off(event: ResponseEvent, listener: () => void): this {
    this.#res.off(event, listener);
    return this;
  }

  writeHead(statusCode: number, headers?: OutgoingHttpHeaders): this {
    if (!this.#timedOut) this.#res.writeHead(statusCode, headers);
    return this;
  }

  write(chunk: Buffer | string, done?: (error?: Error | null) => void): boolean {
    // False with `destroyed` true: a writer waiting to drain stops at once.
    return this.#timedOut ? false : this.#res.write(chunk, done);
  }

  end(chunk?: Buffer | string, done?: (error?: Error | null) => void): this {
    if (!this.#timedOut) this.#res.end(chunk, done);
    return this;
  }

  destroy(error?: Error): this {
    // After the timeout's answer, destroying the stream could cut that answer short.
    if (!this.#timedOut) this.#res.destroy(error);
    return this;
  }

  flushHeaders(): void {
    if (!this.#timedOut) this.#res.flushHeaders?.();
  }

  get headersSent(): boolean {
    return this.#timedOut || this.#res.headersSent;
  }

  get destroyed(): boolean {
    return this.#timedOut || this.#res.destroyed;
  }

  get writableFinished(): boolean {
    return this.#res.writableFinished;
  }

  get statusCode(): number {
    return this.#res.statusCode;
  }

  set statusCode(code: number) {
    if (!this.#timedOut) this.#res.statusCode = code;
  }
}
