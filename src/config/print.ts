// --print-config: the effective options in the configuration file's own form, which reads back to
// the same options. Apart from file.ts (the file into flags) and options.ts (flags into options),
// so each of those reads the other's output without the two importing each other.
import { stringify as stringifyYaml } from 'yaml';
import { CONFIG_API_VERSION, CONFIG_KIND, type ConfigFile } from './file.ts';
import type { Options } from './options.ts';
import type { Rule } from '../flow/rules.ts';

const ms = (v: number): string => (v === 0 ? '0' : v % 60_000 === 0 ? `${v / 60_000}m` : v % 1000 === 0 ? `${v / 1000}s` : `${v}ms`);
const seatsOf = (v: number): number => (Number.isFinite(v) ? v : 0);

/** The effective configuration, in the file's own form: what `levee --print-config` shows. */
export function effectiveConfig(o: Options): ConfigFile {
  const resources = o.cache.map((name) => {
    const opts = o.resourceOptions[name] ?? {};
    const policy = o.consistentReads.byResource[name];
    const r: Exclude<NonNullable<NonNullable<ConfigFile['cache']>['resources']>[number], string> = { name };
    if (opts.fieldSelector) r.fieldSelector = opts.fieldSelector;
    if (opts.labelSelector) r.labelSelector = opts.labelSelector;
    if (opts.indexes?.length) r.indexes = opts.indexes;
    if (policy) r.consistentReads = policy;
    return Object.keys(r).length === 1 ? name : r;
  });
  const c: ConfigFile = {
    apiVersion: CONFIG_API_VERSION,
    kind: CONFIG_KIND,
    upstream: {
      ...(o.kubeconfig ? { kubeconfig: o.kubeconfig } : {}),
      ...(o.context ? { context: o.context } : {}),
      ...(o.upstreamServers.length ? { servers: o.upstreamServers } : {}),
    },
    listen: o.listen,
    workers: o.workers,
    ...(o.tlsCertFile && o.tlsKeyFile ? { tls: { certFile: o.tlsCertFile, keyFile: o.tlsKeyFile, ...(o.clientCAFile ? { clientCAFile: o.clientCAFile } : {}) } } : {}),
    authentication: {
      mode: o.auth,
      anonymous: o.anonymous,
      tokenCacheTTL: ms(o.tokenCacheTtlMs),
      tokenNegativeCacheTTL: ms(o.tokenNegativeCacheTtlMs),
      localServiceAccountTokens: o.localServiceAccountTokens,
    },
    authorization: {
      allowedTTL: ms(o.authorizationAllowedTtlMs),
      deniedTTL: ms(o.authorizationDeniedTtlMs),
      watchReauthorizeInterval: ms(o.watchReauthorizeMs),
      localRBAC: o.localRbac,
    },
    cache: { consistentReads: o.consistentReads.default, consistentReadProofBytes: o.consistentReadProofBytes, resources },
    flowControl: {
      maxRequestsInflight: seatsOf(o.flow.requests.read),
      maxMutatingRequestsInflight: seatsOf(o.flow.requests.mutating),
      maxLongRunningRequests: seatsOf(o.flow.requests['long-running']),
      upstream: {
        maxRequestsInflight: seatsOf(o.flow.upstream.read),
        maxMutatingRequestsInflight: seatsOf(o.flow.upstream.mutating),
        maxLongRunningRequests: seatsOf(o.flow.upstream['long-running']),
      },
      queueWait: ms(o.flow.queueWaitMs),
      queueLength: o.flow.queueLength,
      discoveryCacheTTL: ms(o.discoveryTtlMs),
      coalesceMaxBytes: o.coalesceMaxBytes,
    },
    rules: o.rules.map((r) => Object.fromEntries(Object.entries(r).filter(([, v]) => v !== undefined)) as Rule),
    shutdown: { gracePeriod: ms(o.shutdownGraceMs), delay: ms(o.shutdownDelayMs) },
    logLevel: o.logLevel,
  };
  return c;
}

export function printConfig(o: Options): string {
  return stringifyYaml(effectiveConfig(o));
}
