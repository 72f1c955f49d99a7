// The stages of a request that may be answered from the cache: decide (serve/decide.ts chooses,
// given the request, the cached resource and the consistent-read policy in force), authorize (a
// client Levee would not let see the object gets the apiserver's 403 and no cached byte), answer.
// Whatever cannot be answered comes back as a forward reason, counted once, here.
import type { ResourceAttributes } from '../api/attributes.ts';
import { goQuery, rawQueryOf } from '../api/query.ts';
import type { CacheView, CachedResource } from '../cache/view.ts';
import type { AccessGuard, Admission } from '../auth/guard.ts';
import { isImpersonationHeader } from '../auth/impersonation.ts';
import type { Entry as WatchEntry, WatchReauthorizer } from '../auth/watchrecheck.ts';
import type { FlowController } from '../flow/flowcontrol.ts';
import { beginsWithState, consistentReadsFor, type Rule } from '../flow/rules.ts';
import type { ConsistentReads } from '../api/consistency.ts';
import { then, type Maybe } from '../maybe.ts';
import type { DownstreamRequest, DownstreamResponse } from '../http/downstream.ts';
import { writeStatusAs } from './status.ts';
import { writeStatus } from '../http/respond.ts';
import { newTimeout, type StatusEncoding } from '../api/status.ts';
import { writesProtobuf } from '../represent/protobuf/objects.ts';
import { writesTable } from '../represent/table/encode.ts';
import type { Representation } from '../api/negotiation.ts';
import type { GatewayMetrics } from '../metrics/metrics.ts';
import type { Admitted } from './admission.ts';
import { decide, type ForwardReason, type ReadPlan, type WatchPlan } from './decide.ts';
import { serveRead } from './read.ts';
import { answersAtLeast } from '../store/query.ts';
import { serveWatch, type ServedWatch } from './watch.ts';
import { within } from '../within.ts';
import { untilDeadline } from '../api/deadline.ts';

export interface AnswerDeps {
  guard: AccessGuard;
  metrics: GatewayMetrics;
  cache?: CacheView | undefined;
  watchReauthorizer?: WatchReauthorizer | undefined;
  flow?: FlowController | undefined;
  rules?: (() => readonly Rule[]) | undefined;
  consistentReadProofBytes?: number | undefined;
}

/** A watch answered from the cache: its end, and its re-authorization to stop then. */
export interface CachedWatch {
  watch: ServedWatch;
  recheck: WatchEntry | undefined;
}

/** Where the cache stages left a request: answered, watching, or to be forwarded (and why). */
export type Outcome = { answered: number } | { watching: CachedWatch } | { forward: ForwardReason };

type Decided = { forward: ForwardReason } | { cached: CachedResource; plan: ReadPlan | WatchPlan };

/**
 * Stage: decide. The consistent-read policy a rule names for this client goes in with the rest;
 * at once unless such a rule must learn who the client is (src/maybe.ts).
 */
export function decideRequest(deps: AnswerDeps, req: DownstreamRequest, admitted: Admitted): Maybe<Decided> {
  const { info } = admitted;
  const cached = deps.cache?.lookup(info.apiGroup, info.resource);
  // The query as the apiserver reads it (Go's url.ParseQuery).
  const query = goQuery(rawQueryOf(req.url ?? '/'));
  // Only a read of a cached resource without resourceVersion consults the rules' policies.
  const rules = deps.rules?.() ?? [];
  if (!cached || rules.length === 0 || query.get('resourceVersion')) return decideFor(deps, req, admitted, cached, query, undefined);
  return consistentReadsFor(rules, { info, beginsWithState: beginsWithState(info, query) }, admitted.user, deps.flow?.upstreamBusy('read') ?? false).then(
    (policy) => decideFor(deps, req, admitted, cached, query, policy),
    // A user that cannot be learned now leaves the resource's own policy in force.
    () => decideFor(deps, req, admitted, cached, query, undefined),
  );
}

function decideFor(
  deps: AnswerDeps,
  req: DownstreamRequest,
  admitted: Admitted,
  cached: CachedResource | undefined,
  query: URLSearchParams,
  ruleConsistentReads: ConsistentReads | undefined,
): Decided {
  const { info } = admitted;
  const decision = decide(
    {
      method: req.method,
      info,
      query,
      accept: req.headers.accept,
      userAgent: req.headers['user-agent'],
      impersonating: Object.keys(req.headers).some(isImpersonationHeader),
    },
    {
      cached: cached !== undefined,
      synced: cached?.store.synced ?? false,
      namespaced: cached?.info.namespaced ?? false,
      consistentReads: cached?.consistentReads ?? 'forward',
      ruleConsistentReads,
      selection: cached?.selection,
      watchList: cached?.reflector.watchListSupported ?? false,
      version: cached?.info.version,
      selectableFields: cached?.info.selectableFields,
      customResource: cached?.info.listKind !== undefined,
      writes: cached ? (rep) => writes(cached, rep) : undefined,
      upstreamBusy: deps.flow?.upstreamBusy('read') ?? false,
      proofBytes: deps.consistentReadProofBytes,
      answersAtLeast: cached ? (q, bytes) => answersAtLeast(cached.store, q, bytes) : undefined,
    },
  );
  if (decision.source === 'upstream' || !cached) return { forward: decision.source === 'upstream' ? decision.reason : 'not-cached' };
  return { cached, plan: decision.plan };
}

