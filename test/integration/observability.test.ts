// What an operator sees of a running Levee: metrics that exist and move, a Grafana dashboard that
// queries only what Levee exports, start-up logs that show each resource's sync and the time to
// ready, and /debug/levee endpoints that only users allowed by the apiserver may read.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Client, request, type Agent } from 'undici';
import { loadEnv, type TestEnv } from '../env/testenv.ts';
import { startLevee, type LeveeProcess } from '../support/levee.ts';
import { agentFor, get, send, suffix } from '../support/http.ts';
import { createNamespace } from '../support/cluster.ts';

let env: TestEnv;
let agent: Agent;
let levee: LeveeProcess;
const ns = `observe-${suffix()}`;
const reader = `levee-debug-reader-${suffix()}`;
const DASHBOARD = resolve(import.meta.dirname, '../../deploy/grafana/levee.json');

before(async () => {
  env = loadEnv();
  agent = agentFor(env.caFile);
  await createNamespace(env, agent, ns);
  assert.equal((await send('POST', `${env.server}/api/v1/namespaces/${ns}/configmaps`, agent, env.tokens.admin, { metadata: { name: 'first' } })).status, 201);
  // bob may read Levee's debug paths; alice may not.
  const rbac = `${env.server}/apis/rbac.authorization.k8s.io/v1`;
  assert.equal(
    (await send('POST', `${rbac}/clusterroles`, agent, env.tokens.admin, { metadata: { name: reader }, rules: [{ nonResourceURLs: ['/debug/levee/*'], verbs: ['get'] }] })).status,
    201,
  );
  assert.equal(
    (
      await send('POST', `${rbac}/clusterrolebindings`, agent, env.tokens.admin, {
        metadata: { name: reader },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: reader },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'bob' }],
      })
    ).status,
    201,
  );
  levee = await startLevee({ kubeconfig: env.kubeconfig, tls: env.leveeServing, extra: ['--cache', 'configmaps,pods'] });
  for (let i = 0; i < 200 && (await get(`${levee.url.origin}/readyz`, agent)).status !== 200; i++) await sleep(50);
});

after(async () => {
  await levee?.stop();
  const rbac = `${env.server}/apis/rbac.authorization.k8s.io/v1`;
  await send('DELETE', `${rbac}/clusterrolebindings/${reader}`, agent, env.tokens.admin);
  await send('DELETE', `${rbac}/clusterroles/${reader}`, agent, env.tokens.admin);
  await agent?.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The request's log line, by its Audit-Id, once Levee has written it (within 5 s). */
async function requestLine(l: LeveeProcess, auditId: string): Promise<Record<string, unknown> | undefined> {
  for (let i = 0; i < 100; i++) {
    await sleep(50);
    const line = l
      .output()
      .split('\n')
      .filter((x) => x.includes(auditId))
      .map((x) => JSON.parse(x) as Record<string, unknown>)
      .find((x) => x.msg === 'request');
    if (line) return line;
  }
  return undefined;
}

interface Exposition {
  /** Metric family name → type, from the # TYPE lines. */
  types: Map<string, string>;
  /** Sample name with its labels → value. */
  samples: Map<string, number>;
  /** Sample name → label names seen on it. */
  labels: Map<string, Set<string>>;
}

async function scrape(): Promise<Exposition> {
  const text = (await get(`${levee.url.origin}/metrics`, agent)).body;
  const out: Exposition = { types: new Map(), samples: new Map(), labels: new Map() };
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type) out.types.set(type[1]!, type[2]!);
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$/.exec(line);
    if (!m) continue;
    out.samples.set(m[1]! + (m[2] ?? ''), Number(m[3]));
    const names = out.labels.get(m[1]!) ?? new Set<string>();
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="/g)) names.add(l[1]!);
    out.labels.set(m[1]!, names);
  }
  return out;
}

