// Who sent a request, decided the way the apiserver's authenticator chain decides it: a client
// certificate verified against the client CA first, then a bearer token, then (only when enabled)
// anonymous. Tokens are not reviewed here: a forwarded request carries its token upstream
// unchanged and the apiserver authenticates it; only an answer from the cache needs the user, and
// asks the TokenReviewer then.
import type { TLSSocket } from 'node:tls';
import type { DownstreamRequest } from '../http/downstream.ts';
import { bearerToken } from './tokenreview.ts';
import { userFromCertificate } from './x509.ts';
import type { UserInfo } from '../api/user.ts';

/**
 * `delegate` (default): clients authenticate with certificates or tokens, every answer from the
 * cache is authorized for the client's user, forwarded requests carry the client's identity.
 * `trust-loopback` (sidecar): as delegate, but a request without credentials acts as Levee itself;
 * only on loopback listeners, where every client shares the pod.
 * `none`: no authentication and no authorization at all; only on loopback listeners.
 */
export type AuthMode = 'delegate' | 'trust-loopback' | 'none';

export type Credential =
  /** A verified client certificate. */
  | { kind: 'x509'; user: UserInfo }
  /** A bearer token, not yet reviewed. */
  | { kind: 'token'; token: string }
  /** No credentials, in trust-loopback mode: Levee's own identity. */
  | { kind: 'own' }
  /** No credentials, anonymous enabled: system:anonymous. */
  | { kind: 'anonymous' }
  /** Mode none: nothing is checked. */
  | { kind: 'unchecked' }
  /** No authenticator accepted the request: the apiserver's 401. */
  | { kind: 'unauthorized'; why: string };

export interface AuthenticationOptions {
  mode: AuthMode;
  anonymous: boolean;
}

// A connection's certificate is verified once, at the handshake; its user is worked out once too.
const certificateUsers = new WeakMap<TLSSocket, UserInfo | Error | null>();

export function credentialOf(req: DownstreamRequest, opts: AuthenticationOptions): Credential {
  if (opts.mode === 'none') return { kind: 'unchecked' };
  const cert = certificateUser(req);
  if (cert instanceof Error) {
    // As the apiserver's union authenticator: a bad certificate does not stop a good token, but
    // without one it is a 401, never anonymous.
    const token = bearerToken(req.headers.authorization);
    return token ? { kind: 'token', token } : { kind: 'unauthorized', why: cert.message };
  }
  if (cert) return { kind: 'x509', user: cert };
  const token = bearerToken(req.headers.authorization);
  if (token !== undefined) return token === '' ? { kind: 'unauthorized', why: 'empty bearer token' } : { kind: 'token', token };
  if (opts.mode === 'trust-loopback') return { kind: 'own' };
  if (opts.anonymous) return { kind: 'anonymous' };
  return { kind: 'unauthorized', why: 'no credentials' };
}

/** The user of the connection's client certificate: null without one, an Error when it is not valid. */
function certificateUser(req: DownstreamRequest): UserInfo | Error | null {
  const socket = tlsSocketOf(req);
  if (!socket) return null;
  let user = certificateUsers.get(socket);
  if (user === undefined) {
    const peer = socket.getPeerCertificate();
    if (!peer || Object.keys(peer).length === 0) user = null;
    else if (!socket.authorized) user = new Error(`client certificate not accepted: ${String(socket.authorizationError)}`);
    else user = userFromCertificate(peer) ?? new Error('client certificate has no common name');
    certificateUsers.set(socket, user);
  }
  return user;
}

function tlsSocketOf(req: DownstreamRequest): TLSSocket | undefined {
  // HTTP/2: the session's socket; HTTP/1.1: the request's own.
  const socket = ('stream' in req ? req.stream.session?.socket : req.socket) as TLSSocket | undefined;
  return socket && typeof socket.getPeerCertificate === 'function' ? socket : undefined;
}
