// Custom resources are answered from Levee's cache with the apiserver's semantics, field selectors on
// a CRD version's selectableFields included, and Levee follows their CustomResourceDefinitions:
// one created after Levee started is cached (named, or matched by a pattern), one deleted is the
// apiserver's to answer again, a new preferred version is cached instead of the old one, and a
// CRD that does not exist does not keep Levee unready. Levee runs as the service account of
// deploy/rbac.yaml, with a role for the test's groups as an operator would add one.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { resolve } from 'node:path';
import { request, type Agent } from 'undici';
import { loadEnv, type TestEnv } from '../env/testenv.ts';
import { startLevee, writeKubeconfig, type LeveeProcess } from '../support/levee.ts';
import { kubectl } from '../support/kubectl.ts';
import { agentFor, get, send, suffix } from '../support/http.ts';
import { seededRandom } from '../support/random.ts';

const run = suffix();
// Groups of this run only: a shared test cluster keeps what earlier runs left.
const G = `g${run}.levee.example.com`;
const P = `p${run}.levee.example.com`;
const Q = `q${run}.levee.example.com`;
const nsA = `crd-a-${run}`;
const nsB = `crd-b-${run}`;
const role = `levee-crd-test-${run}`;
const RBAC_MANIFEST = resolve(import.meta.dirname, '../../deploy/rbac.yaml');
const CRDS = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';

let env: TestEnv;
let agent: Agent;
let levee: LeveeProcess;
const created: string[] = [];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitFor(what: string, check: () => Promise<boolean> | boolean, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return;
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}\n${levee?.output().slice(-3000)}`);
}

interface Version {
  name: string;
  served?: boolean;
  storage?: boolean;
  selectable?: string[];
  properties?: Record<string, { type: string }>;
}

function crd(plural: string, group: string, scope: 'Namespaced' | 'Cluster', versions: Version[]): Record<string, unknown> {
  const kind = plural[0]!.toUpperCase() + plural.slice(1, -1);
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${group}` },
    spec: {
      group,
      scope,
      names: { plural, singular: plural.slice(0, -1), kind, listKind: `${kind}Collection` },
      versions: versions.map((v, i) => ({
        name: v.name,
        served: v.served ?? true,
        storage: v.storage ?? i === 0,
        ...(v.selectable ? { selectableFields: v.selectable.map((jsonPath) => ({ jsonPath })) } : {}),
        schema: {
          openAPIV3Schema: {
            type: 'object',
            properties: { spec: { type: 'object', properties: v.properties ?? {} } },
          },
        },
      })),
    },
  };
}

const WIDGET_PROPERTIES = { color: { type: 'string' }, size: { type: 'integer' }, enabled: { type: 'boolean' }, shape: { type: 'string' } };

async function createCrd(body: Record<string, unknown>): Promise<void> {
  const name = (body.metadata as { name: string }).name;
  const res = await send('POST', env.server + CRDS, agent, env.tokens.admin, body);
  assert.equal(res.status, 201, res.body);
  created.push(name);
  await waitFor(`${name} established`, async () => {
    const r = JSON.parse((await get(`${env.server}${CRDS}/${name}`, agent, env.tokens.admin)).body) as { status?: { conditions?: Array<{ type: string; status: string }> } };
    return r.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') ?? false;
  });
}

async function createObject(path: string, body: unknown): Promise<void> {
  // A CRD just established may need a moment before its objects can be created.
  for (let i = 0; ; i++) {
    const res = await send('POST', env.server + path, agent, env.tokens.admin, body);
    if (res.status === 201) return;
    if (i > 50) assert.fail(`${path}: ${res.status} ${res.body}`);
    await sleep(100);
  }
}

/** A request through Levee, tagged with an Audit-Id so its log line tells where it was answered. */
async function viaLevee(path: string, token = env.tokens.admin): Promise<{ status: number; body: string; id: string }> {
  const id = randomUUID();
  const r = await get(levee.url.origin + path, agent, token, { 'audit-id': id, 'user-agent': 'levee-test' });
  return { status: r.status, body: r.body, id };
}