/** The representations the cache writes for this resource (docs/design.md, "Representations"). */
function writes(cached: CachedResource, rep: Representation): boolean {
  if (rep.as === 'object') return rep.media === 'json' || writesProtobuf(cached.info);
  if (rep.as === 'Table') return writesTable(cached.info);
  return true;
}

/** The attributes the apiserver's authorization filter would check for this request. */
export function attributesOf(admitted: Admitted): ResourceAttributes {
  const { info } = admitted;
  return {
    verb: info.verb,
    group: info.apiGroup,
    version: info.apiVersion,
    resource: info.resource,
    subresource: info.subresource,
    namespace: info.namespace,
    name: info.name,
    fieldSelector: info.fieldSelector,
    labelSelector: info.labelSelector,
  };
}

/**
 * Stages: authorize, then answer from the cache; a forward reason when the apiserver must. At once
 * when nothing waits (src/maybe.ts): a cached GET is written before this returns.
 */
export function answerFromCache(
  deps: AnswerDeps,
  admitted: Admitted,
  decided: { cached: CachedResource; plan: ReadPlan | WatchPlan },
  res: DownstreamResponse,
  arrivedAt: bigint,
  requestId: string,
  /** How errors are written to this client, when that can be told. */
  errors?: () => StatusEncoding | undefined,
): Maybe<Outcome> {
  const attrs = attributesOf(admitted);
  const { plan } = decided;
  const admission = deps.guard.admit(admitted.credential, attrs);
  const bounded = admission instanceof Promise && 'initialEventsEnd' in plan && plan.timeoutSeconds ? beforeWatchEnd(admission, plan.timeoutSeconds, arrivedAt) : admission;
  return then(bounded, (a) => {
    if (a) return answerAdmitted(deps, admitted, attrs, a, decided, res, arrivedAt, requestId, errors);
    const status = newTimeout('the client\'s rights could not be reviewed before the end of its watch');
    const encoding = errors?.();
    if (encoding) writeStatus(res, status, encoding);
    else writeStatusAs(res, status, plan.representation);
    return { answered: status.code };
  });
}

/**
 * A watch's authorization, bounded by the watch's own end (`timeoutSeconds` from its arrival, and
 * a second): undefined once that has passed. A review that hangs (the apiserver's connection gone
 * silent without closing) must not hold a client without an answer for longer than the watch it
 * asked for, as the timeout filter bounds every other request; it gets a 504 Timeout and watches
 * again, as after the apiserver's own 504. The review goes on, and its answer is cached.
 */
function beforeWatchEnd(admission: Promise<Admission>, timeoutSeconds: number, arrivedAt: bigint): Promise<Admission | undefined> {
  return within(admission, untilDeadline(timeoutSeconds * 1000, arrivedAt));
}

function answerAdmitted(
  deps: AnswerDeps,
  admitted: Admitted,
  attrs: ResourceAttributes,
  admission: Admission,
  decided: { cached: CachedResource; plan: ReadPlan | WatchPlan },
  res: DownstreamResponse,
  arrivedAt: bigint,
  requestId: string,
  errors: (() => StatusEncoding | undefined) | undefined,
): Maybe<Outcome> {
  if (admission.allowed === false) {
    // Refused exactly as the apiserver refuses: no cached byte reaches this client. Its
    // authentication and authorization filters negotiate the error with the default serializers,
    // not the resource's (a custom resource's client that prefers protobuf gets a protobuf 403).
    const encoding = errors?.();
    if (encoding) writeStatus(res, admission.status, encoding);
    else writeStatusAs(res, admission.status, decided.plan.representation);
    return { answered: admission.status.code };
  }
  if (admission.allowed === 'undecided') return { forward: 'undecided' };
  const { cached, plan } = decided;
  if ('initialEventsEnd' in plan) {
    return serveWatch(cached, plan, res, arrivedAt, deps.metrics.cache, requestId).then((watching) => {
      if ('forward' in watching) return watching;
      const recheck = deps.watchReauthorizer?.add(admitted.credential, attrs, watching);
      // Wrapped, not awaited: a suspended async frame keeps every local it held (the query, the
      // decision) until the watch ends, hours later, in each of thousands of watches.
      return { watching: { watch: watching, recheck } };
    });
  }
  return then(serveRead(cached, plan, res, arrivedAt, deps.metrics.cache, requestId), (served) => ('forward' in served ? served : { answered: served.code }));
}
