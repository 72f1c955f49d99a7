// The apiserver's x509 authenticator (CommonNameUserConversion): a client certificate verified
// against the client CA names the user in its subject's CN and the groups in its O values.
import type { PeerCertificate } from 'node:tls';
import { withAuthenticatedGroup, type UserInfo } from '../api/user.ts';

export function userFromCertificate(cert: PeerCertificate): UserInfo | undefined {
  const cn = first(cert.subject?.CN);
  if (!cn) return undefined;
  return withAuthenticatedGroup({ username: cn, uid: '', groups: all(cert.subject.O), extra: {} });
}

// Node gives a single-valued attribute as a string and a repeated one as an array.
function all(v: string | string[] | undefined): string[] {
  if (v === undefined) return [];
  return Array.isArray(v) ? v : [v];
}

function first(v: string | string[] | undefined): string | undefined {
  return all(v)[0];
}
