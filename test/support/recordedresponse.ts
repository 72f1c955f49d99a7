// A downstream response that records the lines written to it, for unit tests of watches served
// from the cache (serve/watch.ts, watch/watcher.ts): no socket, every write accepted at once.
import { EventEmitter } from 'node:events';

export class RecordedResponse extends EventEmitter {
  /** Every non-empty line written, in order. */
  readonly lines: string[] = [];
  ended = false;
  destroyed = false;
  headersSent = false;
  writableFinished = false;
  statusCode = 0;
  writeHead(code: number): this {
    this.statusCode = code;
    this.headersSent = true;
    return this;
  }
  write(chunk: Buffer | string): boolean {
    this.lines.push(...chunk.toString().split('\n').filter((l) => l !== ''));
    return true;
  }
  end(): this {
    this.ended = true;
    return this;
  }
  destroy(): this {
    this.destroyed = true;
    return this;
  }
}
