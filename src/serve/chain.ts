// A request's life in Levee, in order: Levee's own endpoints, request info, authentication (a 401
// for no acceptable credentials), the configured rules, flow control, then an answer from the
// cache (authorized first: a 403 exactly as the apiserver's) or a forward under the identity the
// credential maps to upstream. Upgrades (exec, attach, port-forward) pass the same authentication,
// rules and flow control before their tunnel opens, and hold their seat while it is open.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { newInternalError, newUnauthorized } from '../api/status.ts';
import type { Logger } from '../log/logger.ts';
import { metricVerb, type GatewayMetrics, type Source } from '../metrics/metrics.ts';
import type { DownstreamRequest, DownstreamResponse } from './downstream.ts';
import { forward, UpstreamUnavailableError } from '../upstream/forward.ts';
import { coalescingKey, type Flight, type ReadCoalescer } from '../upstream/coalesce.ts';
import type { DiscoveryCache } from '../discovery/cache.ts';
import type { UpstreamPools } from '../upstream/pools.ts';
import { tunnelUpgrade, writeStatusAndClose } from '../upstream/tunnel.ts';
import type { Health } from './health.ts';
import type { Credential } from '../auth/authenticate.ts';
import { forbidden, type ResourceAttributes } from '../auth/authorize.ts';
import type { Status } from '../api/types.ts';
import type { AccessGuard } from '../auth/guard.ts';
import { isImpersonationHeader } from '../auth/impersonation.ts';
import type { Entry as WatchEntry, WatchReauthorizer } from '../auth/watchrecheck.ts';
import { beginsWithState, consistentReadsFor, decidingRule, type Rule, type UserLookup } from '../config/rules.ts';
import { ReviewRejectedError } from '../auth/reviewlimit.ts';
import { WarmupBackoff } from '../flow/warmup.ts';
import { newServiceUnavailable } from '../api/status.ts';
import type { UserInfo } from '../auth/user.ts';
import { classify, isExempt, tooManyRequests, type FlowController, type PriorityClass } from '../flow/flowcontrol.ts';
import type { Grant } from '../flow/fairqueue.ts';
import type { Cache } from '../cache/cache.ts';
import { decideRead, decideWatch, type ForwardReason } from './decide.ts';
import { serveWatch } from './watchcache.ts';
import { serveRead } from './readcache.ts';
import { isDebugRequest, serveDebug } from './debug.ts';
import { isLongRunning, parseRequestInfo, RequestInfoError, type RequestInfo } from './requestinfo.ts';
import { writeStatus, writeText } from './respond.ts';
import type { Handlers } from './listener.ts';

/** A watch answered from the cache: its end, and its re-authorization to stop then. */
interface CachedWatch {
  watch: Promise<number>;
  recheck: WatchEntry | undefined;
}

export interface ChainDeps {
  pools: UpstreamPools;
  metrics: GatewayMetrics;
  health: Health;
  logger: Logger;
  guard: AccessGuard;
  cache?: Cache | undefined;
  watchReauthorizer?: WatchReauthorizer | undefined;
  /** Flow control; without it every request is taken at once. */
  flow?: FlowController | undefined;
  /** The configuration's rules, read at each request so a reload takes effect at once. */
  rules?: (() => readonly Rule[]) | undefined;
  /** Aborted at shutdown: forwarded watches then end cleanly between two events. */
  ending?: AbortSignal | undefined;
  /** Discovery and OpenAPI from a short-lived cache; without it they are forwarded. */
  discovery?: DiscoveryCache | undefined;
  /** Identical reads in flight upstream share one request; without it each goes upstream. */
  coalescer?: ReadCoalescer | undefined;
}

/** What the stages before the answer learned about a request that may go on. */
interface Admitted {
  credential: Credential;
  /** The client's user, looked up once and only when something needs it (a token is reviewed then). */
  user: UserLookup;
  /** Its flow-control class and flow, when flow control applies to it. */
  flow: { cls: PriorityClass; key: string } | undefined;
  /** Seats held until the request ends. */
  seats: Grant[];
}

