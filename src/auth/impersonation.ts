// Impersonation, both ways. A client that authenticated to Levee with a certificate cannot carry
// that identity upstream (TLS ends here), so Levee forwards its requests with its own credentials
// and Impersonate-* headers naming the client's user. A client that asks to impersonate someone
// itself is first checked as the apiserver's impersonation filter would check it, because the
// apiserver will only see Levee's (broader) right to impersonate.
import type { ResourceAttributes } from '../api/attributes.ts';
import { splitServiceAccount, type UserInfo } from '../api/user.ts';
import { compareGo, goQuote } from '../selectors/gostrings.ts';

const USER = 'impersonate-user';
const UID = 'impersonate-uid';
const GROUP = 'impersonate-group';
const EXTRA_PREFIX = 'impersonate-extra-';

export function isImpersonationHeader(lowerName: string): boolean {
  return lowerName.startsWith('impersonate-');
}

/** Header pairs that make the apiserver treat a request as `user`'s. */
export function impersonationHeaders(user: UserInfo): string[] {
  const out = ['Impersonate-User', user.username];
  if (user.uid) out.push('Impersonate-Uid', user.uid);
  // system:authenticated is added by the apiserver itself; naming it would need a grant of its own.
  for (const g of user.groups) if (g !== 'system:authenticated') out.push('Impersonate-Group', g);
  for (const [key, values] of Object.entries(user.extra)) {
    for (const v of values) out.push(`Impersonate-Extra-${encodeURIComponent(key)}`, v);
  }
  return out;
}

export class ImpersonationError extends Error {}

/**
 * The checks the apiserver's WithImpersonation filter makes before switching users, one `impersonate`
 * authorization per requested user, group, uid and extra value, in its order. Empty when the
 * request impersonates no one. Throws ImpersonationError for a request the filter refuses outright.
 */
export function impersonationChecks(rawHeaders: readonly string[]): ResourceAttributes[] {
  let user: string | undefined;
  let uid: string | undefined;
  const groups: string[] = [];
  const extras: [string, string][] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase();
    if (!isImpersonationHeader(name)) continue;
    const value = rawHeaders[i + 1]!;
    if (name === USER) user ??= value;
    else if (name === UID) uid ??= value;
    else if (name === GROUP) groups.push(value);
    else if (name.startsWith(EXTRA_PREFIX)) extras.push([unescapeExtraKey(name.slice(EXTRA_PREFIX.length)), value]);
  }
  const checks: ResourceAttributes[] = [];
  const impersonate = (group: string, resource: string, name: string, namespace = '', subresource = ''): void =>
    void checks.push({ verb: 'impersonate', group, resource, subresource, namespace, name });
  if (user) {
    const sa = splitServiceAccount(user);
    if (sa) impersonate('', 'serviceaccounts', sa.name, sa.namespace);
    else impersonate('', 'users', user);
  }
  for (const g of groups) impersonate('', 'groups', g);
  for (const [key, value] of extras) impersonate('authentication.k8s.io', 'userextras', value, '', key);
  if (uid) impersonate('authentication.k8s.io', 'uids', uid);
  if (checks.length > 0 && !user) {
    // The apiserver's BadRequest names what was asked for as Go prints the user.DefaultInfo it built.
    throw new ImpersonationError(`requested ${goDefaultInfo(user ?? '', uid ?? '', groups, extras)} without impersonating a user name`);
  }
  return checks;
}

// Extra keys travel percent-encoded in header names (a key may hold "/" and upper case): the
// apiserver lowers the name first, then unescapes, so "%41" is "A".
function unescapeExtraKey(lowered: string): string {
  try {
    return decodeURIComponent(lowered);
  } catch {
    return lowered;
  }
}

/** fmt's %#v of a *user.DefaultInfo: strings quoted, nil slices and maps as such, map keys sorted. */
function goDefaultInfo(name: string, uid: string, groups: readonly string[], extras: readonly [string, string][]): string {
  const strings = (xs: readonly string[]): string => (xs.length === 0 ? '[]string(nil)' : `[]string{${xs.map(goQuote).join(', ')}}`);
  const extra = new Map<string, string[]>();
  for (const [key, value] of extras) extra.set(key, [...(extra.get(key) ?? []), value]);
  const entries = [...extra.keys()].sort(compareGo).map((k) => `${goQuote(k)}:${strings(extra.get(k)!)}`);
  const map = entries.length === 0 ? 'map[string][]string(nil)' : `map[string][]string{${entries.join(', ')}}`;
  return `&user.DefaultInfo{Name:${goQuote(name)}, UID:${goQuote(uid)}, Groups:${strings(groups)}, Extra:${map}}`;
}
