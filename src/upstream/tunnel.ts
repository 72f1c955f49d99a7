// HTTP/1.1 upgrades (kubectl exec, attach, port-forward: a WebSocket GET, or the SPDY/3.1 POST that
// client-go falls back to) are tunnelled as bytes: the request head is written to a fresh upstream
// connection and from then on both sockets are piped together, whatever protocol they speak.
// Message-level WebSocket proxies cannot carry SPDY, and http-proxy destroys every upgrade that is
// not a WebSocket GET; a byte tunnel has neither problem.
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { pipeline } from 'node:stream';
import { encodeStatus } from '../api/status.ts';
import type { Status } from '../api/types.ts';
import { connectTarget, credentialHeaders, droppedHeader, openSocket, type Identity, type UpstreamAuth } from './connector.ts';
import { upstreamFailureStatus } from './errors.ts';
import type { UpstreamPools } from './pools.ts';

const STATUS_TEXT: Record<number, string> = { 401: 'Unauthorized', 403: 'Forbidden', 429: 'Too Many Requests', 500: 'Internal Server Error', 502: 'Bad Gateway', 503: 'Service Unavailable', 504: 'Gateway Timeout' };

export interface TunnelResult {
  /** The upstream's status code (101 when the upgrade was accepted), or Levee's own on failure. */
  code: number;
}

/**
 * Opens the tunnel. Resolves once the upstream's status line is known (or the attempt failed and a
 * Status was written to the client); the sockets stay piped after that until either side closes.
 */
export async function tunnelUpgrade(
  req: IncomingMessage,
  client: Duplex,
  head: Buffer,
  pools: UpstreamPools,
  auth: UpstreamAuth,
): Promise<TunnelResult> {
  client.on('error', () => client.destroy());
  let requestHead: string;
  let upstream: Socket;
  try {
    requestHead = await buildRequestHead(req, pools, auth);
    upstream = await openFirst(pools, auth.identity);
  } catch (err) {
    const status = upstreamFailureStatus(err);
    writeStatusAndClose(client, status);
    return { code: status.code };
  }
  if (client.destroyed) {
    upstream.destroy();
    return { code: 499 };
  }

  const code = new Promise<number>((resolve) => {
    upstream.once('data', (chunk: Buffer) => {
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(chunk.subarray(0, 16).toString('latin1'));
      resolve(m ? Number(m[1]) : 502);
    });
    upstream.once('close', () => resolve(502));
  });

  upstream.setNoDelay(true);
  upstream.write(requestHead);
  if (head.length > 0) upstream.write(head);
  // Either side closing or failing tears down both.
  pipeline(client, upstream, () => client.destroy());
  pipeline(upstream, client, () => upstream.destroy());
  return { code: await code };
}

/** The first endpoint that accepts a connection, in order: an upgrade is tied to the one it opens. */
async function openFirst(pools: UpstreamPools, identity: Identity): Promise<Socket> {
  let last: unknown;
  for (const server of pools.upstream.servers) {
    try {
      return await openSocket(pools.connector(identity), connectTarget(server));
    } catch (err) {
      last = err;
    }
  }
  throw last;
}

async function buildRequestHead(req: IncomingMessage, pools: UpstreamPools, auth: UpstreamAuth): Promise<string> {
  const lines = [`${req.method} ${pools.upstream.pathPrefix}${req.url ?? '/'} HTTP/1.1`, `Host: ${pools.upstream.server.host}`];
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const lower = raw[i]!.toLowerCase();
    if (lower === 'host') continue;
    if (droppedHeader(auth, lower)) continue;
    lines.push(`${raw[i]}: ${raw[i + 1]}`);
  }
  const own = await credentialHeaders(pools.upstream, auth);
  for (let i = 0; i < own.length; i += 2) lines.push(`${own[i]}: ${own[i + 1]}`);
  return lines.join('\r\n') + '\r\n\r\n';
}

export function writeStatusAndClose(client: Duplex, status: Status): void {
  if (client.destroyed) return;
  const body = encodeStatus(status);
  const retry = status.details?.retryAfterSeconds;
  client.write(
    `HTTP/1.1 ${status.code} ${STATUS_TEXT[status.code] ?? 'Error'}\r\n` +
      'Content-Type: application/json\r\n' +
      (retry ? `Retry-After: ${retry}\r\n` : '') +
      `Content-Length: ${body.length}\r\nConnection: close\r\n\r\n`,
  );
  client.end(body);
}
