// The configuration file (YAML): every setting of the command line in one place, plus the rules,
// which only a file can express well. It is validated against a schema at start and on every
// reload; an error names the field and the problem. The file is turned into the flags it stands
// for, so a flag or environment variable given as well overrides it, and both paths share one set
// of checks and defaults.
import { CONSISTENT_READS } from '../api/consistency.ts';
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import * as z from 'zod';
import { parseFieldSelector } from '../selectors/fields.ts';
import { parseLabelSelector } from '../selectors/labels.ts';
import { parseDuration } from './duration.ts';
import type { Rule } from '../flow/rules.ts';
import { isPattern, resourceNameProblem } from '../cache/names.ts';

export const CONFIG_API_VERSION = 'levee.dev/v1alpha1';
export const CONFIG_KIND = 'Configuration';

const duration = z.string().refine((v) => {
  try {
    parseDuration(v);
    return true;
  } catch {
    return false;
  }
}, 'is not a duration (like 30s, 1m30s, 500ms)');
const selector = (parse: (s: string) => unknown) =>
  z.string().superRefine((v, ctx) => {
    try {
      parse(v);
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: (err as Error).message });
    }
  });
const seats = z.number().int().min(0);
const consistentReads = z.enum(CONSISTENT_READS);
const names = z.array(z.string().min(1)).optional();
// A --cache entry: a resource as kubectl names it, or a pattern over custom resources.
const resourceName = z.string().min(1).superRefine((v, ctx) => {
  const problem = resourceNameProblem(v);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});

const limits = {
  maxRequestsInflight: seats.optional(),
  maxMutatingRequestsInflight: seats.optional(),
  maxLongRunningRequests: seats.optional(),
};

const ruleSchema = z
  .strictObject({
    name: z.string().min(1),
    match: z.strictObject({
      verbs: names,
      resources: names,
      users: names,
      groups: names,
      serviceAccounts: z.array(z.string().regex(/^[^:]+:[^:]+$/, 'is not NAMESPACE:NAME (NAME may be *)')).optional(),
      paths: z.array(z.string().startsWith('/', 'must start with /')).optional(),
    }),
    action: z.enum(['allow', 'deny', 'reject']).optional(),
    consistentReads: consistentReads.optional(),
    when: z.enum(['always', 'upstream-busy']).optional(),
    retryAfterSeconds: z.number().int().min(1).optional(),
  })
  .refine((r) => r.action !== undefined || r.consistentReads !== undefined, 'a rule needs an action or consistentReads');

export const configSchema = z.strictObject({
  apiVersion: z.literal(CONFIG_API_VERSION).optional(),
  kind: z.literal(CONFIG_KIND).optional(),
  upstream: z
    .strictObject({
      kubeconfig: z.string().optional(),
      context: z.string().optional(),
      servers: z.array(z.url()).optional(),
    })
    .optional(),
  listen: z.string().optional(),
  workers: z.number().int().min(1).optional(),
  tls: z.strictObject({ certFile: z.string(), keyFile: z.string(), clientCAFile: z.string().optional() }).optional(),
  authentication: z
    .strictObject({
      mode: z.enum(['delegate', 'trust-loopback', 'none']).optional(),
      anonymous: z.boolean().optional(),
      tokenCacheTTL: duration.optional(),
      tokenNegativeCacheTTL: duration.optional(),
      localServiceAccountTokens: z.boolean().optional(),
    })
    .optional(),
  authorization: z
    .strictObject({
      allowedTTL: duration.optional(),
      deniedTTL: duration.optional(),
      watchReauthorizeInterval: duration.optional(),
      localRBAC: z.boolean().optional(),
    })
    .optional(),
  cache: z
    .strictObject({
      consistentReads: consistentReads.optional(),
      consistentReadProofBytes: z.number().int().min(0).optional(),
      resources: z
        .array(
          z.union([
            resourceName,
            z
              .strictObject({
                name: resourceName,
                fieldSelector: selector(parseFieldSelector).optional(),
                labelSelector: selector(parseLabelSelector).optional(),
                indexes: z.array(z.string().min(1)).optional(),
                consistentReads: consistentReads.optional(),
              })
              .refine(
                (r) => !isPattern(r.name) || Object.keys(r).length === 1,
                'a pattern takes no fieldSelector, labelSelector, indexes or consistentReads: they are given per resource',
              ),
          ]),
        )
        .optional(),
    })
    .optional(),
  flowControl: z
    .strictObject({
      ...limits,
      upstream: z.strictObject(limits).optional(),
      queueWait: duration.optional(),
      queueLength: z.number().int().min(1).optional(),
      discoveryCacheTTL: duration.optional(),
      coalesceMaxBytes: z.number().int().min(0).optional(),
    })
    .optional(),
  rules: z.array(ruleSchema).optional(),
  shutdown: z.strictObject({ gracePeriod: duration.optional(), delay: duration.optional() }).optional(),
  logLevel: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).optional(),
});

