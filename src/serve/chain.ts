// A request's life in Levee, as a list of stages in the order they run:
//
//   request info → Levee's own endpoints → request deadline → authentication → rules → flow control
//     → decide → authorize → answer from the cache
//                          ↘ or forward to the apiserver (under the upstream bound)
//
// Each stage is a function with typed inputs and outputs (serve/admission.ts, serve/endpoints.ts,
// serve/answer.ts, serve/decide.ts); a stage that ends the request answers it with a Status. Upgrades
// (exec, attach, port-forward) pass the same stages up to flow control, then the upstream bound,
// and hold their seats while the tunnel is open.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { negotiateErrorMediaType } from '../api/negotiation.ts';
import { requestedTimeout, untilDeadline } from '../api/deadline.ts';
import { goQuery, rawQueryOf } from '../api/query.ts';
import { newInternalError, newRequestTimeout, tooManyRequests, type StatusEncoding } from '../api/status.ts';
import type { Status } from '../api/types.ts';
import { isLongRunning, type RequestInfo } from '../api/requestinfo.ts';
import type { AccessGuard } from '../auth/guard.ts';
import type { WatchReauthorizer } from '../auth/watchrecheck.ts';
import type { CacheView } from '../cache/view.ts';
import type { DiscoveryCache } from '../discovery/discovery.ts';
import type { Cancellation, FlowController } from '../flow/flowcontrol.ts';
import type { Rule } from '../flow/rules.ts';
import { WarmupBackoff } from '../flow/warmup.ts';
import { noteServed } from '../http/activity.ts';
import type { DownstreamRequest, DownstreamResponse } from '../http/downstream.ts';
import type { Handlers } from '../http/listener.ts';
import { writeStatus, writeText } from '../http/respond.ts';
import { TimeoutResponse } from '../http/timeoutwriter.ts';
import type { Logger } from '../log/logger.ts';
import { metricVerb, type GatewayMetrics, type RequestLabels, type Source } from '../metrics/metrics.ts';
import { coalescingKey, type Flight, type ReadCoalescer } from '../upstream/coalesce.ts';
import { forward, UpstreamUnavailableError } from '../upstream/forward.ts';
import type { UpstreamPools } from '../upstream/pools.ts';
import { tunnelUpgrade, writeStatusAndClose } from '../upstream/tunnel.ts';
import { admit, admitUpstream, authenticate, release, requestDeadline, requestInfo, type Admitted } from './admission.ts';
import { answerFromCache, decideRequest, type CachedWatch } from './answer.ts';
import { isDebugRequest, serveDebug } from './debug.ts';
import type { ForwardReason } from './decide.ts';
import { serveOwnEndpoint } from './endpoints.ts';
import type { Health } from './health.ts';

export interface ChainDeps {
  pools: UpstreamPools;
  metrics: GatewayMetrics;
  health: Health;
  logger: Logger;
  guard: AccessGuard;
  cache?: CacheView | undefined;
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
  /** Consistent reads answering at least this many bytes wait for the proof (default serve/decide.ts). */
  consistentReadProofBytes?: number | undefined;
}

// The apiserver's --request-timeout default: a request without `?timeout=` ends by then.
const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;
// The apiserver ends a watch without timeoutSeconds within twice its --min-request-timeout (30 min).
const MAX_WATCH_SECONDS = 3600;
// Reasons that say the request was no read of a cached resource at all: not counted as forwards.
const NOT_A_CACHED_READ: ReadonlySet<ForwardReason> = new Set(['not-a-read', 'not-cached']);
// Reasons a read without resourceVersion of a cached resource goes to the apiserver.
const CONSISTENT_FORWARDS: ReadonlySet<ForwardReason> = new Set(['consistent-read', 'consistency-cost', 'consistency-probe-failed', 'consistency-unproven']);

/**
 * What finishing a request needs, taken out of it: the closure that finishes a watch lives as long
 * as the watch, and one that named the request would keep its headers as long.
 */
