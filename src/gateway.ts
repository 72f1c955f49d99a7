// Wires one Levee: upstream pools, the request chain, the listener. The CLI and the tests start
// Levee through here.
import { Health } from './serve/health.ts';
import { createHandlers } from './serve/chain.ts';
import type { Rule } from './flow/rules.ts';
import { DEFAULT_QUEUE_LENGTH, DEFAULT_QUEUE_WAIT_MS, DEFAULT_SEATS, FlowController, limitsFrom, type FlowControlLimits } from './flow/flowcontrol.ts';
import { isLoopback, listen, parseListenAddress, type Listener, type ShutdownResult } from './http/listener.ts';
import { GatewayMetrics } from './metrics/metrics.ts';
import type { Logger } from './log/logger.ts';
import { UpstreamPools } from './upstream/pools.ts';
import type { Upstream } from './upstream/credentials.ts';
import type { AuthMode } from './auth/authenticate.ts';
import { AccessGuard } from './auth/guard.ts';
import { WatchReauthorizer } from './auth/watchrecheck.ts';
import { LocalRbac, RBAC_RESOURCES } from './auth/rbac.ts';
import { ServiceAccountTokenVerifier } from './auth/satoken.ts';
import { getJson } from './upstream/client.ts';
import { Cache, type ConsistentReadPolicy, type ResourceOptions } from './cache/cache.ts';
import { DiscoveryCache } from './discovery/discovery.ts';
import { ReadCoalescer } from './upstream/coalesce.ts';
import type { MessagePort } from 'node:worker_threads';
import { CacheFeed } from './cache/feed.ts';
import { ReplicaCache } from './cache/replica.ts';
import type { CacheView } from './cache/view.ts';

export interface GatewayConfig {
  upstream: Upstream;
  listen: string;
  tls?: { certFile: string; keyFile: string; clientCAFile?: string | undefined } | undefined;
  auth: AuthMode;
  security?: Partial<SecurityTuning> | undefined;
  logger: Logger;
  /** Resources to cache (kubectl-style names); empty caches nothing. */
  cache: string[];
  consistentReads?: ConsistentReadPolicy | undefined;
  rules?: Rule[] | undefined;
  /** Evaluate RBAC from a cache of Roles and bindings before asking the apiserver. */
  localRbac?: boolean | undefined;
  /** Verify service-account tokens locally (keys from OIDC discovery, objects from a cache of service accounts and pods). */
  localServiceAccountTokens?: boolean | undefined;
  /** Flow-control limits; the defaults when absent. */
  flow?: FlowControlLimits | undefined;
  resourceOptions?: Record<string, ResourceOptions> | undefined;
  /** How long discovery and OpenAPI answers are served before revalidation; 0 forwards them. */
  discoveryTtlMs?: number | undefined;
  /** The largest upstream answer shared by identical concurrent reads; 0 coalesces nothing. */
  coalesceMaxBytes?: number | undefined;
  /** Consistent reads answering at least this many bytes wait for the proof of freshness (serve/decide.ts). */
  consistentReadProofBytes?: number | undefined;
  /** This gateway runs in a worker thread: its cache is a replica fed over this port. */
  replicaOf?: MessagePort | undefined;
  /**
   * Threads of this process that serve (workers.ts), this one included. With more than one, the
   * listener shares its port with theirs and metrics are scraped as one; the main thread's cache
   * keeps objects' bytes in shared memory and feeds the workers' replicas.
   */
  threads?: number | undefined;
}

export const DEFAULT_DISCOVERY_TTL_MS = 5_000;
export const DEFAULT_COALESCE_MAX_BYTES = 4 * 1024 * 1024;

/** How long review answers are reused, and how often running watches are authorized again. */
export interface SecurityTuning {
  anonymous: boolean;
  tokenCacheTtlMs: number;
  tokenNegativeCacheTtlMs: number;
  authorizationAllowedTtlMs: number;
  authorizationDeniedTtlMs: number;
  watchReauthorizeMs: number;
}

