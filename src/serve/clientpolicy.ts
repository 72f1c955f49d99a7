// Consistent-read policy by client: which of verify, cache or forward a read without
// resourceVersion gets, chosen by who sends it. Node agents that tolerate a cache a few
// milliseconds behind can be told `cache`, while controllers that must read their own writes keep
// `verify` or `forward`. A client rule beats the resource's policy; the first matching rule wins.
import type { UserInfo } from '../auth/user.ts';
import type { ConsistentReads } from './decide.ts';

export type Subject = { kind: 'user'; name: string } | { kind: 'group'; name: string } | { kind: 'serviceaccount'; namespace: string; name: string };

export interface ClientPolicy {
  subject: Subject;
  policy: ConsistentReads;
}

const POLICIES: readonly ConsistentReads[] = ['verify', 'cache', 'forward'];

/**
 * "user:NAME=POLICY", "group:NAME=POLICY", "serviceaccount:NAMESPACE:NAME=POLICY" (NAME "*" for
 * every service account of the namespace). Names may hold ':' (system:nodes); the policy follows
 * the last '='.
 */
export function parseClientPolicy(value: string): ClientPolicy {
  const eq = value.lastIndexOf('=');
  const colon = value.indexOf(':');
  if (eq === -1 || colon === -1 || colon > eq) throw new Error(`"${value}" is not KIND:NAME=POLICY`);
  const kind = value.slice(0, colon);
  const name = value.slice(colon + 1, eq);
  const policy = value.slice(eq + 1) as ConsistentReads;
  if (!POLICIES.includes(policy)) throw new Error(`"${policy}" is not one of ${POLICIES.join(', ')}`);
  if (name === '') throw new Error(`"${value}" names no ${kind}`);
  switch (kind) {
    case 'user':
    case 'group':
      return { subject: { kind, name }, policy };
    case 'serviceaccount': {
      const parts = name.split(':');
      if (parts.length !== 2 || parts[0] === '' || parts[1] === '') throw new Error(`"${value}": a service account is NAMESPACE:NAME`);
      return { subject: { kind, namespace: parts[0]!, name: parts[1]! }, policy };
    }
    default:
      throw new Error(`"${kind}" is not one of user, group, serviceaccount`);
  }
}

function matches(s: Subject, u: UserInfo): boolean {
  switch (s.kind) {
    case 'user':
      return u.username === s.name;
    case 'group':
      return u.groups.includes(s.name);
    case 'serviceaccount':
      return s.name === '*' ? u.username.startsWith(`system:serviceaccount:${s.namespace}:`) : u.username === `system:serviceaccount:${s.namespace}:${s.name}`;
  }
}

/** The first rule that names this user, if any. */
export function clientPolicyFor(rules: readonly ClientPolicy[], user: UserInfo): ConsistentReads | undefined {
  return rules.find((r) => matches(r.subject, user))?.policy;
}
