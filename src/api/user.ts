// Who a request is from, as the apiserver's authenticators describe it (user.Info): the attributes
// a SubjectAccessReview carries and impersonation headers name.

export interface UserInfo {
  username: string;
  uid: string;
  groups: string[];
  extra: Record<string, string[]>;
}

export const ANONYMOUS_USER = 'system:anonymous';
export const AUTHENTICATED_GROUP = 'system:authenticated';
export const UNAUTHENTICATED_GROUP = 'system:unauthenticated';
const SERVICE_ACCOUNT_PREFIX = 'system:serviceaccount:';

export const anonymous: UserInfo = Object.freeze({
  username: ANONYMOUS_USER,
  uid: '',
  groups: [UNAUTHENTICATED_GROUP],
  extra: {},
});

/**
 * The apiserver's AuthenticatedGroupAdder: every authenticated user except anonymous is in
 * system:authenticated, whatever the authenticator said, and RBAC grants rely on it
 * (system:basic-user, system:discovery).
 */
export function withAuthenticatedGroup(u: UserInfo): UserInfo {
  if (u.username === ANONYMOUS_USER || u.groups.includes(AUTHENTICATED_GROUP) || u.groups.includes(UNAUTHENTICATED_GROUP)) return u;
  return { ...u, groups: [...u.groups, AUTHENTICATED_GROUP] };
}

/** serviceaccount.SplitUsername: namespace and name of "system:serviceaccount:NS:NAME", if it is one. */
export function splitServiceAccount(username: string): { namespace: string; name: string } | undefined {
  if (!username.startsWith(SERVICE_ACCOUNT_PREFIX)) return undefined;
  const parts = username.slice(SERVICE_ACCOUNT_PREFIX.length).split(':');
  if (parts.length !== 2 || parts[0] === '' || parts[1] === '') return undefined;
  return { namespace: parts[0]!, name: parts[1]! };
}

/** A stable key for caching decisions about this user: every attribute an authorizer may read. */
export function userKey(u: UserInfo): string {
  const extra = Object.keys(u.extra)
    .sort()
    .map((k) => [k, u.extra[k]]);
  return JSON.stringify([u.username, u.uid, u.groups, extra]);
}
