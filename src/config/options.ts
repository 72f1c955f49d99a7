// Command-line options. Every option has a working default, so `levee` alone runs against the
// cluster of the current kubeconfig on a loopback port.
import { availableParallelism } from 'node:os';
import { parseArgs } from 'node:util';
import type { LevelWithSilent } from 'pino';
import type { AuthMode } from '../auth/authenticate.ts';
import { parseDuration } from './duration.ts';
import { DEFAULT_QUEUE_LENGTH, DEFAULT_QUEUE_WAIT_MS, DEFAULT_SEATS, type PriorityClass } from '../flow/flowcontrol.ts';

export interface FlowLimitsInput {
  requests: Record<PriorityClass, number>;
  upstream: Record<PriorityClass, number>;
  queueWaitMs: number;
  queueLength: number;
}
import { DEFAULT_RESOURCES } from '../cache/resources.ts';
import { isPattern, resourceNameProblem } from '../cache/names.ts';
import type { ConsistentReadPolicy, ResourceOptions } from '../cache/cache.ts';
import { parseFieldSelector } from '../selectors/fields.ts';
import { parseLabelSelector } from '../selectors/labels.ts';
import { CONSISTENT_READS, isConsistentReads } from '../api/consistency.ts';
import { parseConsistentReadsFor, type Rule } from '../flow/rules.ts';
import { configToArgs, loadConfigFile, rulesOf } from './file.ts';

export interface Options {
  /** The configuration file, reloaded when it changes. */
  configFile?: string | undefined;
  /** Print the effective configuration and exit. */
  printConfig: boolean;
  kubeconfig?: string | undefined;
  context?: string | undefined;
  upstreamServers: string[];
  listen: string;
  tlsCertFile?: string | undefined;
  tlsKeyFile?: string | undefined;
  clientCAFile?: string | undefined;
  auth: AuthMode;
  anonymous: boolean;
  tokenCacheTtlMs: number;
  tokenNegativeCacheTtlMs: number;
  authorizationAllowedTtlMs: number;
  authorizationDeniedTtlMs: number;
  watchReauthorizeMs: number;
  flow: FlowLimitsInput;
  localRbac: boolean;
  localServiceAccountTokens: boolean;
  logLevel: LevelWithSilent;
  shutdownGraceMs: number;
  shutdownDelayMs: number;
  cache: string[];
  consistentReads: ConsistentReadPolicy;
  /** Rules from the configuration file, then one per --consistent-reads-for. */
  rules: Rule[];
  resourceOptions: Record<string, ResourceOptions>;
  discoveryTtlMs: number;
  coalesceMaxBytes: number;
  /** Consistent reads answering at least this many bytes wait for the proof of freshness. */
  consistentReadProofBytes: number;
  /** Threads that serve clients, sharing one cache. */
  workers: number;
}

