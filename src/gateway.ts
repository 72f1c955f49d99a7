// Wires one Levee: upstream pools, the request chain, the listener. The CLI and the tests start
// Levee through here.
import { Health } from './serve/health.ts';
import { createHandlers, type AuthMode } from './serve/chain.ts';
import { isLoopback, listen, parseListenAddress, type Listener } from './serve/listener.ts';
import { GatewayMetrics } from './metrics/metrics.ts';
import type { Logger } from './log/logger.ts';
import { UpstreamPools } from './upstream/pools.ts';
import type { Upstream } from './upstream/credentials.ts';
import { AccessReviewer } from './auth/access.ts';
import { Cache, type ConsistentReadPolicy, type ResourceOptions } from './cache/cache.ts';

export interface GatewayConfig {
  upstream: Upstream;
  listen: string;
  tls?: { certFile: string; keyFile: string } | undefined;
  auth: AuthMode;
  logger: Logger;
  /** Resources to cache (kubectl-style names); empty caches nothing. */
  cache: string[];
  consistentReads?: ConsistentReadPolicy | undefined;
  resourceOptions?: Record<string, ResourceOptions> | undefined;
}

export interface Gateway {
  url: URL;
  metrics: GatewayMetrics;
  close(): Promise<void>;
}

export async function startGateway(config: GatewayConfig): Promise<Gateway> {
  const { host, port } = parseListenAddress(config.listen);
  if (config.auth === 'trust-loopback' && !isLoopback(host)) {
    throw new Error(`--auth trust-loopback needs a loopback listener, not ${host}`);
  }
  const pools = new UpstreamPools(config.upstream);
  const metrics = new GatewayMetrics();
  const health = new Health();
  const cache = config.cache.length > 0 ? new Cache(pools, config.cache, config.logger, metrics.cache, config.consistentReads, config.resourceOptions) : undefined;
  if (cache) {
    health.addReadyCheck('cache-synced', () => cache.synced);
    cache.start();
  }
  const access = new AccessReviewer(pools);
  const handlers = createHandlers({ pools, metrics, health, logger: config.logger, auth: config.auth, cache, access });
  let listener: Listener;
  try {
    listener = await listen({ host, port, tls: config.tls }, handlers);
  } catch (err) {
    await cache?.stop();
    await pools.close();
    throw err;
  }
  config.logger.info({ url: listener.url.href, upstream: config.upstream.server.href, auth: config.auth }, 'levee listening');
  return {
    url: listener.url,
    metrics,
    close: async () => {
      await listener.close();
      await cache?.stop();
      await pools.close();
    },
  };
}
