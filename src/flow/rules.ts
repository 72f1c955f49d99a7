// Explicit rules from the configuration, matched on what a request is (verb, resource, path) and
// who sends it (user, group, service account), in the spirit of KubeGateway's rules and kubectl
// proxy's reject-paths. The first rule with an action decides: allow (stop looking at rules; the
// request still takes its seat in flow control, which only system:masters, health checks and
// leases skip, as in APF), deny (the apiserver's 403 shape) or reject (429 with Retry-After).
// Separately, the first matching rule that names a consistentReads policy chooses how reads
// without resourceVersion are answered, so the expensive LISTs of a class of clients can be
// answered from the cache, always or only while the upstream is busy.
//
// The verb `list` also names a watch that begins with the collection's current state: an
// informer's start, which client-go 1.35+ sends as a watch with sendInitialEvents=true instead of
// a LIST (and older clients as a watch from resourceVersion 0 or none). APF's work estimator counts
// such a watch as a list for the same reason. `watch` names every watch.
//
// A rule that names users, groups or service accounts needs the client's user; only then is a
// bearer token reviewed for the rules (a forwarded request is otherwise the apiserver's to
// authenticate).
import type { UserInfo } from '../api/user.ts';
import { queryBool, type RequestInfo } from '../api/requestinfo.ts';
import { CONSISTENT_READS, isConsistentReads, type ConsistentReads } from '../api/consistency.ts';

export interface RuleMatch {
  verbs?: string[] | undefined;
  /** "pods", "deployments.apps", "pods/log", "*". */
  resources?: string[] | undefined;
  users?: string[] | undefined;
  groups?: string[] | undefined;
  /** "NAMESPACE:NAME", or "NAMESPACE:*" for every service account of a namespace. */
  serviceAccounts?: string[] | undefined;
  /** Request paths, exact or ending in "*" for a prefix. */
  paths?: string[] | undefined;
}

export interface Rule {
  name: string;
  match: RuleMatch;
  action?: 'allow' | 'deny' | 'reject' | undefined;
  consistentReads?: ConsistentReads | undefined;
  /** consistentReads only: always, or only while requests wait for the upstream bound. */
  when?: 'always' | 'upstream-busy' | undefined;
  retryAfterSeconds?: number | undefined;
}

const any = (list: string[] | undefined): boolean => list === undefined || list.length === 0;

function resourceMatches(patterns: string[], info: RequestInfo): boolean {
  if (!info.isResourceRequest) return false;
  const resource = info.subresource ? `${info.resource}/${info.subresource}` : info.resource;
  return patterns.some((p) => {
    if (p === '*') return true;
    // "pods/log" in group "", or "deployments.apps"; "pods" also covers its subresources.
    const [name, ...group] = p.split('.');
    const g = group.join('.');
    if (g !== info.apiGroup) return false;
    return name === resource || name === info.resource;
  });
}

function subjectMatches(m: RuleMatch, user: UserInfo | undefined): boolean {
  if (!namesSubjects(m)) return true;
  if (!user) return false;
  if (m.users?.includes(user.username)) return true;
  if (m.groups?.some((g) => user.groups.includes(g))) return true;
  return (m.serviceAccounts ?? []).some((sa) => {
    const [ns, name] = sa.split(':');
    return name === '*' ? user.username.startsWith(`system:serviceaccount:${ns}:`) : user.username === `system:serviceaccount:${ns}:${name}`;
  });
}

/** What a rule matches on besides the client: the request, and whether it is an informer's start. */
export interface RuleRequest {
  info: RequestInfo;
  /** A watch that begins with the collection's current state (see beginsWithState). */
  beginsWithState?: boolean | undefined;
}

/**
 * A watch that sends the collection's current state before its changes, as APF's work estimator
 * tells it: sendInitialEvents=true, or a legacy watch from resourceVersion 0 or none.
 */
