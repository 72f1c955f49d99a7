#!/usr/bin/env -S node --max-semi-space-size=1 --heap-growing-percent=100 --external-memory-accounted-in-global-limit --no-memory-reducer-favors-memory
// levee: parse options, find the upstream, start the gateway, drain and stop on SIGTERM/SIGINT.
import { unwatchFile, watchFile, type Stats } from 'node:fs';
import { createLogger, type Logger } from './log/logger.ts';
import { ConfigError } from './config/file.ts';
import { printConfig } from './config/print.ts';
import { parseOptions, USAGE, UsageError } from './config/options.ts';
import { loadUpstream, resolveUpstreamSource } from './upstream/credentials.ts';
import { announceListening, startGateway, type Gateway } from './gateway.ts';
import { gatewayConfig, threadLimits } from './config/gatewayconfig.ts';
import { startWorkers, type WorkerThreads } from './workers.ts';
import { startHeapTrim } from './heaptrim.ts';

async function main(): Promise<number> {
  const argv = process.argv.slice(2);
  let options;
  try {
    options = parseOptions(argv, process.env);
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`levee: ${err.message}\n\n${USAGE}`);
      return 2;
    }
    if (err instanceof ConfigError) {
      process.stderr.write(`levee: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  if (options === 'help') {
    process.stdout.write(USAGE);
    return 0;
  }
  if (options.printConfig) {
    process.stdout.write(printConfig(options));
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
  const config = gatewayConfig(options, upstream, logger);
  const gateway = await startGateway(config);
  let workers: WorkerThreads | undefined;
  if (options.workers > 1) {
    try {
      workers = await startWorkers({ count: options.workers - 1, options, port: Number(gateway.url.port), feed: gateway.feed, upstream, logger });
    } catch (err) {
      await gateway.close();
      throw err;
    }
  }
  if (workers) announceListening(config, gateway.url, options.workers);
  const stopWatching = options.configFile ? watchConfig(options.configFile, argv, gateway, workers, logger) : () => undefined;
  const stopTrim = startHeapTrim(logger);
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
  stopWatching();
  stopTrim();
  const started = process.hrtime.bigint();
  logger.info({ signal, graceSeconds: options.shutdownGraceMs / 1000, delaySeconds: options.shutdownDelayMs / 1000 }, 'shutting down: not ready, draining');
  const [own, theirs] = await Promise.all([
    gateway.shutdown({ graceMs: options.shutdownGraceMs, delayMs: options.shutdownDelayMs }),
    workers?.shutdown(options.shutdownGraceMs, options.shutdownDelayMs),
  ]);
  gateway.feed?.close();
  const result = { drained: own.drained && (theirs?.drained ?? true), closed: own.closed + (theirs?.closed ?? 0) };
  const seconds = Math.round(Number(process.hrtime.bigint() - started) / 1e6) / 1e3;
  if (result.drained) logger.info({ seconds }, 'shut down: every request finished');
  else logger.warn({ seconds, closedConnections: result.closed }, 'shut down: grace period over, closed what was left');
  logger.flush();
  return 0;
}

/**
 * Flow-control limits and rules follow the file without a restart; everything else is read at
 * start. A file that does not validate keeps the running configuration and says why.
 */
function watchConfig(path: string, argv: string[], gateway: Gateway, workers: WorkerThreads | undefined, logger: Logger): () => void {
  const changed = (cur: Stats, prev: Stats): void => {
    if (cur.mtimeMs === prev.mtimeMs && cur.size === prev.size && cur.ino === prev.ino) return;
    try {
      const o = parseOptions(argv, process.env);
      if (o === 'help') return;
      gateway.reconfigure({ flow: threadLimits(o), rules: o.rules });
      workers?.reconfigure(o);
      logger.info({ file: path, rules: o.rules.length }, 'configuration reloaded: flow control limits and rules applied; other settings apply at restart');
    } catch (err) {
      logger.warn({ file: path, err: (err as Error).message }, 'configuration changed but is not valid; keeping the running one');
    }
  };
  watchFile(path, { interval: 2_000, persistent: false }, changed);
  return () => unwatchFile(path, changed);
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