export type ConfigFile = z.infer<typeof configSchema>;

export class ConfigError extends Error {}

/** "rules[2].match.verbs" from zod's path. */
function fieldPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : `${out ? '.' : ''}${String(p)}`;
  return out || '(top level)';
}

/** Parses and validates configuration text; a ConfigError lists every problem, one field a line. */
export function parseConfig(text: string, source: string): ConfigFile {
  let raw: unknown;
  try {
    raw = parseYaml(text) ?? {};
  } catch (err) {
    throw new ConfigError(`${source}: not valid YAML: ${(err as Error).message}`);
  }
  const result = configSchema.safeParse(raw);
  if (!result.success) {
    const lines = result.error.issues.map((i) => `  ${fieldPath(i.path)}: ${i.message}`);
    throw new ConfigError(`${source}: invalid configuration:\n${lines.join('\n')}`);
  }
  return result.data;
}

export function loadConfigFile(path: string): ConfigFile {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`${path}: cannot read the configuration: ${(err as Error).message}`);
  }
  return parseConfig(text, path);
}

/** The flags a configuration file stands for, in an order a later flag can override. */
export function configToArgs(c: ConfigFile): string[] {
  const a: string[] = [];
  const flag = (name: string, value: string | number | boolean | undefined): void => {
    if (value === undefined || value === false) return;
    if (value === true) a.push(`--${name}`);
    else a.push(`--${name}`, String(value));
  };
  flag('kubeconfig', c.upstream?.kubeconfig);
  flag('context', c.upstream?.context);
  for (const s of c.upstream?.servers ?? []) flag('upstream-server', s);
  flag('listen', c.listen);
  flag('workers', c.workers);
  flag('tls-cert-file', c.tls?.certFile);
  flag('tls-private-key-file', c.tls?.keyFile);
  flag('client-ca-file', c.tls?.clientCAFile);
  flag('auth', c.authentication?.mode);
  flag('anonymous-auth', c.authentication?.anonymous);
  flag('token-cache-ttl', c.authentication?.tokenCacheTTL);
  flag('token-negative-cache-ttl', c.authentication?.tokenNegativeCacheTTL);
  flag('authentication-local-serviceaccount-tokens', c.authentication?.localServiceAccountTokens);
  flag('authorization-cache-allowed-ttl', c.authorization?.allowedTTL);
  flag('authorization-cache-denied-ttl', c.authorization?.deniedTTL);
  flag('watch-reauthorize-interval', c.authorization?.watchReauthorizeInterval);
  flag('authorization-local-rbac', c.authorization?.localRBAC);
  if (c.cache?.resources) {
    const resources = c.cache.resources.map((r) => (typeof r === 'string' ? { name: r } : r));
    flag('cache', resources.map((r) => r.name).join(','));
    const policies = [c.cache.consistentReads ?? 'verify', ...resources.flatMap((r) => ('consistentReads' in r && r.consistentReads ? [`${r.name}=${r.consistentReads}`] : []))];
    flag('consistent-reads', policies.join(','));
    for (const r of resources) {
      if ('fieldSelector' in r && r.fieldSelector) flag('cache-selector', `${r.name}=${r.fieldSelector}`);
      if ('labelSelector' in r && r.labelSelector) flag('cache-label-selector', `${r.name}=${r.labelSelector}`);
      for (const i of ('indexes' in r ? r.indexes : undefined) ?? []) flag('cache-index', `${r.name}=${i}`);
    }
  } else {
    flag('consistent-reads', c.cache?.consistentReads);
    flag('consistent-read-proof-bytes', c.cache?.consistentReadProofBytes);
  }
  const f = c.flowControl;
  flag('max-requests-inflight', f?.maxRequestsInflight);
  flag('max-mutating-requests-inflight', f?.maxMutatingRequestsInflight);
  flag('max-longrunning-requests', f?.maxLongRunningRequests);
  flag('upstream-max-requests-inflight', f?.upstream?.maxRequestsInflight);
  flag('upstream-max-mutating-requests-inflight', f?.upstream?.maxMutatingRequestsInflight);
  flag('upstream-max-longrunning-requests', f?.upstream?.maxLongRunningRequests);
  flag('flow-queue-wait', f?.queueWait);
  flag('flow-queue-length', f?.queueLength);
  flag('discovery-cache-ttl', f?.discoveryCacheTTL);
  flag('coalesce-max-bytes', f?.coalesceMaxBytes);
  flag('shutdown-grace-period', c.shutdown?.gracePeriod);
  flag('shutdown-delay-duration', c.shutdown?.delay);
  flag('log-level', c.logLevel);
  return a;
}

export function rulesOf(c: ConfigFile): Rule[] {
  return (c.rules ?? []).map((r) => ({ ...r }));
}
