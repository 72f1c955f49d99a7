// The client-facing listener: TLS with ALPN h2 and http/1.1 (client-go speaks h2; exec, attach and
// port-forward need HTTP/1.1 upgrades), or plain HTTP/1.1 on a loopback address only.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createSecureServer, type Http2SecureServer, type Http2ServerRequest, type Http2ServerResponse, type IncomingHttpHeaders, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2';
import { isIP, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { DownstreamRequest, DownstreamResponse } from './downstream.ts';
import type { Logger } from '../log/logger.ts';
import { readCertificates, watchCertificates, type CertificateFiles } from './certificates.ts';
import { CIPHER_ORDER } from './cipherorder.ts';
import { servesOnCoreStream, StreamRequest, StreamResponse } from './h2stream.ts';

// Not an ES import of node:http (http/downstream.ts says why).
const { createServer } = process.getBuiltinModule('node:http');

export interface ListenerOptions {
  host: string;
  port: number;
  tls?: CertificateFiles | undefined;
  logger?: Logger | undefined;
  /**
   * Share the port with other listeners of this process (SO_REUSEPORT): the kernel spreads new
   * connections over the worker threads that each listen on it.
   */
  reusePort?: boolean | undefined;
}

export interface Handlers {
  request: (req: DownstreamRequest, res: DownstreamResponse) => void;
  upgrade: (req: IncomingMessage, socket: Duplex, head: Buffer) => void;
}

export interface Listener {
  /** Base URL clients use, e.g. https://127.0.0.1:8443. */
  url: URL;
  /**
   * Stops accepting and lets what is in flight finish: new connections are refused at once, HTTP/2
   * clients get a GOAWAY, HTTP/1.1 responses carry `Connection: close` (or their connection is
   * ended after them). Resolves once every connection has ended, or after `graceMs` with whatever
   * is left closed. The refusal is in place when this returns, before it resolves.
   */
  shutdown(graceMs: number): Promise<ShutdownResult>;
  /** Closes at once, in-flight requests included. */
  close(): Promise<void>;
}

export interface ShutdownResult {
  /** Every connection ended on its own within the grace period. */
  drained: boolean;
  /** Connections still open at the end of the grace period, closed then. */
  closed: number;
}

// The queue of connections the kernel has completed but the process has not accepted yet. Node's
// default is 511; when thousands of clients connect at once (a DaemonSet's agents after a restart)
// while the event loop is busy for a moment, the kernel drops what overflows it, and each dropped
// client is accepted only after it sends again, a retransmission timeout later. Go's net package,
// and so kube-apiserver, listens with the kernel's own limit (net.core.somaxconn, 4096 by default);
// asking for the most a listen(2) backlog can be gives the same, since the kernel caps it there.
// bench/micro/backlog.ts: 2,000 connections at once to a server busy for 300 ms were answered in
// p99 2,075 ms with 511 (2,461 overflows), 415 ms with this (none).
export const LISTEN_BACKLOG = 65_535;

// kube-apiserver advertises 100 concurrent streams per HTTP/2 connection; Node's default is
// 2^32-1, which would let one client multiplex unbounded work over a single connection.
const MAX_CONCURRENT_STREAMS = 100;

export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '');
  if (h === 'localhost' || h === '::1') return true;
  return isIP(h) === 4 && h.startsWith('127.');
}

/** Parses "host:port", "[::1]:port" or ":port" (all addresses). */
export function parseListenAddress(value: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(value);
  if (!m) throw new Error(`invalid listen address "${value}": want host:port`);
  const port = Number(m[3]);
  if (port > 65535) throw new Error(`invalid listen address "${value}": port out of range`);
  return { host: m[1] ?? (m[2] || '0.0.0.0'), port };
}

/**
 * Takes HTTP/2 requests without a body (every GET, LIST and WATCH) from compat, which Node attached
 * as the server's 'stream' listener when the 'request' listener was added, and hands them to the
 * chain over the core stream API; the rest go to compat as before.
 */
function serveBodylessOnCoreStreams(server: Http2SecureServer, request: Handlers['request']): void {
  const compat = server.listeners('stream');
  if (compat.length !== 1) throw new Error(`expected Node's HTTP/2 compat 'stream' listener, found ${compat.length}`);
  const onCompat = compat[0] as (...args: unknown[]) => void;
  server.off('stream', onCompat);
  server.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, flags: number, rawHeaders: string[]) => {
    if (!servesOnCoreStream(headers, flags)) {
      onCompat(stream, headers, flags, rawHeaders);
      return;
    }
    request(new StreamRequest(stream, headers, rawHeaders), new StreamResponse(stream));
  });
}