export const USAGE = `Usage: levee [options]

A caching gateway for kube-apiserver.

Options:
  --config PATH              a configuration file (YAML; see config/): every setting below and the
                             rules; flags and environment variables (LEVEE_LISTEN, LEVEE_AUTH,
                             LEVEE_LOG_LEVEL, LEVEE_CACHE, LEVEE_CONSISTENT_READS) override it; flow
                             control limits and rules are reloaded when it changes (default: $LEVEE_CONFIG)
  --print-config             print the effective configuration as a configuration file and exit
  --kubeconfig PATH          upstream cluster and Levee's own credentials
                             (default: $KUBECONFIG, then the in-cluster service account, then ~/.kube/config)
  --context NAME             kubeconfig context (default: the current context)
  --upstream-server URL      another endpoint of the same apiserver cluster (same CA and credentials);
                             requests balance across endpoints and fail over; repeatable
  --listen HOST:PORT         client listener (default: 127.0.0.1:8443)
  --tls-cert-file PATH       serving certificate (PEM); with --tls-private-key-file enables TLS (h2 and http/1.1)
  --tls-private-key-file PATH
  --client-ca-file PATH      CA bundle that verifies client certificates (CN is the user, O the groups);
                             the serving certificate, key and this file are reloaded when they change
  --auth MODE                delegate (default): clients authenticate (certificate or bearer token), every
                             answer from the cache is authorized for them, forwarded requests carry their
                             identity; trust-loopback: as delegate, but requests without credentials act as
                             Levee itself (loopback listener only); none: no authentication or
                             authorization at all (loopback listener only)
  --anonymous-auth           accept requests without credentials as system:anonymous (default: 401)
  --token-cache-ttl DURATION how long a TokenReview that accepted a token is reused (default: 30s)
  --token-negative-cache-ttl DURATION
                             how long a rejected token stays rejected (default: 5s)
  --authorization-cache-allowed-ttl DURATION
                             how long an allowed SubjectAccessReview is reused (default: 10s)
  --authorization-cache-denied-ttl DURATION
                             how long a denied one is reused (default: 2s)
  --authorization-local-rbac  evaluate RBAC from a cache of Roles, ClusterRoles and bindings: what RBAC
                             grants is allowed with no review upstream, the rest is still reviewed. Only for
                             clusters whose authorizer chain includes RBAC with no deny before it
  --authentication-local-serviceaccount-tokens
                             verify service-account tokens as the apiserver does, with its published keys
                             (OIDC discovery) and a cache of service accounts (and pods, when cached),
                             instead of a TokenReview each; what Levee cannot prove is still reviewed
  --watch-reauthorize-interval DURATION
                             how often a watch answered from the cache is authorized again, ended when
                             access is gone; 0 never (default: 1m)
  --cache LIST               resources answered from memory, comma-separated as kubectl names them
                             (pods, endpointslices.discovery.k8s.io, apps/v1/deployments; "" for none);
                             custom resources once their CRD exists (widgets.example.com), or by pattern:
                             *.example.com (a group), *.*.example.com (every group below a domain),
                             widgets.* (a resource of every group), *.* (every custom resource)
                             (default: ${DEFAULT_RESOURCES.join(',')})
  --consistent-reads POLICY  reads without resourceVersion on cached resources: verify (default: from
                             cache once proven as new as the apiserver, else forwarded), cache (like
                             resourceVersion=0), or forward; per resource with name=policy, e.g.
                             "verify,nodes=cache"
  --consistent-read-proof-bytes N
                             under verify, a read without resourceVersion whose answer from the
                             cache is at least N bytes, and any such read while requests queue for
                             the upstream bound, waits (about a second, at most 3 s) for the proof
                             that the cache is as new as the apiserver; smaller ones are forwarded,
                             which costs the apiserver less; a watch-list start always waits; 0 makes
                             every one wait (default: 1048576)
  --consistent-reads-for KIND:NAME=POLICY
                             the same policy for one client, ahead of the resource's: user:NAME,
                             group:NAME or serviceaccount:NAMESPACE:NAME (NAME * for all in the
                             namespace), e.g. group:system:nodes=cache; first match wins; repeatable
  --cache-selector NAME=SELECTOR
                             cache only the objects of NAME this field selector picks (a node-local
                             cache: pods=spec.nodeName=node-1); repeatable
  --cache-label-selector NAME=SELECTOR
                             the same with a label selector; repeatable
  --cache-index NAME=FIELD   index NAME by this field selector field too (pods=status.phase); repeatable
  --max-requests-inflight N  reads (GET, LIST) served at once, from the cache or not; more wait in fair
                             queues by user, then get 429 (default: ${DEFAULT_SEATS.requests.read}; 0 no limit)
  --max-mutating-requests-inflight N
                             writes at once (default: ${DEFAULT_SEATS.requests.mutating})
  --max-longrunning-requests N
                             watches and other long-running requests open at once (default: ${DEFAULT_SEATS.requests['long-running']})
  --upstream-max-requests-inflight N, --upstream-max-mutating-requests-inflight N,
  --upstream-max-longrunning-requests N
                             the same bounds for requests sent on to the apiserver (defaults: ${DEFAULT_SEATS.upstream.read},
                             ${DEFAULT_SEATS.upstream.mutating}, ${DEFAULT_SEATS.upstream['long-running']}); requests for a resource still syncing get
                             429 with a growing Retry-After when these are full
  --flow-queue-wait DURATION how long a request may wait for a seat (default: 15s)
  --flow-queue-length N      requests one fair queue holds (default: ${DEFAULT_QUEUE_LENGTH})
  --discovery-cache-ttl DURATION
                             how long discovery (/api, /apis, their groups and versions, aggregated
                             discovery) and OpenAPI (/openapi/v2, /openapi/v3) answers fetched by Levee
                             are served, to users the apiserver allows to get the path, before Levee
                             revalidates them with If-None-Match; 0 forwards them (default: 5s)
  --coalesce-max-bytes N     identical GETs in flight upstream at the same time (same path, query,
                             credentials and headers) share one upstream request when its answer is at
                             most N bytes; larger answers are fetched by each; 0 never (default: 4194304)
  --shutdown-grace-period DURATION
                             on SIGTERM or SIGINT, how long requests in flight may take to finish once
                             Levee stops accepting; what is left is closed then (default: 30s)
  --shutdown-delay-duration DURATION
                             on SIGTERM or SIGINT, how long Levee keeps serving with /readyz failing
                             before it stops accepting, so load balancers notice first (default: 0s)
  --workers N                threads that serve clients on the listener, sharing one cache; each
                             takes connections as the kernel spreads them (default: the CPUs
                             Levee may run on)
  --log-level LEVEL          trace, debug, info (default), warn, error, silent
  -h, --help                 this text
`;