class Record {
  readonly started = process.hrtime.bigint();
  readonly id: string;
  readonly method: string;
  readonly contentType: string | undefined;
  readonly url: string;
  readonly path: string;
  readonly query: string;
  info: RequestInfo | undefined;
  /**
   * What finishing needs of the admission: its seats, whether it is long-running, its
   * credential (for the log's user). Not the admission itself, which holds a closure over the
   * guard and the request's info for as long as a watch lives.
   */
  admitted: Pick<Admitted, 'seats' | 'longRunning' | 'credential'> | undefined;
  source: Source = 'local';
  code = 0;

  constructor(req: DownstreamRequest) {
    this.id = requestId(req.headers['audit-id']);
    this.method = req.method ?? 'GET';
    this.contentType = req.headers['content-type'];
    this.url = req.url ?? '/';
    const q = this.url.indexOf('?');
    this.path = q === -1 ? this.url : this.url.slice(0, q);
    this.query = q === -1 ? '' : this.url.slice(q + 1);
  }
}

const NO_SEATS: Admitted['seats'] = [];

/**
 * A copy of `s` that holds nothing else. A slice keeps the whole string it was cut from alive: a
 * watch's path would keep its URL for as long as the watch lasts.
 */
function detached(s: string): string {
  const encoding = /[\u0100-\uffff]/.test(s) ? 'utf16le' : 'latin1';
  return Buffer.from(s, encoding).toString(encoding);
}

/** What the end of a request records: its metrics, its log line, its seats given back. */
interface Ending {
  readonly id: string;
  readonly started: bigint;
  /** The seats it holds until then. */
  readonly seats: Admitted['seats'];
  readonly longRunning: boolean;
  /** Its labels among the requests of the Kubernetes API; none for a request that is not one. */
  readonly labels: RequestLabels | undefined;
  readonly user: string | undefined;
  readonly verb: string;
  readonly path: string;
  readonly resource: string | undefined;
  readonly namespace: string | undefined;
  readonly source: Source;
}