/** Where Levee answered requests: "cache" or "upstream" each, from their request log lines. */
async function sources(ids: readonly string[]): Promise<string[]> {
  const found = new Map<string, string>();
  await waitFor(`the log lines of ${ids.length} requests`, () => {
    for (const line of levee.output().split('\n')) {
      const m = /"requestId":"([^"]+)"/.exec(line);
      if (m && ids.includes(m[1]!)) found.set(m[1]!, (JSON.parse(line) as { source: string }).source);
    }
    return ids.every((id) => found.has(id));
  }, 10_000);
  return ids.map((id) => found.get(id)!);
}

async function sourceOf(id: string): Promise<string> {
  return (await sources([id]))[0]!;
}

async function metric(name: string, labels: string): Promise<number> {
  const text = (await get(`${levee.url.origin}/metrics`, agent)).body;
  const escaped = labels.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const m = new RegExp(`^${name}\\{${escaped}\\} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

interface DebugState {
  resources: Array<{ resource: string; version: string; synced: boolean; objects: number }>;
  unsynced: string[];
  waiting: string[];
}

async function debugState(): Promise<DebugState> {
  const r = await get(`${levee.url.origin}/debug/levee/cache`, agent, env.tokens.admin);
  assert.equal(r.status, 200, r.body);
  return JSON.parse(r.body) as DebugState;
}

async function cachedAt(resource: string, version: string): Promise<boolean> {
  return (await debugState()).resources.some((r) => r.resource === resource && r.version === version && r.synced);
}

interface List {
  items: Array<{ metadata: { name: string; namespace?: string } }>;
  metadata: { resourceVersion: string; continue?: string };
}

/** Every page of a list, through Levee or directly; the concatenated items and the statuses. */
async function readAll(origin: string, path: string, params: URLSearchParams): Promise<{ status: number; items: unknown[]; body: string; ids: string[] }> {
  const items: unknown[] = [];
  const ids: string[] = [];
  let cont = '';
  for (let page = 0; page < 100; page++) {
    const p = new URLSearchParams(params);
    if (cont) {
      p.set('continue', cont);
      p.delete('resourceVersion');
      p.delete('resourceVersionMatch');
    }
    const url = `${path}?${p.toString()}`;
    const r = origin === levee.url.origin ? await viaLevee(url) : { ...(await get(origin + url, agent, env.tokens.admin, { 'user-agent': 'levee-test' })), id: '' };
    if (r.id) ids.push(r.id);
    if (r.status !== 200) return { status: r.status, items, body: r.body, ids };
    const list = JSON.parse(r.body) as List;
    items.push(...list.items);
    cont = list.metadata.continue ?? '';
    if (!cont) break;
  }
  return { status: 200, items, body: '', ids };
}

before(async () => {
  env = loadEnv();
  agent = agentFor(env.caFile);
  const applied = await kubectl(env.kubectl, env.kubeconfig, ['apply', '-f', RBAC_MANIFEST]);
  assert.equal(applied.code, 0, applied.stderr);
  // What an operator adds for custom resources cached by name or by pattern.
  const rbac = `${env.server}/apis/rbac.authorization.k8s.io/v1`;
  assert.equal(
    (await send('POST', `${rbac}/clusterroles`, agent, env.tokens.admin, { metadata: { name: role }, rules: [{ apiGroups: [G, P, Q], resources: ['*'], verbs: ['get', 'list', 'watch'] }] })).status,
    201,
  );
  assert.equal(
    (
      await send('POST', `${rbac}/clusterrolebindings`, agent, env.tokens.admin, {
        metadata: { name: role },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
        subjects: [{ kind: 'ServiceAccount', name: 'levee', namespace: 'levee' }],
      })
    ).status,
    201,
  );
  const token = (
    JSON.parse(
      (
        await send('POST', `${env.server}/api/v1/namespaces/levee/serviceaccounts/levee/token`, agent, env.tokens.admin, {
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenRequest',
          spec: { expirationSeconds: 3600 },
        })
      ).body,
    ) as { status: { token: string } }
  ).status.token;

  await createCrd(crd('widgets', G, 'Namespaced', [{ name: 'v1', selectable: ['.spec.color', '.spec.size', '.spec.enabled'], properties: WIDGET_PROPERTIES }]));
  await createCrd(crd('stations', G, 'Cluster', [{ name: 'v1', selectable: ['.spec.color'], properties: WIDGET_PROPERTIES }]));
  for (const ns of [nsA, nsB]) assert.equal((await send('POST', `${env.server}/api/v1/namespaces`, agent, env.tokens.admin, { metadata: { name: ns } })).status, 201);
  const random = seededRandom(11);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
  const creates: Array<Promise<void>> = [];
  for (const ns of [nsA, nsB]) {
    for (let i = 0; i < 15; i++) {
      const spec: Record<string, unknown> = {};
      if (random() < 0.8) spec.color = pick(['red', 'blue', 'green']);
      // An int64 beyond 2^53 (written as JSON text: a JavaScript number cannot hold it).
      if (random() < 0.7) spec.size = pick([0, 1, 2, 3, 'BIG']);
      if (random() < 0.7) spec.enabled = random() < 0.5;
      const labels: Record<string, string> = { app: pick(['a', 'b']) };
      if (random() < 0.5) labels.tier = pick(['front', 'back']);
      const body = JSON.stringify({ apiVersion: `${G}/v1`, kind: 'Widget', metadata: { name: `w-${i}`, labels }, spec }).replace('"BIG"', '9007199254740993');
      creates.push(createObject(`/apis/${G}/v1/namespaces/${ns}/widgets`, body));
    }
  }
  for (let i = 0; i < 6; i++) {
    creates.push(createObject(`/apis/${G}/v1/stations`, { apiVersion: `${G}/v1`, kind: 'Station', metadata: { name: `s-${run}-${i}` }, spec: i % 3 ? { color: pick(['red', 'blue']) } : {} }));
  }
  await Promise.all(creates);

  levee = await startLevee({
    kubeconfig: writeKubeconfig(env.server, env.caFile, token),
    tls: env.leveeServing,
    extra: ['--cache', `configmaps,widgets.${G},stations.${G},gizmos.${G},*.${P}`],
  });
  // Not /readyz: whether it turns ready is a test of its own.
  await waitFor('the custom resources synced', async () => (await cachedAt(`widgets.${G}`, 'v1')) && (await cachedAt(`stations.${G}`, 'v1')));
});

after(async () => {
  await levee?.stop();
  for (const name of created) await send('DELETE', `${env.server}${CRDS}/${name}`, agent, env.tokens.admin);
  const rbac = `${env.server}/apis/rbac.authorization.k8s.io/v1`;
  await send('DELETE', `${rbac}/clusterrolebindings/${role}`, agent, env.tokens.admin);
  await send('DELETE', `${rbac}/clusterroles/${role}`, agent, env.tokens.admin);
  await agent?.close();
});

test('a configured CRD that does not exist does not hold readiness, and says so', async () => {
  let ready = await get(`${levee.url.origin}/readyz?verbose`, agent);
  for (let i = 0; i < 50 && ready.status !== 200; i++) {
    await sleep(100);
    ready = await get(`${levee.url.origin}/readyz?verbose`, agent);
  }
  assert.equal(ready.status, 200, ready.body);
  assert.match(ready.body, new RegExp(`\\[\\+\\]cache-synced ok \\(waiting for the resource to exist: gizmos\\.${G.replace(/\./g, '\\.')}\\)`));
  const state = await debugState();
  assert.deepEqual(state.waiting, [`gizmos.${G}`]);
  assert.deepEqual(state.unsynced, [`gizmos.${G}: waiting for the resource to exist (no CustomResourceDefinition gizmos.${G})`]);
  assert.deepEqual(state.resources.map((r) => r.resource).sort(), ['configmaps', `stations.${G}`, `widgets.${G}`]);
});

test('LIST and GET of custom resources from the cache: the same items as the apiserver, with label and field selectors', async () => {
  const listRV = (JSON.parse((await get(`${env.server}/apis/${G}/v1/widgets?limit=1`, agent, env.tokens.admin)).body) as List).metadata.resourceVersion;
  await waitFor('the cache to reach the objects', async () => (await viaLevee(`/apis/${G}/v1/widgets?resourceVersion=${listRV}&resourceVersionMatch=NotOlderThan`)).status === 200);
  const random = seededRandom(5);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
  const labelSelectors = ['', 'app=a', 'app!=a', 'tier', '!tier', 'app=b,tier in (front)'];
  const fieldSelectors = [
    '', 'metadata.name=w-3', 'metadata.name!=w-3', 'metadata.namespace=' + nsB, 'spec.color=red', 'spec.color!=red', 'spec.color=',
    'spec.size=3', 'spec.size=0', 'spec.size=', 'spec.size=9007199254740993', 'spec.enabled=true', 'spec.enabled=false', 'spec.enabled=',
    'spec.color=blue,spec.size!=2', 'metadata.namespace=' + nsA + ',spec.enabled!=true',
  ];
  const ids: string[] = [];
  let cases = 0;
  for (const fs of fieldSelectors) {
    for (let k = 0; k < 3; k++) {
      const ns = pick([nsA, nsB, '']);
      const path = ns ? `/apis/${G}/v1/namespaces/${ns}/widgets` : `/apis/${G}/v1/widgets`;
      const params = new URLSearchParams();
      const ls = pick(labelSelectors);
      if (ls) params.set('labelSelector', ls);
      if (fs) params.set('fieldSelector', fs);
      if (k === 0) params.set('resourceVersion', '0');
      else {
        params.set('resourceVersion', listRV);
        params.set('resourceVersionMatch', 'NotOlderThan');
      }
      if (k === 2) params.set('limit', String(pick([1, 4, 7])));
      const [direct, through] = await Promise.all([readAll(env.server, path, params), readAll(levee.url.origin, path, params)]);
      const what = `${path}?${params.toString()}`;
      assert.equal(through.status, direct.status, `${what}: ${through.body} vs ${direct.body}`);
      assert.deepEqual(through.items, direct.items, `items differ for ${what}`);
      ids.push(...through.ids);
      cases++;
    }
  }
  // Every page of every case came from the cache.
  assert.ok(ids.length >= cases);
  assert.deepEqual(new Set(await sources(ids)), new Set(['cache']));

  // The list as the apiserver writes it, byte for byte (its resourceVersion aside).
  const path = `/apis/${G}/v1/namespaces/${nsA}/widgets?resourceVersion=0&fieldSelector=spec.color%3Dred`;
  const [direct, through] = await Promise.all([get(env.server + path, agent, env.tokens.admin), viaLevee(path)]);
  const norm = (s: string) => s.replace(/"resourceVersion":"\d+"\}\}\n$/, '"resourceVersion":"N"}}\n');
  assert.equal(norm(through.body), norm(direct.body));
  assert.equal(await sourceOf(through.id), 'cache');

  // GETs, found and not, namespaced and cluster-scoped: the same bytes.
  for (const p of [`/apis/${G}/v1/namespaces/${nsA}/widgets/w-1`, `/apis/${G}/v1/namespaces/${nsB}/widgets/absent`, `/apis/${G}/v1/stations/s-${run}-1`, `/apis/${G}/v1/stations/absent`]) {
    const [a, b] = await Promise.all([get(`${env.server}${p}?resourceVersion=0`, agent, env.tokens.admin), viaLevee(`${p}?resourceVersion=0`)]);
    assert.deepEqual([b.status, b.body], [a.status, a.body], p);
    assert.equal(await sourceOf(b.id), 'cache', p);
  }
  // A cluster-scoped resource selects by its own selectable field too.
  for (const fs of ['spec.color=red', 'spec.color=', 'metadata.name=s-' + run + '-2']) {
    const params = new URLSearchParams({ resourceVersion: '0', fieldSelector: fs });
    const [direct, through] = await Promise.all([readAll(env.server, `/apis/${G}/v1/stations`, params), readAll(levee.url.origin, `/apis/${G}/v1/stations`, params)]);
    assert.equal(through.status, 200);
    assert.deepEqual(through.items, direct.items, fs);
    assert.equal(await sourceOf(through.ids[0]!), 'cache', fs);
  }
});

test('field labels a custom resource does not have: the apiserver\'s own 400', async () => {
  const invalid = await metric('levee_read_forwarded_total', 'reason="invalid"');
  const cases = [
    `/apis/${G}/v1/namespaces/${nsA}/widgets?resourceVersion=0&fieldSelector=spec.bogus%3D1`,
    `/apis/${G}/v1/widgets?resourceVersion=0&fieldSelector=status.phase%3DReady`,
    `/apis/${G}/v1/widgets?resourceVersion=0&fieldSelector=spec.color%3Dred,spec.shape%3Dround`,
    // Cluster-scoped: not even metadata.namespace.
    `/apis/${G}/v1/stations?resourceVersion=0&fieldSelector=metadata.namespace%3Dx`,
    `/apis/${G}/v1/namespaces/${nsA}/widgets?watch=true&resourceVersion=0&fieldSelector=spec.bogus%3D1`,
  ];
  for (const p of cases) {
    const [a, b] = await Promise.all([get(env.server + p, agent, env.tokens.admin), viaLevee(p)]);
    assert.equal(b.status, 400, `${p}: ${b.body}`);
    assert.deepEqual([b.status, b.body], [a.status, a.body], p);
    assert.match(b.body, /field label not supported: /);
    assert.equal(await sourceOf(b.id), 'upstream', p);
  }
  // Each forward counted with its reason, the watch's too.
  assert.equal(await metric('levee_read_forwarded_total', 'reason="invalid"'), invalid + cases.length);
});

interface WatchEvent {
  type: string;
  object: { metadata: { name: string; resourceVersion?: string }; spec?: { color?: string } };
}

function watch(origin: string, path: string): { id: string; events: WatchEvent[]; stop(): void; ended: Promise<number> } {
  const events: WatchEvent[] = [];
  const abort = new AbortController();
  const id = randomUUID();
  const ended = (async () => {
    const res = await request(origin + path, { dispatcher: agent, headers: { authorization: `Bearer ${env.tokens.admin}`, accept: 'application/json', 'audit-id': id }, signal: abort.signal });
    assert.equal(res.statusCode, 200);
    let buf = '';
    try {
      for await (const chunk of res.body) {
        buf += (chunk as Buffer).toString();
        let nl;
        while ((nl = buf.indexOf('\n')) !== -1) {
          events.push(JSON.parse(buf.slice(0, nl)) as WatchEvent);
          buf = buf.slice(nl + 1);
        }
      }
      return 0;
    } catch {
      return 1; // aborted by stop()
    }
  })();
  return { id, events, stop: () => abort.abort(), ended };
}

test('WATCH of custom resources from the cache: the same events as the apiserver, selector transitions included', async () => {
  const base = `/apis/${G}/v1/namespaces/${nsA}/widgets`;
  const rv = (JSON.parse((await get(`${env.server}${base}?limit=1`, agent, env.tokens.admin)).body) as List).metadata.resourceVersion;
  const paths = [`${base}?watch=true&resourceVersion=${rv}&fieldSelector=spec.color%3Dred`, `${base}?watch=true&resourceVersion=${rv}&fieldSelector=spec.size%3D3&labelSelector=app%3Da`];
  const watchers = await metric('levee_watchers', `resource="widgets.${G}"`);
  const pairs = paths.map((p) => ({ p, direct: watch(env.server, p), through: watch(levee.url.origin, p) }));
  // Every event, to know when the apiserver has sent all of them.
  const everything = watch(env.server, `${base}?watch=true&resourceVersion=${rv}`);
  await waitFor('the watches to be served from the cache', async () => (await metric('levee_watchers', `resource="widgets.${G}"`)) === watchers + 2);
  const patch = (name: string, spec: unknown) => send('PATCH', `${env.server}${base}/${name}`, agent, env.tokens.admin, { metadata: { labels: { app: 'a' } }, spec }, 'application/merge-patch+json');
  await patch('w-1', { color: 'red', size: 3 });
  await patch('w-2', { color: 'blue' });
  await patch('w-1', { color: 'green' });
  await patch('w-3', { size: 3, color: 'red' });
  await patch('w-3', { size: 2 });
  const last = (JSON.parse((await patch('w-4', { color: 'red' })).body) as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
  const shape = (evs: WatchEvent[]) => evs.filter((e) => e.type !== 'BOOKMARK').map((e) => [e.type, e.object.metadata.name, e.object.metadata.resourceVersion]);
  await waitFor('the events', () => everything.events.some((e) => e.object.metadata.resourceVersion === last) && pairs.every(({ direct, through }) => shape(through.events).length >= shape(direct.events).length), 10_000);
  // Anything late or extra would show as a difference.
  await sleep(300);
  everything.stop();
  for (const { p, direct, through } of pairs) {
    direct.stop();
    through.stop();
    assert.deepEqual(shape(through.events), shape(direct.events), p);
    assert.ok(shape(direct.events).length >= 2, p);
  }
  // w-1 left the red ones: the watch from the cache saw it leave, as the apiserver's did.
  assert.ok(shape(pairs[0]!.through.events).some(([type, name]) => type === 'DELETED' && name === 'w-1'));
  assert.equal(await sourceOf(pairs[0]!.through.id), 'cache');
  assert.equal(await sourceOf(pairs[1]!.through.id), 'cache');
});

test('a CRD created after Levee started is cached once it exists; deleted, its reads are the apiserver\'s again', async () => {
  const name = `gizmos.${G}`;
  const list = `/apis/${G}/v1/namespaces/${nsA}/gizmos`;
  // Before it exists: the apiserver's 404, forwarded.
  const [a0, b0] = await Promise.all([get(`${env.server}${list}?resourceVersion=0`, agent, env.tokens.admin), viaLevee(`${list}?resourceVersion=0`)]);
  assert.deepEqual([b0.status, b0.body], [a0.status, a0.body]);
  assert.equal(b0.status, 404);

  await createCrd(crd('gizmos', G, 'Namespaced', [{ name: 'v1', selectable: ['.spec.color'], properties: WIDGET_PROPERTIES }]));
  for (let i = 0; i < 4; i++) await createObject(list, { apiVersion: `${G}/v1`, kind: 'Gizmo', metadata: { name: `g-${i}` }, spec: { color: i % 2 ? 'red' : 'blue' } });
  const rv = (JSON.parse((await get(`${env.server}${list}?limit=1`, agent, env.tokens.admin)).body) as List).metadata.resourceVersion;
  await waitFor(`${name} cached`, () => cachedAt(name, 'v1'));
  assert.deepEqual((await debugState()).waiting, []);
  const path = `${list}?resourceVersion=${rv}&resourceVersionMatch=NotOlderThan&fieldSelector=spec.color%3Dred`;
  const [a1, b1] = await Promise.all([get(env.server + path, agent, env.tokens.admin), viaLevee(path)]);
  assert.equal(b1.status, 200, b1.body);
  assert.deepEqual((JSON.parse(b1.body) as List).items, (JSON.parse(a1.body) as List).items);
  assert.deepEqual((JSON.parse(b1.body) as List).items.map((i) => i.metadata.name), ['g-1', 'g-3']);
  assert.equal(await sourceOf(b1.id), 'cache');

  // A watch served from this cache ends when the resource goes, as the apiserver ends its own.
  const w = watch(levee.url.origin, `${list}?watch=true&resourceVersion=${rv}`);
  await waitFor('the watch to be served from the cache', async () => (await metric('levee_watchers', `resource="${name}"`)) === 1);
  assert.equal((await send('DELETE', `${env.server}${CRDS}/${name}`, agent, env.tokens.admin)).status, 200);
  await waitFor(`${name} gone from the apiserver`, async () => (await get(`${env.server}${CRDS}/${name}`, agent, env.tokens.admin)).status === 404);
  await waitFor(`${name} no longer cached`, async () => !(await debugState()).resources.some((r) => r.resource === name));
  assert.equal(await w.ended, 0, 'the watch ended by itself');
  const stopped = new RegExp(`"resource":"${name.replace(/\./g, '\\.')}"[^\n]*"msg":"stopped caching custom resource"`);
  await waitFor('the stop in the log (written within 250 ms)', () => stopped.test(levee.output()), 5_000);
  const stoppedAt = levee.output().length;
  assert.deepEqual((await debugState()).waiting, [name]);
  for (const p of [`${list}?resourceVersion=0`, `${list}/g-1?resourceVersion=0`, `${list}?resourceVersion=0&fieldSelector=spec.color%3Dred`]) {
    const [a, b] = await Promise.all([get(env.server + p, agent, env.tokens.admin), viaLevee(p)]);
    assert.deepEqual([b.status, b.body], [a.status, a.body], p);
    assert.equal(b.status, 404, p);
    assert.equal(await sourceOf(b.id), 'upstream', p);
  }
  assert.doesNotMatch((await get(`${levee.url.origin}/metrics`, agent)).body, new RegExp(`levee_cache_objects\\{resource="${name.replace(/\./g, '\\.')}"\\}`));
  // Stopped, not retrying against a resource that is gone.
  await sleep(2_000);
  assert.doesNotMatch(levee.output().slice(stoppedAt), new RegExp(`"resource":"${name.replace(/\./g, '\\.')}"[^\n]*"msg":"reflector error"`));
  created.splice(created.indexOf(name), 1);
});

test('a CRD matched by a pattern is cached once it exists; one the pattern does not match is not', async () => {
  await createCrd(crd('things', P, 'Namespaced', [{ name: 'v1alpha1', selectable: ['.spec.size'], properties: WIDGET_PROPERTIES }]));
  await createCrd(crd('others', Q, 'Namespaced', [{ name: 'v1', properties: WIDGET_PROPERTIES }]));
  const list = `/apis/${P}/v1alpha1/namespaces/${nsB}/things`;
  for (let i = 0; i < 5; i++) await createObject(list, { apiVersion: `${P}/v1alpha1`, kind: 'Thing', metadata: { name: `t-${i}` }, spec: { size: i % 3 } });
  const rv = (JSON.parse((await get(`${env.server}${list}?limit=1`, agent, env.tokens.admin)).body) as List).metadata.resourceVersion;
  await waitFor(`things.${P} cached`, () => cachedAt(`things.${P}`, 'v1alpha1'));
  for (const fs of ['spec.size=1', 'spec.size!=0', 'metadata.name=t-4']) {
    const path = `${list}?resourceVersion=${rv}&resourceVersionMatch=NotOlderThan&fieldSelector=${encodeURIComponent(fs)}`;
    const [a, b] = await Promise.all([get(env.server + path, agent, env.tokens.admin), viaLevee(path)]);
    assert.equal(b.status, 200, b.body);
    assert.deepEqual((JSON.parse(b.body) as List).items, (JSON.parse(a.body) as List).items, fs);
    assert.equal(await sourceOf(b.id), 'cache', fs);
  }
  await sleep(500);
  const state = await debugState();
  assert.equal(state.resources.some((r) => r.resource === `others.${Q}`), false);
  assert.deepEqual(state.waiting, [`gizmos.${G}`]);
});

test('a new preferred version of a CRD is cached instead of the old one, with its own selectable fields', async () => {
  const name = `widgets.${G}`;
  const v2 = crd('widgets', G, 'Namespaced', [
    { name: 'v1', storage: false, selectable: ['.spec.color', '.spec.size', '.spec.enabled'], properties: WIDGET_PROPERTIES },
    // v2 drops size. (Its schema must differ from v1's anyway: the apiserver hoists identical
    // per-version schemas to one, then refuses per-version selectableFields for want of a schema.)
    { name: 'v2', storage: true, selectable: ['.spec.color', '.spec.shape'], properties: { color: { type: 'string' }, enabled: { type: 'boolean' }, shape: { type: 'string' } } },
  ]);
  const current = JSON.parse((await get(`${env.server}${CRDS}/${name}`, agent, env.tokens.admin)).body) as { metadata: { resourceVersion: string } };
  (v2.metadata as Record<string, unknown>).resourceVersion = current.metadata.resourceVersion;
  const updated = await request(`${env.server}${CRDS}/${name}`, {
    method: 'PUT',
    dispatcher: agent,
    headers: { authorization: `Bearer ${env.tokens.admin}`, 'content-type': 'application/json' },
    body: JSON.stringify(v2),
  });
  assert.equal(updated.statusCode, 200, await updated.body.text());
  await waitFor(`${name} cached at v2`, () => cachedAt(name, 'v2'));
  const anew = new RegExp(`"resource":"${name.replace(/\./g, '\\.')}","version":"v2"[^\n]*"msg":"caching custom resource anew"`);
  await waitFor('the restart in the log (written within 250 ms)', () => anew.test(levee.output()), 5_000);
  await createObject(`/apis/${G}/v2/namespaces/${nsA}/widgets`, { apiVersion: `${G}/v2`, kind: 'Widget', metadata: { name: 'round' }, spec: { color: 'red', shape: 'round' } });
  const rv = (JSON.parse((await get(`${env.server}/apis/${G}/v2/widgets?limit=1`, agent, env.tokens.admin)).body) as List).metadata.resourceVersion;
  const fresh = `resourceVersion=${rv}&resourceVersionMatch=NotOlderThan`;

  // v2 from the cache, with v2's selectable fields.
  for (const fs of ['spec.shape=round', 'spec.color=red', 'spec.shape=']) {
    const path = `/apis/${G}/v2/widgets?${fresh}&fieldSelector=${encodeURIComponent(fs)}`;
    const [a, b] = await Promise.all([get(env.server + path, agent, env.tokens.admin), viaLevee(path)]);
    assert.equal(b.status, 200, b.body);
    assert.deepEqual((JSON.parse(b.body) as List).items, (JSON.parse(a.body) as List).items, fs);
    assert.equal(await sourceOf(b.id), 'cache', fs);
  }
  const [a2, b2] = await Promise.all([get(`${env.server}/apis/${G}/v2/namespaces/${nsA}/widgets/round?resourceVersion=0`, agent, env.tokens.admin), viaLevee(`/apis/${G}/v2/namespaces/${nsA}/widgets/round?resourceVersion=0`)]);
  assert.deepEqual([b2.status, b2.body], [a2.status, a2.body]);
  assert.equal(await sourceOf(b2.id), 'cache');

  // spec.size is v1's, not v2's: the apiserver's 400.
  const noSize = `/apis/${G}/v2/widgets?resourceVersion=0&fieldSelector=spec.size%3D3`;
  const [a3, b3] = await Promise.all([get(env.server + noSize, agent, env.tokens.admin), viaLevee(noSize)]);
  assert.deepEqual([b3.status, b3.body], [a3.status, a3.body]);
  assert.equal(b3.status, 400);

  // v1 is still served, by the apiserver (which converts); Levee no longer holds it.
  const byVersion = await metric('levee_read_forwarded_total', 'reason="version"');
  const v1 = `/apis/${G}/v1/widgets?${fresh}&fieldSelector=spec.size%3D3`;
  const [a4, b4] = await Promise.all([get(env.server + v1, agent, env.tokens.admin), viaLevee(v1)]);
  assert.equal(b4.status, 200, b4.body);
  assert.deepEqual((JSON.parse(b4.body) as List).items, (JSON.parse(a4.body) as List).items);
  assert.equal(await sourceOf(b4.id), 'upstream');
  assert.equal(await metric('levee_read_forwarded_total', 'reason="version"'), byVersion + 1);
});

test('a refusal from the cache is written as the apiserver\'s filters write it, whatever the resource serves', async () => {
  // bob may not list widgets. The apiserver refuses in its authorization filter, which negotiates
  // the error with every serializer it has: protobuf first here, though widgets are served in
  // JSON only; and indented JSON when nothing acceptable is asked for.
  for (const accept of ['application/vnd.kubernetes.protobuf, application/json', 'application/json', 'application/json;as=Table;v=v1;g=meta.k8s.io']) {
    const path = `/apis/${G}/v1/namespaces/${nsA}/widgets?resourceVersion=0`;
    const ask = async (origin: string) => {
      const res = await request(origin + path, { dispatcher: agent, headers: { authorization: `Bearer ${env.tokens.bob}`, accept } });
      return { status: res.statusCode, type: res.headers['content-type'], body: Buffer.from(await res.body.arrayBuffer()).toString('base64') };
    };
    const [a, b] = await Promise.all([ask(env.server), ask(levee.url.origin)]);
    assert.equal(a.status, 403, accept);
    assert.deepEqual(b, a, accept);
  }
});
