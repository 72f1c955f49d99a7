// The client side of a request, as the HTTP/1.1 and HTTP/2 compat APIs and Levee's own adapter over
// the HTTP/2 core stream API (h2stream.ts) present it. The response is described structurally
// because the three share behaviour but not types.
import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import type { Http2ServerRequest } from 'node:http2';
import type { StreamRequest } from './h2stream.ts';
import { joinBytes } from '../store/bytes.ts';

// Not an ES import: that reads every export of node:http, and its WebSocket getter loads the
// undici bundled in Node into each thread that imports this. A worker thread that imported node:http
// grew the process by 10.3–10.5 MB, one that took it from getBuiltinModule by 1.7–2.2 (Node 24).
const { ServerResponse } = process.getBuiltinModule('node:http');

export type DownstreamRequest = IncomingMessage | Http2ServerRequest | StreamRequest;

type ResponseEvent = 'close' | 'drain' | 'finish';

export interface DownstreamResponse {
  on(event: ResponseEvent, listener: () => void): unknown;
  once(event: ResponseEvent, listener: () => void): unknown;
  off(event: ResponseEvent, listener: () => void): unknown;
  writeHead(statusCode: number, headers?: OutgoingHttpHeaders): unknown;
  /** `done` is called once the stream no longer needs `chunk` (with an error if it failed). */
  write(chunk: Buffer | string, done?: (error?: Error | null) => void): boolean;
  /** `done` is called once the answer is finished: every chunk handed on. */
  end(chunk?: Buffer | string, done?: (error?: Error | null) => void): unknown;
  destroy(error?: Error): unknown;
  /** HTTP/1.1 only: sends the head now rather than with the first body chunk. */
  flushHeaders?(): void;
  /** Holds writes until uncork(), which hands them to the stream in one vectored write. */
  cork?(): void;
  uncork?(): void;
  readonly headersSent: boolean;
  readonly destroyed: boolean;
  readonly writableFinished: boolean;
  statusCode: number;
}

/**
 * Answers are written in chunks of about this size, each followed by a wait for the socket to
 * drain: one write per object would cost a syscall and a frame per object, and one write per
 * answer would hold a whole LIST and leave the client idle until the last byte is encrypted,
 * where chunks let it decrypt one while Levee encrypts the next. A 570 KB LIST by node, client and
 * Levee pinned to one CPU each, p50 over two runs of each: 16 KiB 1.00–1.09 ms, 64 KiB 1.14–1.15,
 * 128 KiB 0.99, 1 MiB 1.19–1.42 (a replay server writing it at once: 0.78–0.87).
 * Tried against 128 KiB, two Levees (50,000 pods) asked alternately in one run with the replay
 * server, p50 ms with the change / without it: 256 KiB 0.82/0.79, 1.09/1.08, 0.98/1.00; a first
 * chunk of 32 KiB 0.68/0.66, 0.94/1.06, 0.90/0.93, 0.67/0.66, 0.87/0.89; the head sent on its own
 * before the body 0.84/0.84, 0.80/0.82, 0.96/0.88 (first byte 0.1 ms sooner); not waiting for
 * 'drain' while less than 1 MiB is buffered 0.67/0.75, 0.91/0.92; one write from a reused buffer
 * 0.93/0.89. None moved the p50 beyond what separates two runs of the same code, so none is used.
 */
export const WRITE_CHUNK = 128 * 1024;

/**
 * Writes buffers as one write. An HTTP/2 stream, corked, takes them in one vectored write that
 * reads each where it lies (an object's stored bytes included), instead of a copy joining them
 * first. HTTP/1.1 gets the copy: Node's response, corked while it writes chunked, uncorks its
 * socket before it writes what it held, so every part became a socket write of its own and a TLS
 * record (8 writes against one for 5 parts). Returns what write() returned for the last one: false
 * asks the writer to wait for 'drain'.
 */
export function writeParts(res: DownstreamResponse, parts: readonly Buffer[]): boolean {
  if (parts.length === 1) return res.write(parts[0]!);
  if (!res.cork || !res.uncork || res instanceof ServerResponse) return res.write(joinBytes(parts));
  res.cork();
  let ok = true;
  for (const p of parts) ok = res.write(p);
  res.uncork();
  return ok;
}

/**
 * Waits until the response can take more ('drain'). Resolves false when the client went away
 * instead: a client that closes never drains.
 */
export function drained(res: DownstreamResponse): Promise<boolean> {
  if (res.destroyed) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onDrain = (): void => {
      res.off('close', onClose);
      resolve(true);
    };
    const onClose = (): void => {
      res.off('drain', onDrain);
      resolve(false);
    };
    res.once('drain', onDrain);
    res.once('close', onClose);
  });
}