export function beginsWithState(info: RequestInfo, query: URLSearchParams): boolean {
  if (info.verb !== 'watch') return false;
  const send = query.get('sendInitialEvents');
  if (send !== null) return queryBool(send);
  const rv = query.get('resourceVersion') ?? '';
  return rv === '' || rv === '0';
}

function requestMatches(m: RuleMatch, r: RuleRequest): boolean {
  const { info } = r;
  if (!any(m.verbs) && !m.verbs!.includes('*') && !m.verbs!.includes(info.verb) && !(r.beginsWithState && m.verbs!.includes('list'))) return false;
  if (!any(m.resources) && !resourceMatches(m.resources!, info)) return false;
  if (!any(m.paths) && !m.paths!.some((p) => (p.endsWith('*') ? info.path.startsWith(p.slice(0, -1)) : info.path === p))) return false;
  return true;
}

function namesSubjects(m: RuleMatch): boolean {
  return !(any(m.users) && any(m.groups) && any(m.serviceAccounts));
}

export function ruleMatches(rule: Rule, r: RuleRequest, user: UserInfo | undefined): boolean {
  return requestMatches(rule.match, r) && subjectMatches(rule.match, user);
}

/** The client's user, learned only when a rule needs it (a token is reviewed then). */
export type UserLookup = () => Promise<UserInfo | undefined>;

async function firstMatch(rules: readonly Rule[], r: RuleRequest, user: UserLookup, eligible: (rule: Rule) => boolean): Promise<Rule | undefined> {
  for (const rule of rules) {
    if (!eligible(rule) || !requestMatches(rule.match, r)) continue;
    if (!namesSubjects(rule.match) || subjectMatches(rule.match, await user())) return rule;
  }
  return undefined;
}

/** The first rule with an action that matches, if any. */
export function decidingRule(rules: readonly Rule[], r: RuleRequest, user: UserLookup): Promise<Rule | undefined> {
  return firstMatch(rules, r, user, (rule) => rule.action !== undefined);
}

/** The consistent-read policy the first matching rule names, if any. */
export async function consistentReadsFor(rules: readonly Rule[], r: RuleRequest, user: UserLookup, upstreamBusy: boolean): Promise<ConsistentReads | undefined> {
  const rule = await firstMatch(rules, r, user, (x) => x.consistentReads !== undefined && (x.when !== 'upstream-busy' || upstreamBusy));
  return rule?.consistentReads;
}

/**
 * --consistent-reads-for as a rule: "user:NAME=POLICY", "group:NAME=POLICY",
 * "serviceaccount:NAMESPACE:NAME=POLICY" (NAME "*" for every service account of the namespace).
 * Names may hold ':' (system:nodes); the policy follows the last '='.
 */
export function parseConsistentReadsFor(value: string): Rule {
  const eq = value.lastIndexOf('=');
  const colon = value.indexOf(':');
  if (eq === -1 || colon === -1 || colon > eq) throw new Error(`"${value}" is not KIND:NAME=POLICY`);
  const kind = value.slice(0, colon);
  const name = value.slice(colon + 1, eq);
  const policy = value.slice(eq + 1);
  if (!isConsistentReads(policy)) throw new Error(`"${policy}" is not one of ${CONSISTENT_READS.join(', ')}`);
  if (name === '') throw new Error(`"${value}" names no ${kind}`);
  const rule = (match: RuleMatch): Rule => ({ name: `consistent-reads-for ${value}`, match, consistentReads: policy });
  switch (kind) {
    case 'user':
      return rule({ users: [name] });
    case 'group':
      return rule({ groups: [name] });
    case 'serviceaccount': {
      const parts = name.split(':');
      if (parts.length !== 2 || parts[0] === '' || parts[1] === '') throw new Error(`"${value}": a service account is NAMESPACE:NAME`);
      return rule({ serviceAccounts: [name] });
    }
    default:
      throw new Error(`"${kind}" is not one of user, group, serviceaccount`);
  }
}
