// The stages every request passes before anything is answered or forwarded, upgrades included:
// request info, the request deadline, authentication, the configured rules, flow control; and the
// upstream bound that whatever goes to the apiserver takes on top.
import { requestedTimeout } from '../api/deadline.ts';
import { goQuote } from '../selectors/gostrings.ts';
import { goQuery, rawQueryOf } from '../api/query.ts';
import { newInternalError, newServiceUnavailable, newUnauthorized, tooManyRequests } from '../api/status.ts';
import type { Status } from '../api/types.ts';
import type { UserInfo } from '../api/user.ts';
import { isLongRunning, parseRequestInfo, RequestInfoError, type RequestInfo } from '../api/requestinfo.ts';
import type { Credential } from '../auth/authenticate.ts';
import { forbidden } from '../auth/authorize.ts';
import type { AccessGuard } from '../auth/guard.ts';
import { ReviewRejectedError } from '../auth/reviewlimit.ts';
import type { Grant } from '../flow/fairqueue.ts';
import { classify, isExempt, type Cancellation, type FlowController, type PriorityClass } from '../flow/flowcontrol.ts';
import { beginsWithState, decidingRule, type Rule, type UserLookup } from '../flow/rules.ts';
import type { Logger } from '../log/logger.ts';
import { then, type Maybe } from '../maybe.ts';
import type { DownstreamRequest } from '../http/downstream.ts';

export interface AdmissionDeps {
  guard: AccessGuard;
  logger: Logger;
  /** Flow control; without it every request is taken at once. */
  flow?: FlowController | undefined;
  /** The configuration's rules, read at each request so a reload takes effect at once. */
  rules?: (() => readonly Rule[]) | undefined;
}


/** A request past authentication, the rules and flow control. */
export interface Admitted {
  info: RequestInfo;
  longRunning: boolean;
  credential: Credential;
  /** The client's user, looked up once and only when something needs it (a token is reviewed then). */
  user: UserLookup;
  /** Its flow-control class and flow, when flow control applies to it. */
  flow: { cls: PriorityClass; key: string } | undefined;
  /** Seats held until the request ends, released by `release`. */
  seats: Grant[];
}

/**
 * Stage: request info, as the apiserver's WithRequestInfo filter, or its 500 for a bad path: a
 * Status for an upgrade's refusal, and `text` as the apiserver writes it (responsewriters.
 * InternalError: http.Error, plain text, the request URI quoted, <, > and & escaped).
 */
export function requestInfo(method: string, url: string): RequestInfo | { status: Status; text: string } {
  try {
    return parseRequestInfo(method, url);
  } catch (err) {
    if (!(err instanceof RequestInfoError)) throw err;
    const why = `failed to create RequestInfo: ${err.message}`;
    const text = `Internal Server Error: ${goQuote(url)}: ${why}`.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
    return { status: newInternalError(why), text: `${text}\n` };
  }
}

/**
 * Stage: the request deadline (`?timeout=`), which the apiserver reads before it authenticates
 * anyone: one it cannot read is its 400, whoever sent it. Long-running requests have none.
 */
export function requestDeadline(info: RequestInfo, rawQuery: string): Status | undefined {
  if (isLongRunning(info)) return undefined;
  const timeout = requestedTimeout(rawQuery);
  return typeof timeout === 'object' ? timeout : undefined;
}

/** Stage: authentication; the apiserver's 401 when no authenticator accepts the request. */
export function authenticate(deps: AdmissionDeps, req: DownstreamRequest, requestId: string): Credential | Status {
  const credential = deps.guard.credential(req);
  if (credential.kind !== 'unauthorized') return credential;
  deps.logger.debug({ requestId, why: credential.why }, 'unauthorized');
  return newUnauthorized();
}

/**
 * Stages: the configured rules, then flow control (a seat of the request's class, fairly shared
 * between clients, or a 429). A token is reviewed here only for a rule that names users. At once
 * when nothing waits: no rules, and a seat free (src/maybe.ts).
 */
