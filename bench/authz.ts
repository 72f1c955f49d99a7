// What authenticating and authorizing clients costs a cached read, and what it costs the apiserver.
//
// Four targets answer the same GET of one configmap and the same LIST of 20, with
// resourceVersion=0 (from memory) and the same service-account token, over TLS with keep-alive,
// alternated in a rotating order: the apiserver directly; Levee with --auth none (no checks at
// all: the baseline); Levee with warm decision caches (the defaults); Levee with cold ones (every
// TTL 0, so each request is a TokenReview and a SubjectAccessReview upstream). The warm and cold
// medians less the baseline's are what authorization adds.
//
// Then a load phase: many service accounts at once against warm and cold Levee, counting the
// TokenReviews and SubjectAccessReviews Levee sent upstream per request served.
//
//   npm run bench:authz [-- --requests 1000 --identities 200 --seconds 10]
import { mkdirSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Agent, request } from 'undici';
import { readFileSync } from 'node:fs';
import { quietEnv } from './lib/env.ts';
import { startLevee, writeKubeconfig, type LeveeProcess } from '../test/support/levee.ts';
import { send, suffix } from '../test/support/http.ts';
import { kubectl } from '../test/support/kubectl.ts';
import { pool } from './lib/client.ts';
import { metric, parseMetrics } from './lib/prom.ts';
import { quantile } from './lib/stats.ts';

const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: '1000' },
    identities: { type: 'string', default: '200' },
    seconds: { type: 'string', default: '10' },
    concurrency: { type: 'string', default: '32' },
  },
});
const N = Number(values.requests);
const IDENTITIES = Number(values.identities);
const SECONDS = Number(values.seconds);
const CONCURRENCY = Number(values.concurrency);

const env = await quietEnv();
const ca = readFileSync(env.caFile);
const admin = new Agent({ connect: { ca }, allowH2: false });
const ns = `bench-authz-${suffix()}`;

async function must(status: number, p: Promise<{ status: number; body: string }>): Promise<string> {
  const r = await p;
  if (r.status !== status) throw new Error(`HTTP ${r.status}: ${r.body.slice(0, 300)}`);
  return r.body;
}

async function tokenFor(namespace: string, name: string): Promise<string> {
  const body = await must(201, send('POST', `${env.server}/api/v1/namespaces/${namespace}/serviceaccounts/${name}/token`, admin, env.tokens.admin, {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: { expirationSeconds: 3600 },
  }));
  return (JSON.parse(body) as { status: { token: string } }).status.token;
}