const AUTH_MODES: readonly AuthMode[] = ['delegate', 'trust-loopback', 'none'];
const LOG_LEVELS: readonly LevelWithSilent[] = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

export class UsageError extends Error {}

/** Environment variables for the settings where one is natural (a container's env). */
const ENV_FLAGS: Record<string, string> = {
  LEVEE_LISTEN: 'listen',
  LEVEE_AUTH: 'auth',
  LEVEE_LOG_LEVEL: 'log-level',
  LEVEE_CACHE: 'cache',
  LEVEE_CONSISTENT_READS: 'consistent-reads',
};

/**
 * Options from, in rising precedence: defaults, the configuration file (--config or
 * $LEVEE_CONFIG), environment variables, flags. A ConfigError names the file's field.
 */
export function parseOptions(argv: string[], env: NodeJS.ProcessEnv = {}): Options | 'help' {
  const configPath = configFlag(argv) ?? env.LEVEE_CONFIG;
  const file = configPath ? loadConfigFile(configPath) : undefined;
  const fromEnv = Object.entries(ENV_FLAGS).flatMap(([name, flag]) => (env[name] ? [`--${flag}`, env[name]] : []));
  const options = parseArgv([...(file ? configToArgs(file) : []), ...fromEnv, ...argv]);
  if (options === 'help') return options;
  return { ...options, configFile: configPath, rules: [...(file ? rulesOf(file) : []), ...options.rules] };
}

/** --config PATH or --config=PATH, read before the rest so the file's flags can come first. */
function configFlag(argv: string[]): string | undefined {
  let path: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--config') path = argv[++i];
    else if (argv[i]!.startsWith('--config=')) path = argv[i]!.slice('--config='.length);
  }
  return path;
}

