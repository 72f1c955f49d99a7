// TLS connections to the upstream apiserver, built from the credentials of the identity a request
// travels under. One connector serves the undici pools and the upgrade tunnel, so both verify the
// apiserver the same way.
import type { Socket } from 'node:net';
import { createSecureContext } from 'node:tls';
import { buildConnector, type Connector } from './undici.ts';
import type { OwnCredentials, TlsMaterial, Upstream } from './credentials.ts';

/**
 * `own`: Levee's identity from its kubeconfig (client certificate and Authorization).
 * `client`: the client's own Authorization header travels through; the connection must then carry
 * no client certificate, because the apiserver's x509 authenticator runs before bearer tokens and
 * would authenticate the request as Levee instead of the client.
 */
export type Identity = 'own' | 'client';

/** How one forwarded request is sent upstream. */
export interface UpstreamAuth {
  identity: Identity;
  /**
   * With Levee's own identity: Impersonate-* header pairs that replace any the client sent;
   * undefined keeps the client's own (already checked) ones.
   */
  impersonate?: string[] | undefined;
}

/** The request headers to send upstream in place of the client's credentials, as name/value pairs. */
export async function credentialHeaders(upstream: Upstream, auth: UpstreamAuth): Promise<string[]> {
  if (auth.identity !== 'own') return [];
  const out: string[] = [];
  const creds = await upstream.ownCredentials();
  if (creds.authorization) out.push('Authorization', creds.authorization);
  if (auth.impersonate) out.push(...auth.impersonate);
  return out;
}

/** Client headers that must not travel upstream under `auth`: its own credentials are replaced. */
export function droppedHeader(auth: UpstreamAuth, lowerName: string): boolean {
  if (auth.identity !== 'own') return false;
  return lowerName === 'authorization' || (auth.impersonate !== undefined && lowerName.startsWith('impersonate-'));
}

export const CONNECT_TIMEOUT_MS = 10_000;

export interface ConnectTarget {
  hostname: string;
  port: string;
  protocol: string;
}

export function connectTarget(server: URL): ConnectTarget {
  const { hostname, protocol } = server;
  const port = server.port || (protocol === 'https:' ? '443' : '80');
  // URL keeps the brackets of an IPv6 literal; sockets want the bare address.
  return { hostname: hostname.replace(/^\[|\]$/g, ''), port, protocol };
}

/**
 * A connector whose TLS material follows the upstream credentials: when an exec plugin or a
 * rotated file hands out a new client certificate, new connections use it.
 */
export function identityConnector(upstream: Upstream, identity: Identity): Connector {
  let last: { tls: TlsMaterial; connector: Connector } | undefined;
  const forCredentials = (creds: OwnCredentials): Connector => {
    const tls = creds.tls;
    if (!last || !sameTls(last.tls, tls)) {
      last = {
        tls,
        connector: buildConnector({
          // Built once per material, not by every tls.connect from the PEM: each watch forwarded
          // over HTTP/1.1 holds a connection of its own, and a burst of them opens as many.
          // bench/micro/upstreamconnect.ts: 743 against 949 µs of CPU per new connection.
          secureContext: createSecureContext({
            ca: tls.ca,
            cert: identity === 'own' ? tls.cert : undefined,
            key: identity === 'own' ? tls.key : undefined,
          }),
          rejectUnauthorized: tls.rejectUnauthorized,
          ...(tls.servername ? { servername: tls.servername } : {}),
          timeout: CONNECT_TIMEOUT_MS,
          keepAlive: true,
          // client-go's keep-alive period.
          keepAliveInitialDelay: 30_000,
          allowH2: false,
        }),
      };
    }
    return last.connector;
  };
  return (options, callback) => {
    upstream.ownCredentials().then(
      (creds) => forCredentials(creds)(options, callback),
      (err: unknown) => callback(err instanceof Error ? err : new Error(String(err)), null),
    );
  };
}

function sameTls(a: TlsMaterial, b: TlsMaterial): boolean {
  return (
    same(a.ca, b.ca) &&
    same(a.cert, b.cert) &&
    same(a.key, b.key) &&
    a.servername === b.servername &&
    a.rejectUnauthorized === b.rejectUnauthorized
  );
}

function same(a: Buffer | string | undefined, b: Buffer | string | undefined): boolean {
  if (a === b) return true;
  if (a === undefined || b === undefined) return false;
  return Buffer.from(a).equals(Buffer.from(b));
}

/** Opens one raw connection (TLS when the upstream is https) with the connector, as a promise. */
export function openSocket(connector: Connector, target: ConnectTarget): Promise<Socket> {
  return new Promise((resolve, reject) => {
    connector({ hostname: target.hostname, port: target.port, protocol: target.protocol }, (...args) => {
      if (args[0]) reject(args[0]);
      else resolve(args[1]);
    });
  });
}
