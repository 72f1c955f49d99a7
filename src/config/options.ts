// Command-line options. Every option has a working default, so `levee` alone runs against the
// cluster of the current kubeconfig on a loopback port.
import { parseArgs } from 'node:util';
import type { LevelWithSilent } from 'pino';
import type { AuthMode } from '../serve/chain.ts';
import { DEFAULT_RESOURCES } from '../cache/resources.ts';
import type { ConsistentReadPolicy, ResourceOptions } from '../cache/cache.ts';
import { parseFieldSelector } from '../selectors/fields.ts';
import { parseLabelSelector } from '../selectors/labels.ts';
import type { ConsistentReads } from '../serve/decide.ts';

export interface Options {
  kubeconfig?: string | undefined;
  context?: string | undefined;
  upstreamServers: string[];
  listen: string;
  tlsCertFile?: string | undefined;
  tlsKeyFile?: string | undefined;
  auth: AuthMode;
  logLevel: LevelWithSilent;
  cache: string[];
  consistentReads: ConsistentReadPolicy;
  resourceOptions: Record<string, ResourceOptions>;
}

export const USAGE = `Usage: levee [options]

A caching gateway for kube-apiserver.

Options:
  --kubeconfig PATH          upstream cluster and Levee's own credentials
                             (default: $KUBECONFIG, then the in-cluster service account, then ~/.kube/config)
  --context NAME             kubeconfig context (default: the current context)
  --upstream-server URL      another endpoint of the same apiserver cluster (same CA and credentials);
                             requests balance across endpoints and fail over; repeatable
  --listen HOST:PORT         client listener (default: 127.0.0.1:8443)
  --tls-cert-file PATH       serving certificate (PEM); with --tls-private-key-file enables TLS (h2 and http/1.1)
  --tls-private-key-file PATH
  --auth MODE                delegate (default): clients' credentials go upstream unchanged;
                             trust-loopback: requests without credentials use Levee's identity (loopback only)
  --cache LIST               resources answered from memory, comma-separated as kubectl names them
                             (pods, endpointslices.discovery.k8s.io, apps/v1/deployments; "" for none)
                             (default: ${DEFAULT_RESOURCES.join(',')})
  --consistent-reads POLICY  reads without resourceVersion on cached resources: verify (default: from
                             cache once proven as new as the apiserver, else forwarded), cache (like
                             resourceVersion=0), or forward; per resource with name=policy, e.g.
                             "verify,nodes=cache"
  --cache-selector NAME=SELECTOR
                             cache only the objects of NAME this field selector picks (a node-local
                             cache: pods=spec.nodeName=node-1); repeatable
  --cache-label-selector NAME=SELECTOR
                             the same with a label selector; repeatable
  --cache-index NAME=FIELD   index NAME by this field selector field too (pods=status.phase); repeatable
  --log-level LEVEL          trace, debug, info (default), warn, error, silent
  -h, --help                 this text
`;

const AUTH_MODES: readonly AuthMode[] = ['delegate', 'trust-loopback'];
const LOG_LEVELS: readonly LevelWithSilent[] = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

export class UsageError extends Error {}

export function parseOptions(argv: string[]): Options | 'help' {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      options: {
        kubeconfig: { type: 'string' },
        context: { type: 'string' },
        'upstream-server': { type: 'string', multiple: true },
        listen: { type: 'string', default: '127.0.0.1:8443' },
        'tls-cert-file': { type: 'string' },
        'tls-private-key-file': { type: 'string' },
        auth: { type: 'string', default: 'delegate' },
        'log-level': { type: 'string', default: 'info' },
        cache: { type: 'string', default: DEFAULT_RESOURCES.join(',') },
        'consistent-reads': { type: 'string', default: 'verify' },
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
  return {
    kubeconfig: values.kubeconfig,
    context: values.context,
    upstreamServers: values['upstream-server'] ?? [],
    listen: values.listen,
    tlsCertFile: values['tls-cert-file'],
    tlsKeyFile: values['tls-private-key-file'],
    auth: values.auth as AuthMode,
    logLevel: values['log-level'] as LevelWithSilent,
    cache: values.cache.split(',').map((r) => r.trim()).filter((r) => r !== ''),
    consistentReads: parseConsistentReads(values['consistent-reads']),
    resourceOptions: parseResourceOptions(values['cache-selector'] ?? [], values['cache-label-selector'] ?? [], values['cache-index'] ?? []),
  };
}

const CONSISTENT_READS: readonly ConsistentReads[] = ['verify', 'cache', 'forward'];

/** "verify", or "verify,nodes=cache,pods=forward": a default and overrides by resource. */
export function parseConsistentReads(value: string): ConsistentReadPolicy {
  const policy: ConsistentReadPolicy = { default: 'verify', byResource: {} };
  for (const part of value.split(',').map((p) => p.trim()).filter((p) => p !== '')) {
    const eq = part.indexOf('=');
    const mode = (eq === -1 ? part : part.slice(eq + 1)) as ConsistentReads;
    if (!CONSISTENT_READS.includes(mode)) {
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
  return out;
}