function parseArgv(argv: string[]): Options | 'help' {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      options: {
        config: { type: 'string' },
        'print-config': { type: 'boolean', default: false },
        kubeconfig: { type: 'string' },
        context: { type: 'string' },
        'upstream-server': { type: 'string', multiple: true },
        listen: { type: 'string', default: '127.0.0.1:8443' },
        'tls-cert-file': { type: 'string' },
        'tls-private-key-file': { type: 'string' },
        'client-ca-file': { type: 'string' },
        auth: { type: 'string', default: 'delegate' },
        'anonymous-auth': { type: 'boolean', default: false },
        'token-cache-ttl': { type: 'string', default: '30s' },
        'token-negative-cache-ttl': { type: 'string', default: '5s' },
        'authorization-cache-allowed-ttl': { type: 'string', default: '10s' },
        'authorization-cache-denied-ttl': { type: 'string', default: '2s' },
        'watch-reauthorize-interval': { type: 'string', default: '1m' },
        'authorization-local-rbac': { type: 'boolean', default: false },
        'authentication-local-serviceaccount-tokens': { type: 'boolean', default: false },
        'max-requests-inflight': { type: 'string' },
        'max-mutating-requests-inflight': { type: 'string' },
        'max-longrunning-requests': { type: 'string' },
        'upstream-max-requests-inflight': { type: 'string' },
        'upstream-max-mutating-requests-inflight': { type: 'string' },
        'upstream-max-longrunning-requests': { type: 'string' },
        'flow-queue-wait': { type: 'string' },
        'flow-queue-length': { type: 'string' },
        'log-level': { type: 'string', default: 'info' },
        workers: { type: 'string' },
        'shutdown-grace-period': { type: 'string', default: '30s' },
        'discovery-cache-ttl': { type: 'string', default: '5s' },
        'coalesce-max-bytes': { type: 'string', default: '4194304' },
        'shutdown-delay-duration': { type: 'string', default: '0s' },
        cache: { type: 'string', default: DEFAULT_RESOURCES.join(',') },
        'consistent-reads': { type: 'string', default: 'verify' },
        'consistent-reads-for': { type: 'string', multiple: true },
        'consistent-read-proof-bytes': { type: 'string', default: '1048576' },
        'cache-selector': { type: 'string', multiple: true },
        'cache-label-selector': { type: 'string', multiple: true },
        'cache-index': { type: 'string', multiple: true },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (values.help) return 'help';
  if (!AUTH_MODES.includes(values.auth as AuthMode)) {
    throw new UsageError(`--auth: "${values.auth}" is not one of ${AUTH_MODES.join(', ')}`);
  }
  if (!LOG_LEVELS.includes(values['log-level'] as LevelWithSilent)) {
    throw new UsageError(`--log-level: "${values['log-level']}" is not one of ${LOG_LEVELS.join(', ')}`);
  }
  if (Boolean(values['tls-cert-file']) !== Boolean(values['tls-private-key-file'])) {
    throw new UsageError('--tls-cert-file and --tls-private-key-file go together');
  }
  if (values['client-ca-file'] && !values['tls-cert-file']) {
    throw new UsageError('--client-ca-file needs TLS: give --tls-cert-file and --tls-private-key-file');
  }
  const count = (flag: string, fallback: number): number => {
    const v = (values as unknown as Record<string, string | undefined>)[flag];
    if (v === undefined) return fallback;
    if (!/^\d+$/.test(v)) throw new UsageError(`--${flag}: "${v}" is not a whole number`);
    return Number(v);
  };
  const atLeastOne = (flag: string, n: number): number => {
    if (n < 1) throw new UsageError(`--${flag}: must be at least 1`);
    return n;
  };
  const duration = (flag: string): number => {
    try {
      return parseDuration((values as unknown as Record<string, string>)[flag]!);
    } catch (err) {
      throw new UsageError(`--${flag}: ${(err as Error).message}`);
    }
  };
  return {
    printConfig: values['print-config'],
    kubeconfig: values.kubeconfig,
    context: values.context,
    upstreamServers: values['upstream-server'] ?? [],
    listen: values.listen,
    tlsCertFile: values['tls-cert-file'],
    tlsKeyFile: values['tls-private-key-file'],
    clientCAFile: values['client-ca-file'],
    auth: values.auth as AuthMode,
    anonymous: values['anonymous-auth'],
    tokenCacheTtlMs: duration('token-cache-ttl'),
    tokenNegativeCacheTtlMs: duration('token-negative-cache-ttl'),
    authorizationAllowedTtlMs: duration('authorization-cache-allowed-ttl'),
    authorizationDeniedTtlMs: duration('authorization-cache-denied-ttl'),
    watchReauthorizeMs: duration('watch-reauthorize-interval'),
    localRbac: values['authorization-local-rbac'],
    localServiceAccountTokens: values['authentication-local-serviceaccount-tokens'],
    flow: {
      requests: {
        read: count('max-requests-inflight', DEFAULT_SEATS.requests.read),
        mutating: count('max-mutating-requests-inflight', DEFAULT_SEATS.requests.mutating),
        'long-running': count('max-longrunning-requests', DEFAULT_SEATS.requests['long-running']),
      },
      upstream: {
        read: count('upstream-max-requests-inflight', DEFAULT_SEATS.upstream.read),
        mutating: count('upstream-max-mutating-requests-inflight', DEFAULT_SEATS.upstream.mutating),
        'long-running': count('upstream-max-longrunning-requests', DEFAULT_SEATS.upstream['long-running']),
      },
      queueWaitMs: values['flow-queue-wait'] === undefined ? DEFAULT_QUEUE_WAIT_MS : duration('flow-queue-wait'),
      queueLength: count('flow-queue-length', DEFAULT_QUEUE_LENGTH),
    },
    logLevel: values['log-level'] as LevelWithSilent,
    shutdownGraceMs: duration('shutdown-grace-period'),
    shutdownDelayMs: duration('shutdown-delay-duration'),
    cache: parseCacheList(values.cache),
    consistentReads: perResource('--consistent-reads', parseConsistentReads(values['consistent-reads'])),
    rules: (values['consistent-reads-for'] ?? []).map((v) => {
      try {
        return parseConsistentReadsFor(v);
      } catch (err) {
        throw new UsageError(`--consistent-reads-for: ${(err as Error).message}`);
      }
    }),
    resourceOptions: parseResourceOptions(values['cache-selector'] ?? [], values['cache-label-selector'] ?? [], values['cache-index'] ?? []),
    discoveryTtlMs: duration('discovery-cache-ttl'),
    coalesceMaxBytes: count('coalesce-max-bytes', 4194304),
    consistentReadProofBytes: count('consistent-read-proof-bytes', 1048576),
    workers: atLeastOne('workers', count('workers', availableParallelism())),
  };
}

/** --cache: names and patterns, each checked (a malformed one is a usage error, not a silent miss). */
export function parseCacheList(value: string): string[] {
  const names = value.split(',').map((r) => r.trim()).filter((r) => r !== '');
  for (const name of names) {
    const problem = resourceNameProblem(name);
    if (problem) throw new UsageError(`--cache: ${problem}`);
  }
  return names;
}

/** A consistent-read policy names resources one by one: a pattern there would match nothing. */
function perResource(flag: string, policy: ConsistentReadPolicy): ConsistentReadPolicy {
  for (const name of Object.keys(policy.byResource)) {
    if (isPattern(name)) throw new UsageError(`${flag}: "${name}": a policy is given per resource, not per pattern`);
  }
  return policy;
}

/** "verify", or "verify,nodes=cache,pods=forward": a default and overrides by resource. */
export function parseConsistentReads(value: string): ConsistentReadPolicy {
  const policy: ConsistentReadPolicy = { default: 'verify', byResource: {} };
  for (const part of value.split(',').map((p) => p.trim()).filter((p) => p !== '')) {
    const eq = part.indexOf('=');
    const mode = eq === -1 ? part : part.slice(eq + 1);
    if (!isConsistentReads(mode)) {
      throw new UsageError(`--consistent-reads: "${mode}" is not one of ${CONSISTENT_READS.join(', ')}`);
    }
    if (eq === -1) policy.default = mode;
    else policy.byResource[part.slice(0, eq)] = mode;
  }
  return policy;
}

function nameAndValue(flag: string, value: string): [string, string] {
  const eq = value.indexOf('=');
  if (eq <= 0) throw new UsageError(`${flag}: "${value}" is not NAME=VALUE`);
  return [value.slice(0, eq).trim(), value.slice(eq + 1)];
}

/** Upstream selectors and extra indexes by resource name; selectors are checked for syntax here. */
export function parseResourceOptions(fieldSelectors: string[], labelSelectors: string[], indexes: string[]): Record<string, ResourceOptions> {
  const out: Record<string, ResourceOptions> = {};
  const of = (name: string): ResourceOptions => (out[name] ??= {});
  for (const v of fieldSelectors) {
    const [name, selector] = nameAndValue('--cache-selector', v);
    try {
      parseFieldSelector(selector);
    } catch (err) {
      throw new UsageError(`--cache-selector ${name}: ${(err as Error).message}`);
    }
    of(name).fieldSelector = selector;
  }
  for (const v of labelSelectors) {
    const [name, selector] = nameAndValue('--cache-label-selector', v);
    try {
      parseLabelSelector(selector);
    } catch (err) {
      throw new UsageError(`--cache-label-selector ${name}: ${(err as Error).message}`);
    }
    of(name).labelSelector = selector;
  }
  for (const v of indexes) {
    const [name, field] = nameAndValue('--cache-index', v);
    (of(name).indexes ??= []).push(field.trim());
  }
  for (const name of Object.keys(out)) {
    if (isPattern(name)) throw new UsageError(`"${name}": selectors and indexes are given per resource, not per pattern`);
  }
  return out;
}
