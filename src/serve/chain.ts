// A request's life in Levee, in order: Levee's own endpoints, request info, the identity the
// request travels upstream under, then the answer (today: always the upstream forwarder).
// Authentication, authorization, flow control and the cache plug in here as further stages.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { newInternalError } from '../api/status.ts';
import type { Logger } from '../log/logger.ts';
import { metricVerb, type GatewayMetrics, type Source } from '../metrics/metrics.ts';
import type { Identity } from '../upstream/connector.ts';
import type { DownstreamRequest, DownstreamResponse } from './downstream.ts';
import { forward, UpstreamUnavailableError } from '../upstream/forward.ts';
import type { UpstreamPools } from '../upstream/pools.ts';
import { tunnelUpgrade } from '../upstream/tunnel.ts';
import type { Health } from './health.ts';
import type { AccessReviewer } from '../auth/access.ts';
import type { Cache } from '../cache/cache.ts';
import { decideRead, decideWatch, type ForwardReason } from './decide.ts';
import { serveWatch } from './watchcache.ts';
import { serveRead } from './readcache.ts';
import { isLongRunning, parseRequestInfo, RequestInfoError, type RequestInfo } from './requestinfo.ts';
import { writeStatus, writeText } from './respond.ts';
import type { Handlers } from './listener.ts';

/**
 * `delegate`: the client's own credentials travel upstream; a request without any is anonymous
 * there, exactly as if it had gone to the apiserver directly.
 * `trust-loopback` (sidecar): a request without credentials is sent with Levee's own identity.
 * Only allowed on loopback listeners, where the only clients are in the same pod.
 */
export type AuthMode = 'delegate' | 'trust-loopback';

export interface ChainDeps {
  pools: UpstreamPools;
  metrics: GatewayMetrics;
  health: Health;
  logger: Logger;
  auth: AuthMode;
  cache?: Cache | undefined;
  access?: AccessReviewer | undefined;
}

export function requestIdentity(req: DownstreamRequest, mode: AuthMode): Identity {
  if (req.headers.authorization !== undefined) return 'client';
  return mode === 'trust-loopback' ? 'own' : 'client';
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
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);

    let info: RequestInfo | undefined;
    let source: Source = 'local';
    let code = 0;
    let longRunning = false;
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
      const identity = requestIdentity(req, deps.auth);
      if ((!longRunning || info.verb === 'watch') && deps.cache && deps.access) {
        const answered = await fromCache(info, req, res, identity, started, id);
        if (answered !== undefined) {
          source = 'cache';
          code = answered;
          return;
        }
      }
      source = 'upstream';
      const labels = requestLabels(info, req, source);
      if (longRunning) metrics.longRunning.inc(labels);
      try {
        code = await forward(req, res, deps.pools, { identity, traffic: longRunning ? 'longRunning' : 'request' });
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
      code ||= res.statusCode;
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      if (info) {
        const labels = requestLabels(info, req, source);
        metrics.requests.inc({ ...labels, code: String(code) });
        if (!longRunning) metrics.duration.observe(labels, seconds);
      }
      logger.info(
        {
          requestId: id,
          verb: info?.verb ?? req.method,
          path,
          resource: info?.resource || undefined,
          namespace: info?.namespace || undefined,
          code,
          source,
          latencyMs: Math.round(seconds * 1e6) / 1e3,
        },
        'request',
      );
    }
  };

  /** Answers from the cache when it can, authorized; undefined means forward. */
  const fromCache = async (
    info: RequestInfo,
    req: DownstreamRequest,
    res: DownstreamResponse,
    identity: Identity,
    arrivedAt: bigint,
    id: string,
  ): Promise<number | undefined> => {
    const cached = deps.cache!.lookup(info.apiGroup, info.resource);
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const request = {
      info,
      query: new URLSearchParams(q === -1 ? '' : url.slice(q + 1)),
      accept: req.headers.accept,
      userAgent: req.headers['user-agent'],
      impersonating: Object.keys(req.headers).some((h) => h.startsWith('impersonate-')),
    };
    const decide = info.verb === 'watch' ? decideWatch : decideRead;
    const decision = decide(
      request,
      {
        cached: cached !== undefined,
        synced: cached?.store.synced ?? false,
        namespaced: cached?.info.namespaced ?? false,
        consistentReads: cached?.consistentReads ?? 'forward',
        selection: cached?.selection,
        watchList: cached?.reflector.watchListSupported ?? false,
      },
    );
    let reason: ForwardReason | 'anonymous' | 'denied' | 'window' = decision.source === 'upstream' ? decision.reason : 'window';
    if (decision.source === 'cache' && cached) {
      const authorization = identity === 'own' ? undefined : req.headers.authorization;
      if (identity === 'client' && authorization === undefined) {
        // Anonymous requests are the apiserver's to allow or refuse.
        reason = 'anonymous';
      } else if (
        !(await deps.access!.allowedForName(authorization, {
          verb: info.verb,
          group: info.apiGroup,
          resource: info.resource,
          namespace: info.namespace,
          name: info.name,
        }))
      ) {
        reason = 'denied';
      } else {
        if ('resourceVersion' in decision.plan) {
          const watching = await serveWatch(cached, decision.plan, res, arrivedAt, metrics.cache, id);
          if (watching !== 'forward') {
            const labels = requestLabels(info, req, 'cache');
            metrics.longRunning.inc(labels);
            // Returned, not awaited: a suspended async frame keeps every local it held (the query,
            // the decision) until the watch ends, hours later, in each of thousands of watches.
            return watching.done.then((code) => {
              metrics.longRunning.dec(labels);
              return code;
            });
          }
        } else {
          const served = await serveRead(cached, decision.plan, res, arrivedAt, metrics.cache, id);
          if (served !== 'forward') return served.code;
        }
      }
    }
    if (decision.source === 'cache' || decision.reason !== 'not-a-read') metrics.forwards.inc({ reason });
    return undefined;
  };

  const requestLabels = (info: RequestInfo, req: DownstreamRequest, source: Source) =>
    metrics.labels(
      metricVerb(info.verb, req.method ?? 'GET', req.headers['content-type'], false),
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
    tunnelUpgrade(req, socket, head, deps.pools, requestIdentity(req, deps.auth)).then(
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

function requestId(req: DownstreamRequest): string {
  const audit = req.headers['audit-id'];
  return typeof audit === 'string' && audit !== '' ? audit : randomUUID();
}
