// The ceiling of a read benchmark: a bare TLS server, in a process of its own as any server is,
// replaying bytes it was handed beforehand. Nothing is looked up, authorized or encoded: for each
// path it answers the stored body with one write. Its latency is what TLS, the kernel and the
// client cost with nothing behind them, so the server under test is measured against it on equal
// terms (its own process, the same certificate and cipher order, pinned to the same cores).
//
// Run as a child (bench/lib/replay.ts as the module, an IPC channel with advanced serialization):
// messages {path, body} store an answer and are acknowledged with {stored}; {clear} forgets them.
//
// With threads > 1 it serves on that many threads, as Levee's workers do: each thread its own
// server on one port shared through SO_REUSEPORT, each holding every answer. That is the ceiling
// of what more cores can give a server on this machine (bench:workers): the kernel, TLS and the
// client on N cores with nothing behind them.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { CIPHER_ORDER } from '../../src/http/cipherorder.ts';
import { startChildServer } from './childserver.ts';

interface Store {
  path: string;
  body: Uint8Array;
}

export interface ReplayServer {
  origin: string;
  pid: number;
  /** Holds `body` as the answer to GET `path`. */
  store(path: string, body: Buffer): Promise<void>;
  clear(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Starts the replay server with `cert` and `key`, on the CPUs `cpus` names (taskset), if any, serving
 * on `threads` threads.
 */
export async function startReplay(tls: { cert: string; key: string }, cpus?: string, threads = 1): Promise<ReplayServer> {
  const child = await startChildServer('replay server', import.meta.filename, [tls.cert, tls.key, String(threads)], cpus);
  return {
    origin: `https://127.0.0.1:${child.port}`,
    pid: child.pid,
    store: async (path, body) => void (await child.ask({ path, body })),
    clear: async () => void (await child.ask({ clear: true })),
    stop: child.stop,
  };
}

interface ThreadData {
  cert: string;
  key: string;
  port: number;
}

/** One thread's server; `bodies` is what it answers from. */
function serve(cert: string, key: string, bodies: Map<string, Buffer>) {
  const server = createServer({ cert: readFileSync(cert), key: readFileSync(key), ...CIPHER_ORDER }, (req, res) => {
    const body = bodies.get(req.url ?? '');
    if (!body) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(body.length) });
    res.end(body);
  });
  server.on('connection', (socket: Socket) => socket.setNoDelay(true));
  return server;
}

const store = (bodies: Map<string, Buffer>, m: Store | { clear: true }): void => {
  if ('clear' in m) bodies.clear();
  else bodies.set(m.path, Buffer.from(m.body.buffer, m.body.byteOffset, m.body.byteLength));
};

if (!isMainThread && (workerData as { replay?: ThreadData } | undefined)?.replay) {
  // A further thread: its own server on the main thread's port, its own copy of every answer.
  const { cert, key, port } = (workerData as { replay: ThreadData }).replay;
  const bodies = new Map<string, Buffer>();
  parentPort!.on('message', (m: Store | { clear: true }) => {
    store(bodies, m);
    parentPort!.postMessage({ stored: true });
  });
  serve(cert, key, bodies).listen({ port, host: '127.0.0.1', reusePort: true }, () => parentPort!.postMessage({ listening: true }));
} else if (process.argv[1] === import.meta.filename && process.send) {
  const send = process.send.bind(process);
  const [cert, key] = [process.argv[2]!, process.argv[3]!];
  const threads = Number(process.argv[4] ?? 1);
  const bodies = new Map<string, Buffer>();
  const server = serve(cert, key, bodies);
  const others: Worker[] = [];
  // Each thread answers in order, so a reply is the one to the oldest message it has not answered.
  const pending = new Map<Worker, Array<() => void>>();
  const tell = (w: Worker, m: unknown): Promise<void> =>
    new Promise((ok) => {
      pending.get(w)!.push(ok);
      w.postMessage(m);
    });
  process.on('message', (m: Store | { clear: true }) => {
    store(bodies, m);
    void Promise.all(others.map((w) => tell(w, m))).then(() => send({ stored: true }));
  });
  process.on('SIGTERM', () => process.exit(0));
  // The benchmark is gone, however it ended (its IPC channel closed): nothing is left to serve.
  process.on('disconnect', () => process.exit(0));
  server.listen({ port: 0, host: '127.0.0.1', reusePort: threads > 1 }, () => {
    const port = (server.address() as AddressInfo).port;
    let listening = 0;
    for (let i = 1; i < threads; i++) {
      const w = new Worker(import.meta.filename, { workerData: { replay: { cert, key, port } satisfies ThreadData } });
      pending.set(w, []);
      w.on('message', (r: { listening?: true; stored?: true }) => {
        if (r.stored) pending.get(w)!.shift()?.();
        else if (r.listening && ++listening === threads - 1) send({ port });
      });
      others.push(w);
    }
    if (threads === 1) send({ port });
  });
}
