// The ceiling of the mass restart: a bare HTTP/2 TLS server, in a process of its own, replaying the
// watch-lists it was handed beforehand. Nothing is authenticated, authorized, looked up or encoded:
// each stream is answered with its stored bytes in one write and then held open, as a watch is.
// What the agents' restart costs it is what TLS, HTTP/2, the kernel and Node cost with nothing
// behind them, so Levee is measured against it on equal terms: its own process, the same
// certificate and cipher order, the same stream limit, pinned to the same core, started with
// Levee's Node flags.
//
// Run as a child (bench/lib/watchreplay.ts as the module, an IPC channel with advanced
// serialization): messages {path, body} store an answer and are acknowledged with {stored}. A
// path is matched without its timeoutSeconds, which each agent spreads as client-go does.
import { readFileSync } from 'node:fs';
import { createSecureServer, constants, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo, Socket } from 'node:net';
import { CIPHER_ORDER } from '../../src/http/cipherorder.ts';
import { startChildServer } from './childserver.ts';

export interface WatchReplayServer {
  origin: string;
  pid: number;
  /** Holds `body` as the first bytes of a watch on `path` (its timeoutSeconds left out). */
  store(path: string, body: Buffer): Promise<void>;
  stop(): Promise<void>;
}

/** The key a watch's path is stored and found under: the path without its timeoutSeconds. */
export const replayKey = (path: string): string => path.replace(/&timeoutSeconds=\d+/, '');

export async function startWatchReplay(tls: { cert: string; key: string }, cpus?: string): Promise<WatchReplayServer> {
  const child = await startChildServer('watch replay server', import.meta.filename, [tls.cert, tls.key], cpus);
  return {
    origin: `https://127.0.0.1:${child.port}`,
    pid: child.pid,
    store: async (path, body) => void (await child.ask({ path, body })),
    stop: child.stop,
  };
}

if (process.argv[1] === import.meta.filename && process.send) {
  const send = process.send.bind(process);
  const bodies = new Map<string, Buffer>();
  // Levee's limit (src/http/listener.ts), as kube-apiserver advertises it.
  const server = createSecureServer({ cert: readFileSync(process.argv[2]!), key: readFileSync(process.argv[3]!), ...CIPHER_ORDER, settings: { maxConcurrentStreams: 100 } });
  server.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => {
    const body = bodies.get(replayKey(headers[constants.HTTP2_HEADER_PATH] as string));
    if (!body) {
      stream.respond({ ':status': 404 }, { endStream: true });
      return;
    }
    stream.respond({ ':status': 200, 'content-type': 'application/json' });
    stream.write(body);
    stream.on('error', () => undefined);
  });
  server.on('connection', (socket: Socket) => socket.setNoDelay(true));
  server.on('sessionError', () => undefined);
  process.on('message', (m: { path: string; body: Uint8Array }) => {
    bodies.set(replayKey(m.path), Buffer.from(m.body.buffer, m.body.byteOffset, m.body.byteLength));
    send({ stored: true });
  });
  process.on('SIGTERM', () => process.exit(0));
  // The benchmark is gone, however it ended (its IPC channel closed): nothing is left to serve.
  process.on('disconnect', () => process.exit(0));
  server.listen({ port: 0, host: '127.0.0.1', backlog: 65_535 }, () => send({ port: (server.address() as AddressInfo).port }));
}