/** The series names an exposition serves: counters and gauges by name, histograms and summaries by their parts. */
function seriesNames(e: Exposition): Set<string> {
  const names = new Set<string>();
  for (const [name, type] of e.types) {
    names.add(name);
    if (type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(name + s);
    if (type === 'summary') for (const s of ['_sum', '_count']) names.add(name + s);
  }
  return names;
}

function sample(e: Exposition, name: string, labels: Record<string, string>): number {
  for (const [key, value] of e.samples) {
    if (!key.startsWith(name + '{') && key !== name) continue;
    if (Object.entries(labels).every(([k, v]) => key.includes(`${k}="${v}"`))) return value;
  }
  return 0;
}

/** Every PromQL expression in the dashboard, template variable queries included. */
function dashboardExpressions(): string[] {
  const out: string[] = [];
  const walk = (v: unknown, key = ''): void => {
    if (typeof v === 'string' && (key === 'expr' || key === 'query' || key === 'definition')) out.push(v);
    else if (Array.isArray(v)) for (const x of v) walk(x);
    else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) walk(x, k);
  };
  walk(JSON.parse(readFileSync(DASHBOARD, 'utf8')));
  return out;
}

test('metrics exist and move: requests by code and source, watch cache events per resource', async () => {
  const before = await scrape();
  assert.equal((await get(`${levee.url.origin}/api/v1/namespaces/${ns}/configmaps?resourceVersion=0`, agent, env.tokens.admin)).status, 200);
  assert.equal((await get(`${levee.url.origin}/api/v1/namespaces/${ns}/configmaps/missing?resourceVersion=0`, agent, env.tokens.admin)).status, 404);
  assert.equal((await get(`${levee.url.origin}/api/v1/namespaces/${ns}/secrets`, agent, env.tokens.admin)).status, 200);
  for (let i = 0; i < 3; i++) {
    assert.equal((await send('POST', `${env.server}/api/v1/namespaces/${ns}/configmaps`, agent, env.tokens.admin, { metadata: { name: `cm-${i}` } })).status, 201);
  }
  let after = await scrape();
  for (let i = 0; i < 100 && sample(after, 'levee_watch_cache_events_total', { resource: 'configmaps', type: 'ADDED' }) < sample(before, 'levee_watch_cache_events_total', { resource: 'configmaps', type: 'ADDED' }) + 3; i++) {
    await sleep(50);
    after = await scrape();
  }
  const moved = (name: string, labels: Record<string, string>) => sample(after, name, labels) - sample(before, name, labels);
  assert.ok(moved('levee_watch_cache_events_total', { resource: 'configmaps', type: 'ADDED' }) >= 3);
  const cached = { verb: 'LIST', resource: 'configmaps', source: 'cache', code: '200' };
  assert.equal(moved('levee_request_total', cached), 1);
  assert.equal(moved('levee_request_duration_seconds_count', cached), 1);
  assert.equal(moved('levee_request_duration_seconds_count', { verb: 'GET', resource: 'configmaps', source: 'cache', code: '404' }), 1);
  assert.equal(moved('levee_request_duration_seconds_count', { verb: 'LIST', resource: 'secrets', source: 'upstream', code: '200' }), 1);
  assert.ok(sample(after, 'levee_cache_objects', { resource: 'configmaps' }) >= 4);
  assert.equal(sample(after, 'levee_build_info', {}), 1);
});

test('the Grafana dashboard queries only metrics Levee exports', async () => {
  // Make the labelled series appear: a cached read, a forwarded one, a consistent read, a watch.
  await get(`${levee.url.origin}/api/v1/namespaces/${ns}/configmaps`, agent, env.tokens.admin);
  await get(`${levee.url.origin}/api/v1/namespaces/${ns}/configmaps?resourceVersion=0&pretty=true`, agent, env.tokens.admin);
  const abort = new AbortController();
  const watch = await request(`${levee.url.origin}/api/v1/namespaces/${ns}/configmaps?watch=true&resourceVersion=0`, {
    dispatcher: agent,
    headers: { authorization: `Bearer ${env.tokens.admin}` },
    signal: abort.signal,
  });
  const exposition = await scrape();
  abort.abort();
  await watch.body.text().catch(() => undefined);

  const exported = seriesNames(exposition);
  const expressions = dashboardExpressions();
  assert.ok(expressions.length >= 20, 'the dashboard has its queries');
  const used = new Set<string>();
  for (const expr of expressions) {
    for (const m of expr.matchAll(/\b((?:levee|process|nodejs)_[a-z0-9_]+)(\{([^}]*)\})?/g)) {
      const name = m[1]!;
      used.add(name);
      assert.ok(exported.has(name), `the dashboard queries ${name}, which Levee does not export`);
      // Where the series has samples, the labels it is filtered by must be among its own.
      const own = exposition.labels.get(name);
      if (!own || !m[3]) continue;
      for (const l of m[3].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)/g)) {
        if (l[1] === 'job' || l[1] === 'instance') continue;
        assert.ok(own.has(l[1]!), `the dashboard filters ${name} by ${l[1]}, a label it does not have`);
      }
    }
  }
  // Every Levee metric is on the dashboard.
  for (const name of exposition.types.keys()) {
    if (!name.startsWith('levee_')) continue;
    const type = exposition.types.get(name);
    const shown = used.has(name) || (type === 'histogram' && used.has(`${name}_bucket`));
    assert.ok(shown, `${name} is exported but not on the dashboard`);
  }
});

