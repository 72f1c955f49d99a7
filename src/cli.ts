#!/usr/bin/env -S node --max-semi-space-size=1
// levee: parse options, find the upstream, start the gateway, drain and stop on SIGTERM/SIGINT.
import { createLogger } from './log/logger.ts';
import { parseOptions, USAGE, UsageError } from './config/options.ts';
import { loadUpstream, resolveUpstreamSource } from './upstream/credentials.ts';
import { startGateway } from './gateway.ts';
import { limitsFrom } from './flow/flowcontrol.ts';

async function main(): Promise<number> {
  let options;
  try {
    options = parseOptions(process.argv.slice(2));
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`levee: ${err.message}\n\n${USAGE}`);
      return 2;
    }
    throw err;
  }
  if (options === 'help') {
    process.stdout.write(USAGE);
    return 0;
  }
  const logger = createLogger(options.logLevel);
  const source = resolveUpstreamSource(options.kubeconfig, process.env, options.context);
  if (!source) {
    process.stderr.write('levee: no cluster given: pass --kubeconfig, set $KUBECONFIG, or run in a pod\n');
    return 2;
  }
  const upstream = loadUpstream(source, options.upstreamServers);
  logger.info({ upstream: upstream.servers.map((s) => s.href), from: upstream.source }, 'upstream');
  const gateway = await startGateway({
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
    clientPolicies: options.clientPolicies,
    flow: limitsFrom(options.flow),
    localRbac: options.localRbac,
    localServiceAccountTokens: options.localServiceAccountTokens,
    resourceOptions: options.resourceOptions,
  });
  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
  // A second signal while draining means: now. What is buffered is still written.
  const now = (second: NodeJS.Signals): void => {
    logger.warn({ signal: second }, 'second signal: exiting without waiting for requests in flight');
    logger.flush();
    process.exit(1);
  };
  process.once('SIGTERM', now);
  process.once('SIGINT', now);
  const started = process.hrtime.bigint();
  logger.info({ signal, graceSeconds: options.shutdownGraceMs / 1000, delaySeconds: options.shutdownDelayMs / 1000 }, 'shutting down: not ready, draining');
  const result = await gateway.shutdown({ graceMs: options.shutdownGraceMs, delayMs: options.shutdownDelayMs });
  const seconds = Math.round(Number(process.hrtime.bigint() - started) / 1e6) / 1e3;
  if (result.drained) logger.info({ seconds }, 'shut down: every request finished');
  else logger.warn({ seconds, closedConnections: result.closed }, 'shut down: grace period over, closed what was left');
  logger.flush();
  return 0;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`levee: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