export function createHandlers(deps: ChainDeps): Handlers {
  const { metrics, logger } = deps;
  const warmup = new WarmupBackoff();

  // ---- stages shared by requests and upgrades

  /** Stage: request info, as the apiserver's WithRequestInfo filter, or its 500 for a bad path. */
  const requestInfo = (method: string, url: string): RequestInfo | Status => {
    try {
      return parseRequestInfo(method, url);
    } catch (err) {
      if (!(err instanceof RequestInfoError)) throw err;
      return newInternalError(`failed to create RequestInfo: ${err.message}`);
    }
  };

  /** Stage: authentication, the apiserver's 401 when no authenticator accepts the request. */
  const authenticate = (req: Parameters<AccessGuard['credential']>[0], id: string): Credential | Status => {
    const credential = deps.guard.credential(req);
    if (credential.kind !== 'unauthorized') return credential;
    logger.debug({ requestId: id, why: credential.why }, 'unauthorized');
    return newUnauthorized();
  };

  /**
   * Stages: the configured rules, then flow control (a seat of the request's class, fairly shared
   * between clients, or a 429). A token is reviewed here only for a rule that names users.
   */
  const admit = async (
    req: Parameters<AccessGuard['credential']>[0] & { socket?: { remoteAddress?: string | undefined } | null },
    info: RequestInfo,
    longRunning: boolean,
    credential: Credential,
    signal: AbortSignal | undefined,
  ): Promise<Admitted | Status> => {
    let looked: Promise<UserInfo | undefined> | undefined;
    const user: UserLookup = () => (looked ??= deps.guard.userOf(credential));
    const admitted: Admitted = { credential, user, flow: undefined, seats: [] };
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const ruleRequest = { info, beginsWithState: beginsWithState(info, new URLSearchParams(q === -1 ? '' : url.slice(q + 1))) };
    try {
      const rule = await decidingRule(deps.rules?.() ?? [], ruleRequest, user);
      // The refusal names the user as the apiserver's would, when Levee can learn it.
      if (rule?.action === 'deny') return deniedByRule(info, deps.guard.knownUser(credential) ?? (await user().catch(() => undefined)), rule.name);
      if (rule?.action === 'reject') return tooManyRequests(rule.retryAfterSeconds ?? 1);
    } catch (err) {
      // A rule that names users could not learn this one: never let the client past it unseen.
      if (err instanceof ReviewRejectedError) return tooManyRequests();
      return newServiceUnavailable(`the client's credentials could not be reviewed: ${err instanceof Error ? err.message : String(err)}`);
    }
    if (deps.flow && !isExempt(info, deps.guard.knownUser(credential))) {
      const flow = { cls: classify(info, longRunning), key: deps.guard.flowOf(credential, req.socket?.remoteAddress) };
      const seat = await deps.flow.admit(flow.cls, flow.key, signal);
      if ('code' in seat) return seat;
      admitted.flow = flow;
      admitted.seats.push(seat);
    }
    return admitted;
  };

  /** Stage: the upstream bound of the request's class, taken by whatever goes upstream. */
  const admitUpstream = async (admitted: Admitted, signal: AbortSignal | undefined): Promise<Status | undefined> => {
    if (!deps.flow || !admitted.flow) return undefined;
    const seat = await deps.flow.admitUpstream(admitted.flow.cls, admitted.flow.key, signal);
    if ('code' in seat) return seat;
    admitted.seats.push(seat);
    return undefined;
  };

  // ---- Levee's own endpoints

  const local = (req: DownstreamRequest, res: DownstreamResponse, path: string, query: string): boolean => {
    if (req.method !== 'GET' && req.method !== 'HEAD') return false;
    const verbose = new URLSearchParams(query).has('verbose');
    switch (path) {
      case '/livez': {
        const r = deps.health.livez(verbose);
        writeText(res, r.code, r.body);
        return true;
      }
      case '/readyz': {
        const r = deps.health.readyz(verbose);
        writeText(res, r.code, r.body);
        return true;
      }
      case '/metrics':
        metrics.registry.metrics().then(
          (text) => writeText(res, 200, text, metrics.registry.contentType),
          (err: unknown) => writeStatus(res, newInternalError(String(err))),
        );
        return true;
      default:
        return false;
    }
  };

  // ---- requests

  const request = async (req: DownstreamRequest, res: DownstreamResponse): Promise<void> => {
    const started = process.hrtime.bigint();
    const id = requestId(req);
    // What finishing needs of the request, taken out of it: the closures that finish a watch live
    // as long as the watch, and one that named `req` would keep its headers as long.
    const method = req.method ?? 'GET';
    const contentType = req.headers['content-type'];
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);

    let info: RequestInfo | undefined;
    let source: Source = 'local';
    let code = 0;
    let longRunning = false;
    let admitted: Admitted | undefined;
    let flight: Flight | undefined;
    // A watch answered from the cache: what ends the request waits for it, and this frame does not.
    let watching: CachedWatch | undefined;
    let cancelled: ReturnType<typeof abortOnClose> | undefined;
    try {
      if (local(req, res, path, q === -1 ? '' : url.slice(q + 1))) return;
      const parsed = requestInfo(method, url);
      if ('code' in parsed) return writeStatus(res, parsed);
      info = parsed;
      longRunning = isLongRunning(info);
      const credential = authenticate(req, id);
      if ('code' in credential) return writeStatus(res, credential);
      if (isDebugRequest(req.method, path)) {
        code = await serveDebug(path, res, credential, deps.guard, deps.cache);
        return;
      }
      cancelled = deps.flow ? abortOnClose(res) : undefined;
      const passed = await admit(req, info, longRunning, credential, cancelled?.signal);
      if ('code' in passed) return writeStatus(res, passed);
      admitted = passed;
      if (deps.discovery && !info.isResourceRequest) {
        const served = await deps.discovery.serve(req, res, credential, id);
        if (served !== 'forward') {
          source = 'cache';
          code = served;
          return;
        }
      }
      let forwardReason: string | undefined;
      // HEAD reaches the cache's verbs too, but the apiserver has no HEAD route for resources
      // (it answers 405): it is its to answer.
      if ((!longRunning || info.verb === 'watch') && deps.cache && method === 'GET') {
        const answered = await fromCache(info, req, res, admitted, started, id);
        if (typeof answered === 'number') {
          source = 'cache';
          code = answered;
          return;
        }
        if ('watch' in answered) {
          source = 'cache';
          watching = answered;
          return;
        }
        forwardReason = answered.reason;
      }
      const auth = await deps.guard.upstreamAuth(credential, req.rawHeaders);
      if ('code' in auth) return writeStatus(res, auth);
      // The same read already on its way upstream: its answer serves this one too, with no seat
      // of the upstream bound taken.
      const key = longRunning || !deps.coalescer ? undefined : coalescingKey(req.method, url, req.rawHeaders, auth);
      if (key && deps.coalescer) {
        const joined = deps.coalescer.join(key);
        if (joined.role === 'leader') flight = joined.flight;
        else {
          const shared = await deps.coalescer.follow(joined.answer, res, id);
          if (shared !== undefined) {
            source = 'upstream';
            code = shared;
            return;
          }
        }
      }
      // The apiserver is protected by a bound of its own: what the cache cannot answer waits here,
      // not there. Reads of a resource still warming up are told to come back later, a little later
      // the more were turned away (KEP-4568), rather than pile up behind the bound.
      const full = await admitUpstream(admitted, cancelled?.signal);
      if (full) return writeStatus(res, forwardReason === 'not-synced' ? tooManyRequests(warmup.retryAfter(`${info.apiGroup}/${info.resource}`)) : full);
      source = 'upstream';
      const labels = requestLabels(info, method, contentType, source);
      if (longRunning) metrics.longRunning.inc(labels);
      try {
        code = await forward(req, res, deps.pools, { auth, traffic: longRunning ? 'longRunning' : 'request', ending: info.verb === 'watch' ? deps.ending : undefined, share: flight });
      } finally {
        if (longRunning) metrics.longRunning.dec(labels);
      }
    } catch (err) {
      if (err instanceof UpstreamUnavailableError) {
        logger.warn({ err: err.cause instanceof Error ? err.cause.message : String(err.cause), path }, 'upstream unavailable');
        writeStatus(res, err.status);
      } else {
        logger.error({ err }, 'request failed');
        writeStatus(res, newInternalError('the request could not be handled'));
      }
    } finally {
      // Whatever happened, requests waiting on this one must not wait forever.
      flight?.settle(undefined);
      cancelled?.dispose();
      const seats = admitted?.seats ?? [];
      const credential = admitted?.credential;
      const finish = (final: number): void => {
        for (const seat of seats) seat.release();
        final ||= res.statusCode;
        const seconds = Number(process.hrtime.bigint() - started) / 1e9;
        if (info) {
          const labels = requestLabels(info, method, contentType, source);
          metrics.requests.inc({ ...labels, code: String(final) });
          if (!longRunning) metrics.duration.observe({ ...labels, code: String(final) }, seconds);
        }
        logger.info(
          {
            requestId: id,
            user: credential ? deps.guard.knownUser(credential)?.username : undefined,
            verb: info?.verb ?? method,
            path,
            resource: info?.resource || undefined,
            namespace: info?.namespace || undefined,
            code: final,
            source,
            latencyMs: Math.round(seconds * 1e6) / 1e3,
          },
          'request',
        );
      };
      // A suspended async frame keeps every local it held until the watch ends, hours later, in
      // each of thousands of watches; a closure keeps only what finishing needs.
      if (watching && info) {
        const { watch, recheck } = watching;
        const watchInfo = info;
        const ended = (c: number): void => {
          if (recheck) deps.watchReauthorizer?.remove(recheck);
          metrics.longRunning.dec(requestLabels(watchInfo, method, contentType, 'cache'));
          finish(c);
        };
        watch.then(ended, () => ended(500));
      } else finish(code);
    }
  };

  /** Answers from the cache when it can, authorized; a reason means forward. */
  const fromCache = async (
    info: RequestInfo,
    req: DownstreamRequest,
    res: DownstreamResponse,
    admitted: Admitted,
    arrivedAt: bigint,
    id: string,
  ): Promise<number | { reason: string } | CachedWatch> => {
    const cache = deps.cache;
    const cached = cache?.lookup(info.apiGroup, info.resource);
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const request = {
      info,
      query: new URLSearchParams(q === -1 ? '' : url.slice(q + 1)),
      accept: req.headers.accept,
      userAgent: req.headers['user-agent'],
      impersonating: Object.keys(req.headers).some(isImpersonationHeader),
    };
    let consistentReads = cached?.consistentReads ?? 'forward';
    // Only a read without resourceVersion consults the policy.
    const rules = deps.rules?.() ?? [];
    if (cached && rules.length > 0 && !request.query.get('resourceVersion')) {
      const ruleRequest = { info, beginsWithState: beginsWithState(info, request.query) };
      // A user that cannot be learned now leaves the resource's own policy in force.
      const chosen = await consistentReadsFor(rules, ruleRequest, admitted.user, deps.flow?.upstreamBusy('read') ?? false).catch(() => undefined);
      consistentReads = chosen ?? consistentReads;
    }
    const decide = info.verb === 'watch' ? decideWatch : decideRead;
    const decision = decide(request, {
      cached: cached !== undefined,
      synced: cached?.store.synced ?? false,
      namespaced: cached?.info.namespaced ?? false,
      consistentReads,
      selection: cached?.selection,
      watchList: cached?.reflector.watchListSupported ?? false,
      version: cached?.info.version,
      selectableFields: cached?.info.selectableFields,
    });
    let reason: ForwardReason | 'undecided' | 'window' = decision.source === 'upstream' ? decision.reason : 'window';
    if (decision.source === 'cache' && cached) {
      const attrs: ResourceAttributes = {
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
      const admission = await deps.guard.admit(admitted.credential, attrs);
      if (admission.allowed === false) {
        // Refused exactly as the apiserver refuses: no cached byte reaches this client.
        writeStatus(res, admission.status);
        return admission.status.code;
      }
      if (admission.allowed === 'undecided') {
        reason = 'undecided';
      } else if ('resourceVersion' in decision.plan) {
        const watching = await serveWatch(cached, decision.plan, res, arrivedAt, metrics.cache, id);
        if (watching !== 'forward') {
          const labels = requestLabels(info, req.method ?? 'GET', req.headers['content-type'], 'cache');
          metrics.longRunning.inc(labels);
          const recheck = deps.watchReauthorizer?.add(admitted.credential, attrs, watching);
          // Wrapped, not awaited: a suspended async frame keeps every local it held (the query,
          // the decision) until the watch ends, hours later, in each of thousands of watches.
          return { watch: watching.done, recheck };
        }
      } else {
        const served = await serveRead(cached, decision.plan, res, arrivedAt, metrics.cache, id);
        if (served !== 'forward') return served.code;
      }
    }
    if (decision.source === 'cache' || decision.reason !== 'not-a-read') metrics.forwards.inc({ reason });
    return { reason };
  };

  const requestLabels = (info: RequestInfo, method: string, contentType: string | undefined, source: Source) =>
    metrics.labels(
      metricVerb(info.verb, method, contentType, false),
      info.apiGroup,
      info.resource,
      info.subresource,
      source,
    );

  // ---- upgrades: exec, attach, port-forward

  const upgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    const started = process.hrtime.bigint();
    const id = requestId(req);
    let info: RequestInfo | undefined;
    let seats: Grant[] = [];
    let open = false;
    // A client that hangs up while waiting for a seat leaves its queue; the seats are given back
    // when the tunnel (or the refusal) closes.
    const gone = new AbortController();
    socket.once('close', () => {
      gone.abort();
      for (const seat of seats) seat.release();
      if (open && info) metrics.longRunning.dec(tunnelLabels(info));
    });
    const tunnel = async (): Promise<number> => {
      const refuse = (status: Status): number => {
        writeStatusAndClose(socket, status);
        return status.code;
      };
      const parsed = requestInfo(req.method ?? 'GET', req.url ?? '/');
      if ('code' in parsed) return refuse(parsed);
      info = parsed;
      const credential = authenticate(req, id);
      if ('code' in credential) return refuse(credential);
      const admitted = await admit(req, info, true, credential, gone.signal);
      if ('code' in admitted) return refuse(admitted);
      seats = admitted.seats;
      if (socket.destroyed) return 499;
      const full = await admitUpstream(admitted, gone.signal);
      if (full) return refuse(full);
      const auth = await deps.guard.upstreamAuth(credential, req.rawHeaders);
      if ('code' in auth) return refuse(auth);
      if (socket.destroyed) return 499;
      open = true;
      metrics.longRunning.inc(tunnelLabels(info));
      return (await tunnelUpgrade(req, socket, head, deps.pools, auth)).code;
    };
    tunnel().then(
      (code) => {
        metrics.requests.inc({ ...tunnelLabels(info), code: String(code) });
        logger.info(
          {
            requestId: id,
            verb: 'connect',
            path: info?.path ?? req.url,
            code,
            source: 'upstream',
            latencyMs: Number(process.hrtime.bigint() - started) / 1e6,
          },
          'upgrade',
        );
      },
      (err: unknown) => {
        logger.error({ err }, 'upgrade failed');
        socket.destroy();
      },
    );
  };

  const tunnelLabels = (info: RequestInfo | undefined) => metrics.labels('CONNECT', info?.apiGroup ?? '', info?.resource ?? '', info?.subresource ?? '', 'upstream');

  return {
    request: (req, res) => void request(req, res),
    upgrade,
  };
}

/** A rule's refusal, shaped as the apiserver's Forbidden for the same request. */
function deniedByRule(info: RequestInfo, user: UserInfo | undefined, rule: string): Status {
  const why = `denied by Levee rule "${rule}"`;
  const who = { username: user?.username ?? '', uid: '', groups: [], extra: {} };
  if (!info.isResourceRequest) return forbidden(who, { verb: info.verb, path: info.path }, why);
  return forbidden(who, { verb: info.verb, group: info.apiGroup, resource: info.resource, subresource: info.subresource, namespace: info.namespace, name: info.name }, why);
}

/**
 * Aborts when the client goes away, so a request waiting for a seat leaves its queue. Disposed
 * once nothing waits any more: every response closes in the end, and aborting then would only
 * build a DOMException (with its stack) for nobody.
 */
function abortOnClose(res: DownstreamResponse): { signal: AbortSignal; dispose: () => void } {
  const ac = new AbortController();
  const onClose = (): void => ac.abort();
  res.once('close', onClose);
  return { signal: ac.signal, dispose: () => void res.off('close', onClose) };
}

function requestId(req: DownstreamRequest): string {
  const audit = req.headers['audit-id'];
  return typeof audit === 'string' && audit !== '' ? audit : randomUUID();
}
