// The gateway's configuration from parsed options: the same for the main thread and for each
// worker thread, which parses the same arguments itself (workers.ts).
import type { Logger } from '../log/logger.ts';
import type { Upstream } from '../upstream/credentials.ts';
import type { GatewayConfig } from '../gateway.ts';
import { limitsFrom, shareOf } from '../flow/flowcontrol.ts';
import type { Options } from './options.ts';

export function gatewayConfig(options: Options, upstream: Upstream, logger: Logger): GatewayConfig {
  return {
    upstream,
    listen: options.listen,
    tls:
      options.tlsCertFile && options.tlsKeyFile
        ? { certFile: options.tlsCertFile, keyFile: options.tlsKeyFile, clientCAFile: options.clientCAFile }
        : undefined,
    auth: options.auth,
    security: {
      anonymous: options.anonymous,
      tokenCacheTtlMs: options.tokenCacheTtlMs,
      tokenNegativeCacheTtlMs: options.tokenNegativeCacheTtlMs,
      authorizationAllowedTtlMs: options.authorizationAllowedTtlMs,
      authorizationDeniedTtlMs: options.authorizationDeniedTtlMs,
      watchReauthorizeMs: options.watchReauthorizeMs,
    },
    logger,
    cache: options.cache,
    consistentReads: options.consistentReads,
    rules: options.rules,
    flow: threadLimits(options),
    localRbac: options.localRbac,
    localServiceAccountTokens: options.localServiceAccountTokens,
    resourceOptions: options.resourceOptions,
    discoveryTtlMs: options.discoveryTtlMs,
    coalesceMaxBytes: options.coalesceMaxBytes,
    consistentReadProofBytes: options.consistentReadProofBytes,
    threads: options.workers,
  };
}

/** One thread's flow-control limits: the configured ones are the process's, shared by its threads. */
export function threadLimits(options: Options): ReturnType<typeof limitsFrom> {
  return shareOf(limitsFrom(options.flow), options.workers);
}