test('request logs: request id (the client\'s Audit-Id), user, verb, resource, source, latency; never the token', async () => {
  const auditId = `audit-${suffix()}`;
  const answer = await get(`${levee.url.origin}/api/v1/namespaces/${ns}/configmaps?resourceVersion=0`, agent, env.tokens.bob, { 'audit-id': auditId });
  assert.equal(answer.status, 403);
  const line = await requestLine(levee, auditId);
  assert.ok(line, 'no request line');
  assert.deepEqual(
    { requestId: line.requestId, user: line.user, verb: line.verb, resource: line.resource, namespace: line.namespace, code: line.code, source: line.source },
    { requestId: auditId, user: 'bob', verb: 'list', resource: 'configmaps', namespace: ns, code: 403, source: 'cache' },
  );
  assert.equal(typeof line.latencyMs, 'number');
  for (const token of Object.values(env.tokens)) assert.equal(levee.output().includes(token), false, 'a token was logged');
});

test('a watch from the cache is logged when it ends, with the user its review named at the start, and leaves the long-running gauge', async () => {
  // The token's review is reused for 1 s: the watch ends 3 s after it began, when the review that
  // named its user has left the cache.
  const short = await startLevee({ kubeconfig: env.kubeconfig, tls: env.leveeServing, extra: ['--cache', 'configmaps', '--token-cache-ttl', '1s'] });
  try {
    for (let i = 0; i < 200 && (await get(`${short.url.origin}/readyz`, agent)).status !== 200; i++) await sleep(50);
    const gauge = async (): Promise<number> => {
      const text = (await get(`${short.url.origin}/metrics`, agent)).body;
      const sample = text.split('\n').find((l) => l.startsWith('levee_longrunning_requests{verb="WATCH",group="",resource="configmaps",subresource="",source="cache"}'));
      return sample ? Number(sample.split(' ').at(-1)) : 0;
    };
    const auditId = `watch-${suffix()}`;
    const watch = await request(`${short.url.origin}/api/v1/namespaces/${ns}/configmaps?watch=true&resourceVersion=0&timeoutSeconds=3`, {
      dispatcher: agent,
      headers: { authorization: `Bearer ${env.tokens.admin}`, 'audit-id': auditId },
    });
    assert.equal(watch.statusCode, 200);
    assert.equal(await gauge(), 1);
    // The watch's deadline ends it, as the apiserver ends a watch at its timeoutSeconds.
    await watch.body.text();
    const line = await requestLine(short, auditId);
    assert.ok(line, 'no request line for the watch');
    assert.deepEqual(
      { user: line.user, verb: line.verb, path: line.path, resource: line.resource, namespace: line.namespace, code: line.code, source: line.source },
      { user: 'admin', verb: 'watch', path: `/api/v1/namespaces/${ns}/configmaps`, resource: 'configmaps', namespace: ns, code: 200, source: 'cache' },
    );
    assert.equal((line.latencyMs as number) >= 3000, true, `the watch lasted ${String(line.latencyMs)} ms`);
    assert.equal(await gauge(), 0);
  } finally {
    await short.stop();
  }
});

test('start-up logs: each resource\'s sync with its rate, then the time to ready', () => {
  const lines = levee
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  for (const resource of ['configmaps', 'pods']) {
    const listed = lines.find((l) => l.msg === 'listed' && l.resource === resource);
    assert.ok(listed, `no sync line for ${resource}`);
    for (const field of ['objects', 'bytes', 'seconds', 'objectsPerSecond', 'bytesPerSecond']) assert.equal(typeof listed[field], 'number', field);
  }
  const ready = lines.find((l) => l.msg === 'cache synced: every resource listed, ready');
  assert.ok(ready);
  assert.equal(ready.resources, 2);
  assert.equal(typeof ready.seconds, 'number');
  assert.ok((ready.objects as number) >= 1);
});

