// The ceiling of a read benchmark: a bare TLS server, in a process of its own as any server is,
// replaying bytes it was handed beforehand. Nothing is looked up, authorized or encoded: for each
// path it answers the stored body with one write. Its latency is what TLS, the kernel and the
// client cost with nothing behind them, so the server under test is measured against it on equal
// terms (its own process, the same certificate, pinned to the same cores).
//
// Run as a child (bench/lib/replay.ts as the module, an IPC channel with advanced serialization):
// messages {path, body} store an answer and are acknowledged with {stored}; {clear} forgets them.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { NODE_FLAGS } from '../../src/nodeflags.ts';
import { pinned } from '../../test/support/cpus.ts';

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

/** Starts the replay server with `cert` and `key`, on the CPUs `cpus` names (taskset), if any. */
export async function startReplay(tls: { cert: string; key: string }, cpus?: string): Promise<ReplayServer> {
  const [cmd, args] = pinned(cpus, process.execPath, [...NODE_FLAGS, import.meta.filename, tls.cert, tls.key]);
  const child: ChildProcess = spawn(cmd, args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], serialization: 'advanced' });
  const replies: Array<(m: unknown) => void> = [];
  child.on('message', (m) => replies.shift()?.(m));
  const ask = (m: unknown): Promise<unknown> =>
    new Promise((ok, fail) => {
      replies.push(ok);
      child.send(m as never, (err) => err && fail(err));
    });
  const { port } = (await new Promise<unknown>((ok, fail) => {
    replies.push(ok);
    child.once('exit', (code) => fail(new Error(`replay server exited with ${code}`)));
  })) as { port: number };
  return {
    origin: `https://127.0.0.1:${port}`,
    pid: child.pid!,
    store: async (path, body) => void (await ask({ path, body })),
    clear: async () => void (await ask({ clear: true })),
    stop: async () => {
      child.kill('SIGTERM');
      if (child.exitCode === null) await new Promise((ok) => child.once('exit', ok));
    },
  };
}

if (process.argv[1] === import.meta.filename && process.send) {
  const send = process.send.bind(process);
  const bodies = new Map<string, Buffer>();
  const server = createServer({ cert: readFileSync(process.argv[2]!), key: readFileSync(process.argv[3]!) }, (req, res) => {
    const body = bodies.get(req.url ?? '');
    if (!body) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(body.length) });
    res.end(body);
  });
  server.on('connection', (socket: Socket) => socket.setNoDelay(true));
  process.on('message', (m: Store | { clear: true }) => {
    if ('clear' in m) bodies.clear();
    else bodies.set(m.path, Buffer.from(m.body.buffer, m.body.byteOffset, m.body.byteLength));
    send({ stored: true });
  });
  process.on('SIGTERM', () => process.exit(0));
  server.listen(0, '127.0.0.1', () => send({ port: (server.address() as AddressInfo).port }));
}