// The cluster: a namespace of 20 configmaps that every service account of the namespace may read.
await must(201, send('POST', `${env.server}/api/v1/namespaces`, admin, env.tokens.admin, { metadata: { name: ns } }));
for (let i = 0; i < 20; i++) {
  await must(201, send('POST', `${env.server}/api/v1/namespaces/${ns}/configmaps`, admin, env.tokens.admin, { metadata: { name: `c${i}` }, data: { v: 'x'.repeat(1000) } }));
}
await must(201, send('POST', `${env.server}/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`, admin, env.tokens.admin, {
  metadata: { name: 'reader' },
  rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'watch'] }],
}));
await must(201, send('POST', `${env.server}/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, admin, env.tokens.admin, {
  metadata: { name: 'reader' },
  roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'reader' },
  subjects: [{ kind: 'Group', name: `system:serviceaccounts:${ns}`, apiGroup: 'rbac.authorization.k8s.io' }],
}));
const tokens: string[] = [];
await pool(IDENTITIES, 16, async (i) => {
  await must(201, send('POST', `${env.server}/api/v1/namespaces/${ns}/serviceaccounts`, admin, env.tokens.admin, { metadata: { name: `agent-${i}` } }));
  tokens[i] = await tokenFor(ns, `agent-${i}`);
});

// Levee runs as the service account of the shipped manifest.
const applied = await kubectl(env.kubectl, env.kubeconfig, ['apply', '-f', resolve(import.meta.dirname, '../deploy/rbac.yaml')]);
if (applied.code !== 0) throw new Error(applied.stderr);
const kc = writeKubeconfig(env.server, env.caFile, await tokenFor('levee', 'levee'));
const cache = ['--cache', 'configmaps'];
const cold = ['--token-cache-ttl', '0', '--token-negative-cache-ttl', '0', '--authorization-cache-allowed-ttl', '0', '--authorization-cache-denied-ttl', '0'];
const [none, warm, coldLevee] = await Promise.all([
  startLevee({ kubeconfig: kc, tls: env.leveeServing, extra: [...cache, '--auth', 'none'] }),
  startLevee({ kubeconfig: kc, tls: env.leveeServing, extra: cache }),
  startLevee({ kubeconfig: kc, tls: env.leveeServing, extra: [...cache, ...cold] }),
]);
for (const l of [none, warm, coldLevee]) {
  for (let i = 0; ; i++) {
    const res = await request(`${l.url.origin}/readyz`, { dispatcher: admin });
    await res.body.dump();
    if (res.statusCode === 200) break;
    if (i > 200) throw new Error('levee never became ready');
    await new Promise((r) => setTimeout(r, 100));
  }
}

type TargetName = 'apiserver' | 'levee, no auth' | 'levee, warm' | 'levee, cold';
const targets: Array<{ name: TargetName; origin: string; agent: Agent }> = [
  { name: 'apiserver', origin: env.server, agent: new Agent({ connect: { ca }, allowH2: false, connections: 1 }) },
  { name: 'levee, no auth', origin: none.url.origin, agent: new Agent({ connect: { ca }, allowH2: false, connections: 1 }) },
  { name: 'levee, warm', origin: warm.url.origin, agent: new Agent({ connect: { ca }, allowH2: false, connections: 1 }) },
  { name: 'levee, cold', origin: coldLevee.url.origin, agent: new Agent({ connect: { ca }, allowH2: false, connections: 1 }) },
];

async function timed(origin: string, agent: Agent, path: string, token: string): Promise<number> {
  const t = process.hrtime.bigint();
  const res = await request(origin + path, { dispatcher: agent, headers: { authorization: `Bearer ${token}`, accept: 'application/json' } });
  await res.body.dump({ limit: Infinity });
  if (res.statusCode !== 200) throw new Error(`${origin}${path}: HTTP ${res.statusCode}`);
  return Number(process.hrtime.bigint() - t) / 1e6;
}

async function reviews(l: LeveeProcess): Promise<{ tokens: number; access: number }> {
  const res = await request(`${l.url.origin}/metrics`, { dispatcher: admin });
  const samples = parseMetrics(await res.body.text());
  return { tokens: metric(samples, 'levee_token_reviews_total') ?? 0, access: metric(samples, 'levee_subject_access_reviews_total') ?? 0 };
}

const scenarios = [
  { name: 'GET a configmap', path: `/api/v1/namespaces/${ns}/configmaps/c7?resourceVersion=0` },
  { name: 'LIST 20 configmaps', path: `/api/v1/namespaces/${ns}/configmaps?resourceVersion=0` },
];
const latency = [];
for (const s of scenarios) {
  const samples = new Map<TargetName, number[]>(targets.map((t) => [t.name, []]));
  for (let i = 0; i < 50; i++) for (const t of targets) await timed(t.origin, t.agent, s.path, tokens[0]!);
  for (let i = 0; i < N; i++) {
    // A rotating order, so no target always follows the same one.
    for (let k = 0; k < targets.length; k++) {
      const t = targets[(i + k) % targets.length]!;
      samples.get(t.name)!.push(await timed(t.origin, t.agent, s.path, tokens[0]!));
    }
  }
  const p50 = (n: TargetName) => quantile(samples.get(n)!, 0.5);
  const p99 = (n: TargetName) => quantile(samples.get(n)!, 0.99);
  latency.push({
    scenario: s.name,
    requests: N,
    p50Ms: Object.fromEntries(targets.map((t) => [t.name, p50(t.name)])),
    p99Ms: Object.fromEntries(targets.map((t) => [t.name, p99(t.name)])),
    addedWarmP50Ms: p50('levee, warm') - p50('levee, no auth'),
    addedColdP50Ms: p50('levee, cold') - p50('levee, no auth'),
    speedupWarmOverApiserver: p50('apiserver') / p50('levee, warm'),
  });
}

// Load: every identity reads, CONCURRENCY at a time, for SECONDS, against one Levee at a time.
const load = [];
for (const [name, l] of [['levee, warm', warm], ['levee, cold', coldLevee]] as const) {
  const agent = new Agent({ connect: { ca }, allowH2: false, connections: CONCURRENCY });
  const before = await reviews(l);
  const times: number[] = [];
  let errors = 0;
  const end = Date.now() + SECONDS * 1000;
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (Date.now() < end) {
        const i = next++;
        try {
          times.push(await timed(l.url.origin, agent, scenarios[0]!.path, tokens[i % IDENTITIES]!));
        } catch {
          errors++;
        }
      }
    }),
  );
  const after = await reviews(l);
  await agent.close();
  const served = times.length;
  load.push({
    target: name,
    identities: IDENTITIES,
    concurrency: CONCURRENCY,
    seconds: SECONDS,
    requests: served,
    errors,
    requestsPerSecond: served / SECONDS,
    p50Ms: quantile(times, 0.5),
    p99Ms: quantile(times, 0.99),
    tokenReviews: after.tokens - before.tokens,
    subjectAccessReviews: after.access - before.access,
    tokenReviewsPerSecond: (after.tokens - before.tokens) / SECONDS,
    subjectAccessReviewsPerSecond: (after.access - before.access) / SECONDS,
    reviewsPerRequest: (after.tokens - before.tokens + after.access - before.access) / Math.max(1, served),
  });
}

await Promise.all([none.stop(), warm.stop(), coldLevee.stop()]);
await send('DELETE', `${env.server}/api/v1/namespaces/${ns}`, admin, env.tokens.admin);
await Promise.all([admin.close(), ...targets.map((t) => t.agent.close())]);

const report = { benchmark: 'authz', date: new Date().toISOString(), node: process.version, apiserver: env.version, latency, load };
const out = resolve(import.meta.dirname, 'results');
mkdirSync(out, { recursive: true });
writeFileSync(resolve(out, 'authz.json'), JSON.stringify(report, null, 2) + '\n');
const f = (x: number) => x.toFixed(3);
const names = targets.map((t) => t.name);
const md = [
  '# Authorization cost on cached reads',
  '',
  `${report.date}, Kubernetes ${env.version}, Node ${process.version}. ${N} requests per target and scenario, one`,
  'service-account token, resourceVersion=0, TLS and keep-alive on every path, targets alternated in a rotating order.',
  '`levee, no auth` is `--auth none` (the baseline); `warm` uses the default decision caches; `cold` sets every TTL to 0,',
  'so each request sends a TokenReview and a SubjectAccessReview upstream.',
  '',
  `| scenario | ${names.map((n) => `${n} p50 ms`).join(' | ')} | added warm p50 ms | added cold p50 ms | ${names.map((n) => `${n} p99 ms`).join(' | ')} |`,
  `|---|${names.map(() => '---:').join('|')}|---:|---:|${names.map(() => '---:').join('|')}|`,
  ...latency.map((r) => `| ${r.scenario} | ${names.map((n) => f(r.p50Ms[n]!)).join(' | ')} | ${f(r.addedWarmP50Ms)} | ${f(r.addedColdP50Ms)} | ${names.map((n) => f(r.p99Ms[n]!)).join(' | ')} |`),
  '',
  `## Under load: ${IDENTITIES} service accounts, ${CONCURRENCY} requests in flight, ${SECONDS} s per target (GET a configmap)`,
  '',
  '| target | requests/s | p50 ms | p99 ms | errors | TokenReviews/s | SubjectAccessReviews/s | reviews per request |',
  '|---|---:|---:|---:|---:|---:|---:|---:|',
  ...load.map((r) => `| ${r.target} | ${r.requestsPerSecond.toFixed(0)} | ${f(r.p50Ms)} | ${f(r.p99Ms)} | ${r.errors} | ${r.tokenReviewsPerSecond.toFixed(1)} | ${r.subjectAccessReviewsPerSecond.toFixed(1)} | ${r.reviewsPerRequest.toFixed(3)} |`),
  '',
].join('\n');
writeFileSync(resolve(out, 'authz.md'), md);
console.log(md);