interface ResourceState {
  resource: string;
  synced: boolean;
  objects: number;
  bytes: number;
  resourceVersion: string;
  window: { events: number; resumableFrom: string };
  watchers: number;
  indexes: string[];
}

test('/debug/levee/cache: per resource state, for users the apiserver allows to get the path', async () => {
  const abort = new AbortController();
  const watch = await request(`${levee.url.origin}/api/v1/namespaces/${ns}/configmaps?watch=true&resourceVersion=0`, {
    dispatcher: agent,
    headers: { authorization: `Bearer ${env.tokens.admin}` },
    signal: abort.signal,
  });
  const created = JSON.parse((await send('POST', `${env.server}/api/v1/namespaces/${ns}/configmaps`, agent, env.tokens.admin, { metadata: { name: 'debugged' } })).body) as {
    metadata: { resourceVersion: string };
  };
  try {
    let state: { resources: ResourceState[]; unsynced: string[] } | undefined;
    for (let i = 0; i < 100; i++) {
      const answer = await get(`${levee.url.origin}/debug/levee/cache`, agent, env.tokens.bob);
      assert.equal(answer.status, 200, answer.body);
      assert.match(String(answer.headers['content-type']), /^application\/json/);
      state = JSON.parse(answer.body) as typeof state;
      const cm = state!.resources.find((r) => r.resource === 'configmaps')!;
      if (BigInt(cm.resourceVersion) >= BigInt(created.metadata.resourceVersion)) break;
      await sleep(50);
    }
    assert.deepEqual(state!.resources.map((r) => r.resource), ['configmaps', 'pods']);
    assert.deepEqual(state!.unsynced, []);
    const cm = state!.resources.find((r) => r.resource === 'configmaps')!;
    assert.equal(cm.synced, true);
    assert.ok(cm.objects >= 5);
    assert.ok(cm.bytes > 0);
    assert.ok(BigInt(cm.resourceVersion) >= BigInt(created.metadata.resourceVersion));
    assert.ok(cm.window.events >= 1);
    // Each thread counts the watches it serves (README, "Workers"): ask on new connections until
    // the thread that holds this test's watch answers.
    let watchers = 0;
    for (let i = 0; i < 50 && watchers === 0; i++) {
      const fresh = new Client(levee.url.origin, { connect: { ca: readFileSync(env.caFile) } });
      const s = JSON.parse((await get(`${levee.url.origin}/debug/levee/cache`, fresh, env.tokens.bob)).body) as { resources: ResourceState[] };
      watchers = s.resources.find((r) => r.resource === 'configmaps')!.watchers;
      await fresh.close();
    }
    assert.equal(watchers, 1);
    assert.deepEqual(state!.resources.find((r) => r.resource === 'pods')!.indexes, ['spec.nodeName']);

    const one = await get(`${levee.url.origin}/debug/levee/cache/configmaps`, agent, env.tokens.bob);
    assert.equal(one.status, 200);
    assert.equal((JSON.parse(one.body) as ResourceState).resource, 'configmaps');
  } finally {
    abort.abort();
    await watch.body.text().catch(() => undefined);
  }

  // alice is refused exactly as the apiserver refuses her the same path.
  const [viaLevee, direct] = await Promise.all([
    get(`${levee.url.origin}/debug/levee/cache`, agent, env.tokens.alice),
    get(`${env.server}/debug/levee/cache`, agent, env.tokens.alice),
  ]);
  assert.equal(viaLevee.status, 403);
  assert.deepEqual(JSON.parse(viaLevee.body), JSON.parse(direct.body));
  assert.doesNotMatch(viaLevee.body, /configmaps/);

  assert.equal((await get(`${levee.url.origin}/debug/levee/cache`, agent)).status, 401);
  const unknown = await get(`${levee.url.origin}/debug/levee/nothing-here`, agent, env.tokens.bob);
  assert.deepEqual([unknown.status, unknown.body], [404, '404 page not found\n']);
  // Every other /debug path is the apiserver's.
  const [pprofViaLevee, pprofDirect] = await Promise.all([
    get(`${levee.url.origin}/debug/pprof/`, agent, env.tokens.admin),
    get(`${env.server}/debug/pprof/`, agent, env.tokens.admin),
  ]);
  assert.equal(pprofViaLevee.status, pprofDirect.status);
});
