// A request's life in Levee, in order: Levee's own endpoints, request info, authentication (a 401
// for no acceptable credentials), then an answer from the cache (authorized first: a 403 exactly as
// the apiserver's) or a forward under the identity the credential maps to upstream.
import { createHash, randomUUID } from 'node:crypto';
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
import { consistentReadsFor, decidingRule, type Rule } from '../config/rules.ts';
import type { UserInfo } from '../auth/user.ts';
import { classify, isExempt, tooManyRequests, type FlowController } from '../flow/flowcontrol.ts';
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

export function createHandlers(deps: ChainDeps): Handlers {
  const { metrics, logger } = deps;

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
    let credential: Credential | undefined;
    let source: Source = 'local';
    let code = 0;
    let longRunning = false;
    let user: UserInfo | undefined;
    const seats: Grant[] = [];
    let flight: Flight | undefined;
    // A watch answered from the cache: what ends the request waits for it, and this frame does not.
    let watching: CachedWatch | undefined;
    let cancelled: ReturnType<typeof abortOnClose> | undefined;
    try {
      if (local(req, res, path, q === -1 ? '' : url.slice(q + 1))) return;
      try {
        info = parseRequestInfo(req.method ?? 'GET', url);
      } catch (err) {
        if (!(err instanceof RequestInfoError)) throw err;
        // The apiserver's WithRequestInfo filter answers an unparsable path this way.
        writeStatus(res, newInternalError(`failed to create RequestInfo: ${err.message}`));
        return;
      }
      longRunning = isLongRunning(info);
      credential = deps.guard.credential(req);
      if (credential.kind === 'unauthorized') {
        logger.debug({ requestId: id, why: credential.why }, 'unauthorized');
        writeStatus(res, newUnauthorized());
        return;
      }
      if (isDebugRequest(req.method, path)) {
        code = await serveDebug(path, res, credential, deps.guard, deps.cache);
        return;
      }
      user = await deps.guard.userOf(credential);
      const rule = decidingRule(deps.rules?.() ?? [], info, user);
      if (rule?.action === 'deny') {
        writeStatus(res, deniedByRule(info, user, rule.name));
        return;
      }
      if (rule?.action === 'reject') {
        writeStatus(res, tooManyRequests(rule.retryAfterSeconds ?? 1));
        return;
      }
      // Flow control: a seat of the request's class, fairly shared between users, or a 429.
      const flow = deps.flow && !isExempt(info, user) ? { cls: classify(info, longRunning), key: user?.username ?? flowFallback(credential, req) } : undefined;
      cancelled = flow ? abortOnClose(res) : undefined;
      if (flow) {
        const seat = await deps.flow!.admit(flow.cls, flow.key, cancelled?.signal);
        if ('code' in seat) {
          writeStatus(res, seat);
          return;
        }
        seats.push(seat);
      }
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
        const answered = await fromCache(info, req, res, credential, user, started, id);
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
      if ('code' in auth) {
        writeStatus(res, auth);
        return;
      }
      // The same read already on its way upstream: its answer serves this one too, with no seat
      // of the upstream bound taken.
      const key = longRunning || !deps.coalescer ? undefined : coalescingKey(req.method, url, req.rawHeaders, auth);
      if (key) {
        const joined = deps.coalescer!.join(key);
        if (joined.role === 'leader') flight = joined.flight;
        else {
          const shared = await deps.coalescer!.follow(joined.answer, res, id);
          if (shared !== undefined) {
            source = 'upstream';
            code = shared;
            return;
          }
        }
      }
      if (flow) {
        // The apiserver is protected by a bound of its own: what the cache cannot answer waits
        // here, not there. Reads of a resource still warming up are told to come back later, a
        // little later each time (KEP-4568), rather than pile up behind the bound.
        const seat = await deps.flow!.admitUpstream(flow.cls, flow.key, cancelled?.signal);
        if ('code' in seat) {
          writeStatus(res, forwardReason === 'not-synced' ? tooManyRequests(warmupRetryAfter()) : seat);
          return;
        }
        seats.push(seat);
      }
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
            user: user?.username,
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
      if (watching) {
        const { watch, recheck } = watching;
        const ended = (c: number): void => {
          if (recheck) deps.watchReauthorizer!.remove(recheck);
          metrics.longRunning.dec(requestLabels(info!, method, contentType, 'cache'));
          finish(c);
        };
        watch.then(ended, () => ended(500));
      }
      else finish(code);
    }
  };

  /** Answers from the cache when it can, authorized; undefined means forward. */
  const fromCache = async (
    info: RequestInfo,
    req: DownstreamRequest,
    res: DownstreamResponse,
    credential: Credential,
    user: UserInfo | undefined,
    arrivedAt: bigint,
    id: string,
  ): Promise<number | { reason: string } | CachedWatch> => {
    const cached = deps.cache!.lookup(info.apiGroup, info.resource);
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
      consistentReads = consistentReadsFor(rules, info, user, deps.flow?.upstreamBusy('read') ?? false) ?? consistentReads;
    }
    const decide = info.verb === 'watch' ? decideWatch : decideRead;
    const decision = decide(
      request,
      {
        cached: cached !== undefined,
        synced: cached?.store.synced ?? false,
        namespaced: cached?.info.namespaced ?? false,
        consistentReads,
        selection: cached?.selection,
        watchList: cached?.reflector.watchListSupported ?? false,
        version: cached?.info.version,
        selectableFields: cached?.info.selectableFields,
      },
    );
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
      };
      const admission = await deps.guard.admit(credential, attrs);
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
          const recheck = deps.watchReauthorizer?.add(credential, attrs, watching);
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

  // Each rejection of a read of a resource still warming up asks the client to wait a little
  // longer, up to 10 s, so a mass restart spreads out instead of retrying in lockstep.
  let warmupRejections = 0;
  const warmupRetryAfter = (): number => Math.min(10, 1 + Math.floor(warmupRejections++ / 100));

  const requestLabels = (info: RequestInfo, method: string, contentType: string | undefined, source: Source) =>
    metrics.labels(
      metricVerb(info.verb, method, contentType, false),
      info.apiGroup,
      info.resource,
      info.subresource,
      source,
    );

  const upgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    const started = process.hrtime.bigint();
    let info: RequestInfo | undefined;
    try {
      info = parseRequestInfo(req.method ?? 'GET', req.url ?? '/');
    } catch {
      info = undefined;
    }
    const labels = metrics.labels('CONNECT', info?.apiGroup ?? '', info?.resource ?? '', info?.subresource ?? '', 'upstream');
    metrics.longRunning.inc(labels);
    socket.once('close', () => metrics.longRunning.dec(labels));
    const tunnel = async (): Promise<{ code: number }> => {
      const auth = await deps.guard.upstreamAuth(deps.guard.credential(req), req.rawHeaders);
      if ('code' in auth) {
        writeStatusAndClose(socket, auth);
        return { code: auth.code };
      }
      return tunnelUpgrade(req, socket, head, deps.pools, auth);
    };
    tunnel().then(
      ({ code }) => {
        metrics.requests.inc({ ...labels, code: String(code) });
        logger.info(
          {
            requestId: requestId(req),
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

/** Before the user is known (a token not reviewed), a hash of the credential stands for the flow. */
function flowFallback(credential: Credential, req: DownstreamRequest): string {
  if (credential.kind === 'token') return `token:${createHash('sha256').update(credential.token).digest('base64')}`;
  return `address:${req.socket?.remoteAddress ?? ''}`;
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