// Bound service-account tokens name their service account; pods are cached by default (--cache).
const SERVICE_ACCOUNTS = 'serviceaccounts';

export const DEFAULT_SECURITY: SecurityTuning = {
  anonymous: false,
  tokenCacheTtlMs: 30_000,
  tokenNegativeCacheTtlMs: 5_000,
  // The apiserver's webhook authorizer keeps allowed for 5 minutes and denied for 30 s; Levee
  // stays shorter so a revoked role stops cached reads within seconds.
  authorizationAllowedTtlMs: 10_000,
  authorizationDeniedTtlMs: 2_000,
  watchReauthorizeMs: 60_000,
};

export interface Gateway {
  url: URL;
  metrics: GatewayMetrics;
  /** Feeds worker threads' replicas of the cache, on the main thread when there are workers. */
  feed: CacheFeed | undefined;
  /**
   * Shuts down gracefully: /readyz fails at once; after `delayMs` (still serving, so load balancers
   * see the failing readiness first) the listener stops accepting (GOAWAY, `Connection: close`),
   * every watch ends cleanly between two events so its client re-watches on another replica, and
   * requests in flight have `graceMs` to finish before what is left is closed.
   */
  shutdown(opts: ShutdownOptions): Promise<ShutdownResult>;
  /** Closes at once. */
  close(): Promise<void>;
  /** New flow-control limits and rules, for new requests, without a restart. */
  reconfigure(changes: { flow: FlowControlLimits; rules: Rule[] }): void;
}

export interface ShutdownOptions {
  graceMs: number;
  delayMs?: number | undefined;
}