/**
 * ALPN: h2 when the client offers it, else http/1.1; a client that offers neither gets TLS's
 * no_application_protocol alert, as with a protocol list. A callback rather than the list Node
 * would set for `allowHTTP1`: Node copies that list into every TLS socket's options for the life of
 * the connection, a 12-byte slice of its shared 64 KiB Buffer pool that keeps the pool alive. With
 * other small Buffers made between two handshakes, as under load, a few connections share each
 * pool they keep: 8–10 KB per connection (docs/design.md §5).
 */
function selectProtocol({ protocols }: { protocols: string[] }): string | undefined {
  if (protocols.includes('h2')) return 'h2';
  if (protocols.includes('http/1.1')) return 'http/1.1';
  return undefined;
}

export async function listen(opts: ListenerOptions, handlers: Handlers): Promise<Listener> {
  let server: Server | Http2SecureServer;
  let stopWatching = (): void => undefined;
  if (opts.tls) {
    const secure = createSecureServer({
      ...readCertificates(opts.tls),
      ...CIPHER_ORDER,
      // A client certificate is asked for only with a client CA, and never required: its absence
      // or failure leaves bearer tokens to authenticate the request, as at the apiserver.
      requestCert: opts.tls.clientCAFile !== undefined,
      rejectUnauthorized: false,
      allowHTTP1: true,
      ALPNCallback: selectProtocol,
      settings: { maxConcurrentStreams: MAX_CONCURRENT_STREAMS },
    });
    stopWatching = watchCertificates(
      opts.tls,
      (material) => {
        secure.setSecureContext({ ...material, ...CIPHER_ORDER });
        opts.logger?.info('serving certificates reloaded');
      },
      (err) => opts.logger?.warn({ err: err.message }, 'serving certificates changed but could not be loaded; keeping the old ones'),
    );
    server = secure;
  } else {
    if (!isLoopback(opts.host)) {
      throw new Error(`refusing plain HTTP on ${opts.host}: give a TLS certificate and key, or listen on a loopback address`);
    }
    server = createServer();
  }
  // HTTP/1.1 responses in flight: a keep-alive connection outlives its response, so at shutdown
  // each must say `Connection: close` or have its connection ended after it.
  let draining = false;
  const http1 = new Set<ServerResponse>();
  const sessions = new Set<ServerHttp2Session>();
  server.on('request', (req: IncomingMessage | Http2ServerRequest, res: ServerResponse | Http2ServerResponse) => {
    if (req.httpVersionMajor !== 1) return;
    const r = res as ServerResponse;
    if (draining) {
      r.setHeader('connection', 'close');
      return;
    }
    http1.add(r);
    r.once('close', () => http1.delete(r));
  });
  server.on('session', (session: ServerHttp2Session) => {
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
  });
  server.on('request', handlers.request);
  if (opts.tls) serveBodylessOnCoreStreams(server as Http2SecureServer, handlers.request);
  server.on('upgrade', handlers.upgrade);
  // A client that opens a TLS connection and sends garbage must not take the process down.
  server.on('clientError', (_err: Error, socket: Duplex) => socket.destroy());
  server.on('tlsClientError', () => undefined);
  server.on('sessionError', () => undefined);
  const sockets = new Set<Duplex>();
  server.on('connection', (socket: Socket) => {
    // Without this, a response head and its body leave as two small segments and the second waits
    // for the client's delayed ACK: 40 ms added to every forwarded request over TLS.
    socket.setNoDelay(true);
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port: opts.port, host: opts.host, backlog: LISTEN_BACKLOG, reusePort: opts.reusePort ?? false }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : opts.port;
  const host = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
  const url = new URL(`${opts.tls ? 'https' : 'http'}://${host}:${port}`);

  return {
    url,
    shutdown: (graceMs) => {
      draining = true;
      stopWatching();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const session of sessions) session.close();
      for (const res of http1) {
        if (!res.headersSent) res.setHeader('connection', 'close');
        else if (res.writableFinished) res.socket?.end();
        else res.once('finish', () => res.socket?.end());
      }
      if ('closeIdleConnections' in server) server.closeIdleConnections();
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), graceMs)));
      return Promise.race([closed, late]).then((outcome) => {
        clearTimeout(timer);
        if (outcome !== 'late') return { drained: true, closed: 0 };
        const left = sockets.size;
        for (const session of sessions) session.destroy();
        for (const socket of sockets) socket.destroy();
        return closed.then(() => ({ drained: false, closed: left }));
      });
    },
    close: () =>
      new Promise<void>((resolve) => {
        stopWatching();
        server.close(() => resolve());
        // Long-running watches and tunnels would hold close() open forever; draining them
        // gracefully is the caller's job before this.
        for (const socket of sockets) socket.destroy();
      }),
  };
}