export function admit(
  deps: AdmissionDeps,
  req: DownstreamRequest,
  info: RequestInfo,
  credential: Credential,
  cancellation: Cancellation | undefined,
): Maybe<Admitted | Status> {
  let looked: Promise<UserInfo | undefined> | undefined;
  const user: UserLookup = () => (looked ??= deps.guard.userOf(credential));
  const admitted: Admitted = { info, longRunning: isLongRunning(info), credential, user, flow: undefined, seats: [] };
  const rules = deps.rules?.() ?? [];
  if (rules.length === 0) return takeSeat(deps, req, admitted, cancellation);
  return refusedByRule(deps, req, rules, admitted).then((refused) => refused ?? takeSeat(deps, req, admitted, cancellation));
}

/** The Status of the rule that refuses the request, if one does. */
async function refusedByRule(deps: AdmissionDeps, req: DownstreamRequest, rules: readonly Rule[], admitted: Admitted): Promise<Status | undefined> {
  const { info, credential, user } = admitted;
  const ruleRequest = { info, beginsWithState: beginsWithState(info, goQuery(rawQueryOf(req.url ?? '/'))) };
  try {
    const rule = await decidingRule(rules, ruleRequest, user);
    // The refusal names the user as the apiserver's would, when Levee can learn it.
    if (rule?.action === 'deny') return deniedByRule(info, deps.guard.knownUser(credential) ?? (await user().catch(() => undefined)), rule.name);
    if (rule?.action === 'reject') return tooManyRequests(rule.retryAfterSeconds ?? 1);
    return undefined;
  } catch (err) {
    // A rule that names users could not learn this one: never let the client past it unseen.
    if (err instanceof ReviewRejectedError) return tooManyRequests();
    return newServiceUnavailable(`the client's credentials could not be reviewed: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** Flow control: a seat of the request's class, unless it is exempt. */
function takeSeat(deps: AdmissionDeps, req: DownstreamRequest, admitted: Admitted, cancellation: Cancellation | undefined): Maybe<Admitted | Status> {
  if (!deps.flow || isExempt(admitted.info, deps.guard.knownUser(admitted.credential))) return admitted;
  const flow = { cls: classify(admitted.info, admitted.longRunning), key: deps.guard.flowOf(admitted.credential, req.socket?.remoteAddress) };
  return then(deps.flow.admit(flow.cls, flow.key, cancellation), (seat) => {
    if ('code' in seat) return seat;
    admitted.flow = flow;
    // A literal of one, not a push onto []: a push reserves room for 17 seats, 150 bytes that a
    // watch holding its seat keeps for as long as it lasts.
    admitted.seats = [seat];
    return admitted;
  });
}

/** Stage: the upstream bound of the request's class, taken by whatever goes upstream. */
export async function admitUpstream(deps: AdmissionDeps, admitted: Admitted, cancellation: Cancellation | undefined): Promise<Status | undefined> {
  if (!deps.flow || !admitted.flow) return undefined;
  const seat = await deps.flow.admitUpstream(admitted.flow.cls, admitted.flow.key, cancellation?.signal);
  if ('code' in seat) return seat;
  admitted.seats.push(seat);
  return undefined;
}

/** Gives back every seat the request holds. */
export function release(admitted: Pick<Admitted, 'seats'> | undefined): void {
  for (const seat of admitted?.seats ?? []) seat.release();
}

/** A rule's refusal, shaped as the apiserver's Forbidden for the same request. */
function deniedByRule(info: RequestInfo, user: UserInfo | undefined, rule: string): Status {
  const why = `denied by Levee rule "${rule}"`;
  const who = { username: user?.username ?? '', uid: '', groups: [], extra: {} };
  if (!info.isResourceRequest) return forbidden(who, { verb: info.verb, path: info.path }, why);
  return forbidden(who, { verb: info.verb, group: info.apiGroup, resource: info.resource, subresource: info.subresource, namespace: info.namespace, name: info.name }, why);
}
