// The client side of a request, as the HTTP/1.1 and HTTP/2 compat APIs both present it. The
// response is described structurally because the two Node classes share behaviour but not types.
import type { EventEmitter } from 'node:events';
import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import type { Http2ServerRequest } from 'node:http2';

export type DownstreamRequest = IncomingMessage | Http2ServerRequest;

export interface DownstreamResponse extends EventEmitter {
  writeHead(statusCode: number, headers?: OutgoingHttpHeaders): unknown;
  write(chunk: Buffer | string): boolean;
  end(chunk?: Buffer | string): unknown;
  destroy(error?: Error): unknown;
  /** HTTP/1.1 only: sends the head now rather than with the first body chunk. */
  flushHeaders?(): void;
  readonly headersSent: boolean;
  readonly destroyed: boolean;
  readonly writableFinished: boolean;
  statusCode: number;
}