export async function startGateway(config: GatewayConfig): Promise<Gateway> {
  const { host, port } = parseListenAddress(config.listen);
  if (config.auth !== 'delegate' && !isLoopback(host)) {
    throw new Error(`--auth ${config.auth} needs a loopback listener, not ${host}`);
  }
  const security = { ...DEFAULT_SECURITY, ...config.security };
  const pools = new UpstreamPools(config.upstream);
  const threaded = (config.threads ?? 1) > 1;
  const feedsWorkers = threaded && !config.replicaOf;
  const metrics = new GatewayMetrics({ threads: config.threads, worker: config.replicaOf !== undefined });
  const health = new Health();
  const specs = [
    ...new Set([...config.cache, ...(config.localRbac ? RBAC_RESOURCES : []), ...(config.localServiceAccountTokens ? [SERVICE_ACCOUNTS] : [])]),
  ];
  let cache: CacheView | undefined;
  let feed: CacheFeed | undefined;
  if (specs.length > 0 && config.replicaOf) {
    cache = new ReplicaCache(config.replicaOf, pools, config.logger, metrics.cache, config.consistentReads, config.resourceOptions);
  } else if (specs.length > 0) {
    const owned = new Cache(pools, specs, config.logger, metrics.cache, config.consistentReads, config.resourceOptions, { sharedBytes: feedsWorkers });
    if (feedsWorkers) feed = new CacheFeed(owned);
    cache = owned;
  }
  const localRbac =
    config.localRbac && cache
      ? new LocalRbac((spec) => {
          const dot = spec.indexOf('.');
          return cache.lookup(spec.slice(dot + 1), spec.slice(0, dot))?.store;
        })
      : undefined;
  const serviceAccountTokens =
    config.localServiceAccountTokens && cache
      ? new ServiceAccountTokenVerifier({
          fetch: (path, accept) => getJson(pools, path, undefined, accept),
          objects: (resource) => cache.lookup('', resource)?.store,
          onError: (err) => config.logger.warn({ err: err.message }, 'service-account token keys could not be fetched; tokens go to TokenReview'),
        })
      : undefined;
  serviceAccountTokens?.start();
  let shuttingDown = false;
  // Aborted when shutdown begins: forwarded watches end at their next event boundary.
  const ending = new AbortController();
  if (cache) {
    // A configured resource that does not exist does not hold readiness; ?verbose names it.
    health.addReadyCheck('cache-synced', () => {
      const waiting = cache.waiting();
      return { ok: cache.synced, note: waiting.length > 0 ? `waiting for the resource to exist: ${waiting.join(', ')}` : undefined };
    });
    cache.start();
  }
  // As the apiserver's readyz during graceful termination: failing from the first moment.
  health.addReadyCheck('shutdown', () => !shuttingDown);
  const guard = new AccessGuard(pools, {
    mode: config.auth,
    anonymous: security.anonymous,
    acceptedTtlMs: security.tokenCacheTtlMs,
    rejectedTtlMs: security.tokenNegativeCacheTtlMs,
    allowedTtlMs: security.authorizationAllowedTtlMs,
    deniedTtlMs: security.authorizationDeniedTtlMs,
    localRbac,
    serviceAccountTokens,
  });
  metrics.observeReviews(guard);
  const watchReauthorizer = new WatchReauthorizer(guard, security.watchReauthorizeMs);
  const flow = new FlowController(
    config.flow ?? limitsFrom({ requests: DEFAULT_SEATS.requests, upstream: DEFAULT_SEATS.upstream, queueWaitMs: DEFAULT_QUEUE_WAIT_MS, queueLength: DEFAULT_QUEUE_LENGTH }),
  );
  flow.observer = metrics.observeFlow(flow);
  let rules: readonly Rule[] = config.rules ?? [];
  const reconfigure = (changes: { flow: FlowControlLimits; rules: Rule[] }): void => {
    flow.reconfigure(changes.flow);
    rules = changes.rules;
  };
  const discoveryTtlMs = config.discoveryTtlMs ?? DEFAULT_DISCOVERY_TTL_MS;
  const discovery = discoveryTtlMs > 0 ? new DiscoveryCache(pools, guard, { ttlMs: discoveryTtlMs }) : undefined;
  const coalesceMaxBytes = config.coalesceMaxBytes ?? DEFAULT_COALESCE_MAX_BYTES;
  const coalescer = coalesceMaxBytes > 0 ? new ReadCoalescer(coalesceMaxBytes) : undefined;
  const discoveryObserver = metrics.observeUpstreamProtection(coalescer);
  if (discovery) discovery.observer = discoveryObserver;
  const handlers = createHandlers({
    pools,
    metrics,
    health,
    logger: config.logger,
    guard,
    cache,
    watchReauthorizer,
    flow,
    rules: () => rules,
    ending: ending.signal,
    discovery,
    coalescer,
    consistentReadProofBytes: config.consistentReadProofBytes,
  });
  let listener: Listener;
  try {
    listener = await listen({ host, port, tls: config.tls, logger: config.logger, reusePort: threaded }, handlers);
  } catch (err) {
    feed?.close();
    serviceAccountTokens?.stop();
    await cache?.stop();
    await pools.close();
    throw err;
  }
  // With worker threads, Levee is listening once they are too (cli.ts says so then).
  if (config.replicaOf) config.logger.info({ url: listener.url.href }, 'worker thread listening');
  else if (!threaded) announceListening(config, listener.url);
  return {
    url: listener.url,
    metrics,
    feed,
    reconfigure,
    shutdown: async ({ graceMs, delayMs = 0 }) => {
      shuttingDown = true;
      if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
      // Refuse first, then end the watches: a client re-watching must not land on this replica.
      const drained = listener.shutdown(graceMs);
      ending.abort();
      cache?.endWatches();
      const result = await drained;
      // The feed is closed by whoever started the workers, once they have drained too.
      metrics.close();
      serviceAccountTokens?.stop();
      await cache?.stop();
      await pools.close();
      return result;
    },
    close: async () => {
      shuttingDown = true;
      await listener.close();
      feed?.close();
      metrics.close();
      serviceAccountTokens?.stop();
      await cache?.stop();
      await pools.close();
    },
  };
}

/** The line that says Levee serves, and where: once every thread listens. */
export function announceListening(config: GatewayConfig, url: URL, threads = 1): void {
  config.logger.info({ url: url.href, upstream: config.upstream.server.href, auth: config.auth, threads }, 'levee listening');
}