export function createHandlers(deps: ChainDeps): Handlers {
  const { metrics, logger } = deps;
  const warmup = new WarmupBackoff();

  const request = async (req: DownstreamRequest, res: DownstreamResponse): Promise<void> => {
    const r = new Record(req);
    let flight: Flight | undefined;
    let watching: CachedWatch | undefined;
    let cancelled: ReturnType<typeof abortOnClose> | undefined;
    // Refused before anything is answered: written as the apiserver writes its errors for this client.
    const refuse = (status: Status): void => writeStatus(res, status, errorEncoding(req));
    try {
      // Request info.
      const info = requestInfo(r.method, r.url);
      if ('status' in info) return writeText(res, info.status.code, info.text);
      // Levee's own endpoints: logged, but not counted among the requests of the Kubernetes API.
      if (serveOwnEndpoint(deps.health, metrics, r.method, r.path, r.query, res)) return;
      noteServed();
      r.info = info;
      // The request deadline, read before authentication as the apiserver reads it.
      const deadline = requestDeadline(info, r.query);
      if (deadline) return refuse(deadline);
      // How errors are written to this client, read once and only when one is.
      let encoding: StatusEncoding | undefined | null = null;
      const errors = (): StatusEncoding | undefined => (encoding === null ? (encoding = errorEncoding(req)) : encoding);
      // Answered by that deadline whatever it waits on, as the apiserver's timeout filter does.
      const timeout = isLongRunning(info) ? undefined : new TimeoutResponse(res, remainingMs(r.query, r.started), (raw) => writeStatus(raw, newRequestTimeout(), errors()));
      if (timeout) res = timeout;
      /** Every wait from here on: the deadline is watched from the first. */
      const waiting = <T>(p: Promise<T>): Promise<T> => {
        timeout?.waiting();
        return p;
      };
      // Authentication.
      const credential = authenticate(deps, req, r.id);
      if ('code' in credential) return refuse(credential);
      if (isDebugRequest(req.method, r.path)) {
        r.code = await waiting(serveDebug(r.path, res, credential, deps.guard, deps.cache));
        return;
      }
      // Rules, then flow control.
      cancelled = deps.flow ? abortOnClose(res) : undefined;
      // Each stage answers at once when nothing waits, and only a promise is awaited: a cached
      // answer is then written in the turn its request arrived (src/maybe.ts).
      const admitting = admit(deps, req, info, credential, cancelled);
      const admitted = admitting instanceof Promise ? await waiting(admitting) : admitting;
      if ('code' in admitted) return refuse(admitted);
      r.admitted = { seats: admitted.seats, longRunning: admitted.longRunning, credential: admitted.credential };
      if (deps.discovery && !info.isResourceRequest) {
        const served = await waiting(deps.discovery.serve(req, res, credential, r.id));
        if (served !== 'forward') {
          r.source = 'cache';
          r.code = served;
          return;
        }
      }
      // Decide, authorize, answer from the cache.
      const deciding = decideRequest(deps, req, admitted);
      const decided = deciding instanceof Promise ? await waiting(deciding) : deciding;
      const answering = 'forward' in decided ? decided : answerFromCache(deps, admitted, decided, res, r.started, r.id, errors);
      const outcome = answering instanceof Promise ? await waiting(answering) : answering;
      if ('answered' in outcome) {
        r.source = 'cache';
        r.code = outcome.answered;
        return;
      }
      if ('watching' in outcome) {
        r.source = 'cache';
        watching = outcome.watching;
        metrics.longRunning.inc(labelsOf(r, 'cache'));
        return;
      }
      if (!NOT_A_CACHED_READ.has(outcome.forward)) metrics.forwards.inc({ reason: outcome.forward });
      // A read without resourceVersion the apiserver answers: counted, with what it sent (a failed
      // proof counted itself, with its wait).
      const consistent = CONSISTENT_FORWARDS.has(outcome.forward) ? info.resource && deps.cache?.lookup(info.apiGroup, info.resource)?.name : undefined;
      if (consistent && (outcome.forward === 'consistent-read' || outcome.forward === 'consistency-cost')) metrics.cache.consistentRead(consistent, 'forwarded');
      // Or forward.
      const auth = await waiting(deps.guard.upstreamAuth(credential, req.rawHeaders));
      if ('code' in auth) return refuse(auth);
      // The same read already on its way upstream: its answer serves this one too, with no seat
      // of the upstream bound taken.
      const key = admitted.longRunning || !deps.coalescer ? undefined : coalescingKey(req.method, r.url, req.rawHeaders, auth);
      if (key && deps.coalescer) {
        const joined = deps.coalescer.join(key);
        if (joined.role === 'leader') flight = joined.flight;
        else {
          const shared = await waiting(deps.coalescer.follow(joined.answer, res, r.id));
          if (shared !== undefined) {
            r.source = 'upstream';
            r.code = shared;
            return;
          }
        }
      }
      // The apiserver is protected by a bound of its own: what the cache cannot answer waits here,
      // not there. Reads of a resource still warming up are told to come back later, a little
      // later the more were turned away (KEP-4568), rather than pile up behind the bound.
      const full = await waiting(admitUpstream(deps, admitted, cancelled));
      if (full) return refuse(outcome.forward === 'not-synced' ? tooManyRequests(warmup.retryAfter(`${info.apiGroup}/${info.resource}`)) : full);
      r.source = 'upstream';
      const labels = labelsOf(r, 'upstream');
      if (admitted.longRunning) metrics.longRunning.inc(labels);
      try {
        r.code = await waiting(
          forward(req, res, deps.pools, {
            auth,
            traffic: admitted.longRunning ? 'longRunning' : 'request',
            ending: info.verb === 'watch' ? watchEnding(r.query, r.started) : undefined,
            share: flight,
            sent: consistent ? (bytes) => metrics.cache.consistentBytes(consistent, 'upstream', bytes) : undefined,
          }),
        );
      } finally {
        if (admitted.longRunning) metrics.longRunning.dec(labels);
      }
    } catch (err) {
      if (err instanceof UpstreamUnavailableError) {
        logger.warn({ err: err.cause instanceof Error ? err.cause.message : String(err.cause), path: r.path }, 'upstream unavailable');
        writeStatus(res, err.status);
      } else {
        logger.error({ err }, 'request failed');
        writeStatus(res, newInternalError('the request could not be handled'));
      }
    } finally {
      // Whatever happened, requests waiting on this one must not wait forever.
      flight?.settle(undefined);
      cancelled?.dispose();
      if (watching) whenWatchEnds(r, res, watching);
      else finish(r, r.code || res.statusCode);
    }
  };

  /**
   * Finishes a cache watch when it ends, hours later. Not a closure inside `request`: that one would
   * share the request's context, which holds the request itself (`refuse` names it), and keep its
   * headers alive for as long as the watch, in each of thousands of watches. This one holds what
   * its end will need, taken now (the user too, whose review may have left the cache by then), and
   * the response: not the record, whose request info, URL and credential each idle watch would
   * keep (about 500 bytes).
   */
  const whenWatchEnds = (r: Record, res: DownstreamResponse, watching: CachedWatch): void => {
    const { watch, recheck } = watching;
    const ending = { ...endOf(r), path: detached(r.path) };
    watch.whenEnded((code) => {
      if (recheck) deps.watchReauthorizer?.remove(recheck);
      if (ending.labels) metrics.longRunning.dec(ending.labels);
      record(ending, code || res.statusCode);
    });
  };

  /**
   * How long a request that is not long-running may still take: its own deadline (`?timeout=`,
   * else the apiserver's default of 60 s) from when it arrived, and a second more, so that when the
   * request is forwarded the apiserver's own 504, written at that deadline, arrives first.
   */
  const remainingMs = (query: string, started: bigint): number => {
    const asked = requestedTimeout(query);
    const timeoutMs = typeof asked === 'number' ? asked : DEFAULT_REQUEST_TIMEOUT_MS;
    return untilDeadline(timeoutMs, started);
  };

  /**
   * When a forwarded watch ends at the latest: at shutdown, or once its own deadline has passed
   * (`timeoutSeconds`, else the apiserver's longest, 60 min) with a little time for the
   * apiserver's own end to arrive. The apiserver ends it then; if that end cannot arrive (the
   * connection went silent without closing) Levee ends it, between two events, as the apiserver
   * would have, rather than hold the client on a watch that will never deliver again. Counted
   * from the watch's arrival, as the client counts it: what it waited for before it was forwarded
   * (its cache a resourceVersion behind, a seat of the upstream bound) is not given to it again.
   */
  const watchEnding = (query: string, started: bigint): AbortSignal => {
    const asked = Number(new URLSearchParams(query).get('timeoutSeconds'));
    const seconds = Number.isSafeInteger(asked) && asked > 0 ? asked : MAX_WATCH_SECONDS;
    const deadline = AbortSignal.timeout(untilDeadline(seconds * 1000, started));
    return deps.ending ? AbortSignal.any([deps.ending, deadline]) : deadline;
  };

  /** The request's metrics and its log line; its seats given back. */
  const finish = (r: Record, code: number): void => record(endOf(r), code);

  /** What a request's end records, from its record as it stands. */
  const endOf = (r: Record): Ending => {
    const info = r.info;
    const credential = r.admitted?.credential;
    return {
      id: r.id,
      started: r.started,
      seats: r.admitted?.seats ?? NO_SEATS,
      longRunning: r.admitted?.longRunning === true,
      labels: info ? labelsOf(r, r.source) : undefined,
      user: credential ? deps.guard.knownUser(credential)?.username : undefined,
      verb: info?.verb ?? r.method,
      path: r.path,
      resource: info?.resource || undefined,
      namespace: info?.namespace || undefined,
      source: r.source,
    };
  };

  const record = (e: Ending, code: number): void => {
    release(e);
    const seconds = Number(process.hrtime.bigint() - e.started) / 1e9;
    if (e.labels) {
      const labels = { ...e.labels, code: String(code) };
      metrics.requests.inc(labels);
      if (!e.longRunning) metrics.duration.observe(labels, seconds);
    }
    logger.info(
      {
        requestId: e.id,
        user: e.user,
        verb: e.verb,
        path: e.path,
        resource: e.resource,
        namespace: e.namespace,
        code,
        source: e.source,
        latencyMs: Math.round(seconds * 1e6) / 1e3,
      },
      'request',
    );
  };

  const labelsOf = (r: Record, source: Source) => {
    const info = r.info;
    return metrics.labels(metricVerb(info?.verb ?? '', r.method, r.contentType, false), info?.apiGroup ?? '', info?.resource ?? '', info?.subresource ?? '', source);
  };

  // ---- upgrades: exec, attach, port-forward

  const upgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    const started = process.hrtime.bigint();
    const id = requestId(req.headers['audit-id']);
    let info: RequestInfo | undefined;
    let admitted: Admitted | undefined;
    let open = false;
    // A client that hangs up while waiting for a seat leaves its queue; the seats are given back
    // when the tunnel (or the refusal) closes.
    const gone = new AbortController();
    socket.once('close', () => {
      gone.abort();
      release(admitted);
      if (open) metrics.longRunning.dec(tunnelLabels(info));
    });
    const tunnel = async (): Promise<number> => {
      const refuse = (status: Status): number => {
        writeStatusAndClose(socket, status);
        return status.code;
      };
      const parsed = requestInfo(req.method ?? 'GET', req.url ?? '/');
      if ('status' in parsed) return refuse(parsed.status);
      info = parsed;
      const credential = authenticate(deps, req, id);
      if ('code' in credential) return refuse(credential);
      const passed = await admit(deps, req, info, credential, gone);
      if ('code' in passed) return refuse(passed);
      admitted = passed;
      if (socket.destroyed) {
        release(admitted);
        return 499;
      }
      const full = await admitUpstream(deps, admitted, gone);
      if (full) return refuse(full);
      const auth = await deps.guard.upstreamAuth(credential, req.rawHeaders);
      if ('code' in auth) return refuse(auth);
      if (socket.destroyed) {
        release(admitted);
        return 499;
      }
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

/**
 * Aborts when the client goes away, so a request waiting for a seat leaves its queue. Disposed
 * once nothing waits any more: every response closes in the end, and aborting then would only
 * build a DOMException (with its stack) for nobody. The AbortController is made only when a wait
 * asks for its signal; most requests take a free seat at once and never do.
 */
function abortOnClose(res: DownstreamResponse): Cancellation & { dispose: () => void } {
  let ac: AbortController | undefined;
  const onClose = (): void => ac?.abort();
  res.on('close', onClose);
  return {
    get signal(): AbortSignal {
      if (!ac) {
        ac = new AbortController();
        // A response that closed already is destroyed (Node marks it before its 'close').
        if (res.destroyed) ac.abort();
      }
      return ac.signal;
    },
    dispose: () => void res.off('close', onClose),
  };
}

/** How the apiserver would write an error to this client; compact JSON where that cannot be told. */
function errorEncoding(req: DownstreamRequest): StatusEncoding | undefined {
  const userAgent = req.headers['user-agent'];
  return negotiateErrorMediaType(req.headers.accept, goQuery(rawQueryOf(req.url ?? '/')), typeof userAgent === 'string' ? userAgent : undefined);
}

/** The client's Audit-Id when it sent one (the apiserver keeps it too), else a new one. */
function requestId(audit: string | string[] | undefined): string {
  return typeof audit === 'string' && audit !== '' ? audit : randomUUID();
}
