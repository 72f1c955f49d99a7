// The cache answers GET and LIST exactly as the apiserver does. The same randomized requests
// (namespaces, label and field selectors including invalid ones, limits and continue, every
// resourceVersion mode) go to the apiserver directly and through Levee; the items, their order and
// the errors must be the same. Pages are followed to the end on both sides: Levee honours `limit`
// with resourceVersion=0 where the apiserver ignores it, so the concatenations are compared.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Agent, request, type Dispatcher } from 'undici';
import { loadEnv, stopApiserver, startApiserver, type TestEnv } from '../env/testenv.ts';
import { startLevee, type LeveeProcess } from '../support/levee.ts';
import { agentFor, get, send, suffix } from '../support/http.ts';
import { seededRandom } from '../support/random.ts';
import { createNamespace, createNodes, deleteNodes, NO_SCHEDULER } from '../support/cluster.ts';

let env: TestEnv;
let levee: LeveeProcess;
let agent: Agent;
const run = suffix();
const namespaces = [`cache-a-${run}`, `cache-b-${run}`, `cache-c-${run}`];
// The nodes pods are bound to: Node objects, or the pod garbage collector would delete the pods.
const NODES = ['node-1', 'node-2', 'node-3'];
let createdNodes: string[] = [];

const rng = seededRandom;

async function waitReady(l: LeveeProcess): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if ((await get(`${l.url.origin}/readyz`, agent)).status === 200) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`levee never became ready:\n${l.output().slice(-2000)}`);
}

before(async () => {
  env = loadEnv();
  agent = agentFor(env.caFile);
  const random = rng(7);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
  createdNodes = await createNodes(env, agent, NODES);
  for (const ns of namespaces) {
    await createNamespace(env, agent, ns, { suite: 'cache' });
    const creates: Array<Promise<unknown>> = [];
    for (let i = 0; i < 30; i++) {
      // `run` keeps cluster-wide queries to this run's objects: a shared test cluster holds those of
      // earlier runs and of other tests, and the controllers' own.
      const labels: Record<string, string> = { run, app: pick(['a', 'b', 'c', 'd']) };
      if (random() < 0.6) labels.tier = pick(['front', 'back']);
      creates.push(send('POST', `${env.server}/api/v1/namespaces/${ns}/configmaps`, agent, env.tokens.admin, { metadata: { name: `cm-${i}`, labels }, data: { i: String(i) } }));
      // Unbound pods stay unbound and Pending: no scheduler of this name runs.
      const spec: Record<string, unknown> = { schedulerName: NO_SCHEDULER, containers: [{ name: 'c', image: 'registry.example/app:1' }] };
      if (random() < 0.8) spec.nodeName = pick(NODES);
      if (i < 20) creates.push(send('POST', `${env.server}/api/v1/namespaces/${ns}/pods`, agent, env.tokens.admin, { metadata: { name: `pod-${i}`, labels }, spec }));
    }
    for (const r of (await Promise.all(creates)) as Array<{ status: number; body: string }>) assert.equal(r.status, 201, r.body);
  }
  levee = await startLevee({ kubeconfig: env.kubeconfig, tls: env.leveeServing, extra: ['--cache', 'pods,configmaps,namespaces'] });
  await waitReady(levee);
});

after(async () => {
  await levee?.stop();
  await deleteNodes(env, agent, createdNodes);
  await agent?.close();
});

interface Answer {
  status: number;
  pages: Array<{ items: unknown[]; remaining?: number; hasContinue: boolean }>;
  error?: unknown;
}

/** Follows continue tokens to the end; stops at the first error. */
async function readAll(origin: string, path: string, params: URLSearchParams, dispatcher: Dispatcher = agent): Promise<Answer> {
  const pages: Answer['pages'] = [];
  let cont = '';
  for (let page = 0; page < 200; page++) {
    const p = new URLSearchParams(params);
    if (cont) {
      p.set('continue', cont);
      // With a continue token the resourceVersion is the token's; the apiserver refuses another.
      p.delete('resourceVersion');
      p.delete('resourceVersionMatch');
    }
    const r = await get(`${origin}${path}?${p.toString()}`, dispatcher, env.tokens.admin, { 'user-agent': 'levee-test' });
    const body = JSON.parse(r.body) as { items?: unknown[]; metadata?: { continue?: string; remainingItemCount?: number }; kind?: string };
    if (r.status !== 200) {
      const s = body as { code?: number; reason?: string; message?: string };
      return { status: r.status, pages, error: { code: s.code, reason: s.reason, message: s.message } };
    }
    cont = body.metadata?.continue ?? '';
    pages.push({ items: body.items ?? [], remaining: body.metadata?.remainingItemCount, hasContinue: cont !== '' });
    if (!cont) break;
  }
  return { status: 200, pages };
}

const items = (a: Answer) => a.pages.flatMap((p) => p.items);

// Over HTTP/1.1 and over HTTP/2 (client-go's protocol, which Levee serves on another code path).
for (const protocol of ['HTTP/1.1', 'HTTP/2'] as const) {
  test(`randomized GET and LIST over ${protocol}: the same items in the same order, the same errors`, async () => {
    const h2 = protocol === 'HTTP/2' ? new Agent({ connect: { ca: readFileSync(env.caFile) }, allowH2: true }) : undefined;
    try {
      await differential(h2 ?? agent, protocol === 'HTTP/2' ? 43 : 42);
    } finally {
      await h2?.close();
    }
  });
}

async function differential(dispatcher: Dispatcher, seed: number): Promise<void> {
  const agent = dispatcher;
  const random = rng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
  // The resourceVersion a client last saw through Levee: its cache's own, per resource. Not a list's
  // resourceVersion from the apiserver, which is etcd's revision, moved by every write anywhere (the
  // control plane's leases, every few seconds): Levee holds no snapshot that new until its watch
  // catches up, at its next bookmark, so such reads are forwarded, correct but not the cache under
  // test. Asked again for every case, so it stays within the 75 s of snapshots Levee keeps.
  const seenRV = async (resource: 'pods' | 'configmaps'): Promise<string> =>
    (JSON.parse((await get(`${levee.url.origin}/api/v1/${resource}?resourceVersion=0&limit=1`, dispatcher, env.tokens.admin)).body) as { metadata: { resourceVersion: string } }).metadata.resourceVersion;

  const labelSelectors = ['', 'app=a', 'app!=a', 'app in (a,b)', 'app notin (c)', 'tier', '!tier', 'app=b,tier=front', 'tier in (back)', 'app=a,!tier', 'bad key!', 'app==', 'app in ()'];
  const podFields = ['', 'spec.nodeName=node-1', 'spec.nodeName!=node-2', 'spec.nodeName=', 'status.phase=Pending', 'metadata.name=pod-3', 'spec.host=node-3', 'spec.nodeName=node-1,status.phase!=Running', 'bogus.field=1', 'spec.nodeName=node-1=x'];
  const cmFields = ['', 'metadata.name=cm-7', 'metadata.namespace!=x', 'data.i=1'];
  let compared = 0;
  for (let i = 0; i < 160; i++) {
    const resource = pick(['pods', 'configmaps'] as const);
    const listRV = await seenRV(resource);
    const ns = pick([...namespaces, '']);
    const path = ns ? `/api/v1/namespaces/${ns}/${resource}` : `/api/v1/${resource}`;
    const params = new URLSearchParams();
    const ls = pick(labelSelectors);
    if (ls) params.set('labelSelector', ls);
    const fs = pick(resource === 'pods' ? podFields : cmFields);
    if (fs) params.set('fieldSelector', ns === '' && !fs ? `metadata.namespace!=kube-system` : fs);
    if (ns === '') params.set('labelSelector', ls ? `${ls},run=${run}` : `run=${run}`); // stay within this run's objects
    const limit = pick([0, 1, 7, 50]);
    if (limit) params.set('limit', String(limit));
    const mode = pick(['0', 'notOlderThan', 'rvNoMatch', 'exact', 'unset', 'exact0', 'badrv']);
    if (mode === '0') params.set('resourceVersion', '0');
    if (mode === 'notOlderThan') {
      params.set('resourceVersion', listRV);
      params.set('resourceVersionMatch', 'NotOlderThan');
    }
    if (mode === 'rvNoMatch') params.set('resourceVersion', listRV);
    if (mode === 'exact') {
      params.set('resourceVersion', listRV);
      params.set('resourceVersionMatch', 'Exact');
    }
    if (mode === 'exact0') {
      params.set('resourceVersion', '0');
      params.set('resourceVersionMatch', 'Exact');
    }
    if (mode === 'badrv') params.set('resourceVersion', 'abc');
    // Namespaced lists of namespaces-level objects only: every object here was created before listRV.
    const [direct, viaLevee] = await Promise.all([readAll(env.server, path, params, dispatcher), readAll(levee.url.origin, path, params, dispatcher)]);
    const what = `${path}?${params.toString()}`;
    assert.equal(viaLevee.status, direct.status, `status differs for ${what}: ${JSON.stringify(viaLevee.error)} vs ${JSON.stringify(direct.error)}`);
    assert.deepEqual(viaLevee.error, direct.error, `error differs for ${what}`);
    assert.deepEqual(items(viaLevee), items(direct), `items differ for ${what}`);
    // Where the apiserver pages too (any resourceVersion but 0), the pages themselves agree.
    if (direct.pages.length > 1) {
      assert.deepEqual(
        viaLevee.pages.map((p) => [p.items.length, p.remaining, p.hasContinue]),
        direct.pages.map((p) => [p.items.length, p.remaining, p.hasContinue]),
        `pages differ for ${what}`,
      );
    }
    compared++;
  }
  // GETs: present, absent, every resourceVersion mode.
  for (let i = 0; i < 40; i++) {
    const ns = pick(namespaces);
    const name = pick(['cm-1', 'cm-29', 'absent', 'cm-5']);
    const rv = pick(['0', await seenRV('configmaps'), '', 'x']);
    const path = `/api/v1/namespaces/${ns}/configmaps/${name}${rv === '' ? '' : `?resourceVersion=${rv}`}`;
    const [a, b] = await Promise.all([get(env.server + path, agent, env.tokens.admin), get(levee.url.origin + path, agent, env.tokens.admin)]);
    assert.equal(b.status, a.status, path);
    assert.equal(b.body, a.body, path);
    // An object from the cache goes out with its length, not in HTTP/1.1's chunked framing.
    if (rv === '0' && b.status === 200) assert.equal(b.headers['content-length'], String(Buffer.byteLength(b.body)), path);
    compared++;
  }
  const ns = await Promise.all([get(`${env.server}/api/v1/namespaces/${namespaces[1]}?resourceVersion=0`, agent, env.tokens.admin), get(`${levee.url.origin}/api/v1/namespaces/${namespaces[1]}?resourceVersion=0`, agent, env.tokens.admin)]);
  assert.equal(ns[1].body, ns[0].body);

  const metrics = (await get(`${levee.url.origin}/metrics`, agent)).body;
  const fromCache = [...metrics.matchAll(/levee_request_total\{[^}]*source="cache"[^}]*\} (\d+)/g)].reduce((n, m) => n + Number(m[1]), 0);
  console.log(`${compared} cases identical; ${fromCache} requests answered from Levee's cache`);
  assert.equal(fromCache > 100, true, 'the cache answered too few requests for this test to mean anything');
}

test('a paged read stays consistent while objects change between pages', async () => {
  const ns = namespaces[2];
  const path = `/api/v1/namespaces/${ns}/configmaps`;
  const first = JSON.parse((await get(`${levee.url.origin}${path}?limit=4&resourceVersion=0`, agent, env.tokens.admin)).body) as { items: Array<{ metadata: { name: string } }>; metadata: { continue: string; resourceVersion: string } };
  const seen = first.items.map((i) => i.metadata.name);
  let cont = first.metadata.continue;
  let k = 0;
  while (cont) {
    // Churn: change, add and delete objects between pages.
    await send('PATCH', `${env.server}${path}/cm-${20 + (k % 5)}`, agent, env.tokens.admin, { data: { churn: String(k) } }, 'application/merge-patch+json');
    await send('POST', `${env.server}${path}`, agent, env.tokens.admin, { metadata: { name: `zz-new-${k}` } });
    if (k < 3) await send('DELETE', `${env.server}${path}/cm-${25 + k}`, agent, env.tokens.admin);
    const page = JSON.parse((await get(`${levee.url.origin}${path}?limit=4&continue=${cont}`, agent, env.tokens.admin)).body) as typeof first;
    seen.push(...page.items.map((i) => i.metadata.name));
    cont = page.metadata.continue;
    k++;
  }
  // Exactly the objects at the first page's resourceVersion, the apiserver's own answer at that RV.
  const exact = await readAll(env.server, path, new URLSearchParams({ resourceVersion: first.metadata.resourceVersion, resourceVersionMatch: 'Exact' }));
  assert.deepEqual(seen, items(exact).map((i) => (i as { metadata: { name: string } }).metadata.name));
  assert.equal(seen.includes('zz-new-0'), false);
});

test('the cache converges after the upstream apiserver restarts', async () => {
  const ns = namespaces[0];
  await stopApiserver();
  try {
    // While the apiserver is down, cached reads still answer (from the state Levee holds).
    const r = await get(`${levee.url.origin}/api/v1/namespaces/${ns}/configmaps?resourceVersion=0`, agent, env.tokens.admin);
    // Authorization needs the apiserver, so an unreviewed client cannot be answered: a Status, not a hang.
    assert.equal([200, 503].includes(r.status), true, `${r.status} ${r.body.slice(0, 200)}`);
  } finally {
    await startApiserver();
  }
  // Changes made after the restart reach the cache through the re-established watch.
  const created = await send('POST', `${env.server}/api/v1/namespaces/${ns}/configmaps`, agent, env.tokens.admin, { metadata: { name: 'after-restart' } });
  assert.equal(created.status, 201);
  const rv = (JSON.parse(created.body) as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
  let found = false;
  for (let i = 0; i < 100 && !found; i++) {
    // resourceVersion=0 is the cache's current state, never forwarded: 404 until the event arrives.
    const r = await get(`${levee.url.origin}/api/v1/namespaces/${ns}/configmaps/after-restart?resourceVersion=0`, agent, env.tokens.admin);
    found = r.status === 200;
    if (!found) await new Promise((res) => setTimeout(res, 200));
  }
  assert.equal(found, true);
  const [direct, viaLevee] = await Promise.all([
    readAll(env.server, `/api/v1/namespaces/${ns}/configmaps`, new URLSearchParams({ resourceVersion: rv, resourceVersionMatch: 'NotOlderThan' })),
    readAll(levee.url.origin, `/api/v1/namespaces/${ns}/configmaps`, new URLSearchParams({ resourceVersion: rv, resourceVersionMatch: 'NotOlderThan' })),
  ]);
  assert.deepEqual(items(viaLevee), items(direct));
});

test('a read without resourceVersion is as new as the apiserver, from the cache or not', async () => {
  const ns = namespaces[1];
  const path = `/api/v1/namespaces/${ns}/configmaps`;
  const names = (b: string) => (JSON.parse(b) as { items: Array<{ metadata: { name: string } }> }).items.map((o) => o.metadata.name);
  for (let i = 0; i < 10; i++) {
    // Read-your-writes: the write has completed, so a consistent read must include it, whether
    // Levee proves its cache fresh or forwards (small reads are forwarded: the apiserver answers
    // them for less than a proof costs; test/integration/consistentreads.test.ts has the rest).
    assert.equal((await send('POST', `${env.server}${path}`, agent, env.tokens.admin, { metadata: { name: `fresh-${i}` } })).status, 201);
    const [viaLevee, direct] = await Promise.all([get(`${levee.url.origin}${path}`, agent, env.tokens.admin), get(`${env.server}${path}`, agent, env.tokens.admin)]);
    assert.equal(viaLevee.status, 200);
    assert.equal(names(viaLevee.body).includes(`fresh-${i}`), true);
    assert.deepEqual(names(viaLevee.body), names(direct.body));
    const one = await get(`${levee.url.origin}${path}/fresh-${i}`, agent, env.tokens.admin);
    assert.equal(one.status, 200);
    for (const r of [viaLevee, one]) assert.equal([undefined, 'verified'].includes(r.headers['levee-consistent-read'] as string | undefined), true);
  }
  const metrics = (await get(`${levee.url.origin}/metrics`, agent)).body;
  assert.match(metrics, /levee_read_forwarded_total\{reason="consistency-cost"\} ([1-9]\d*)/);
});

test('the cache policy answers reads without resourceVersion from the cache and says so', async () => {
  const other = await startLevee({ kubeconfig: env.kubeconfig, tls: env.leveeServing, extra: ['--cache', 'configmaps', '--consistent-reads', 'forward,configmaps=cache'] });
  try {
    await waitReady(other);
    const r = await get(`${other.url.origin}/api/v1/namespaces/${namespaces[0]}/configmaps`, agent, env.tokens.admin);
    assert.equal(r.status, 200);
    assert.equal(r.headers['levee-consistent-read'], 'cache');
  } finally {
    await other.stop();
  }
});

test('a consistent-read policy by client: system:masters reads from the cache, everyone else is forwarded', async () => {
  const other = await startLevee({
    kubeconfig: env.kubeconfig,
    tls: env.leveeServing,
    extra: ['--cache', 'configmaps', '--consistent-reads', 'forward', '--consistent-reads-for', 'user:nobody=verify', '--consistent-reads-for', 'group:system:masters=cache'],
  });
  const path = `/api/v1/namespaces/${namespaces[0]}/configmaps/cm-1`;
  const ns = namespaces[0];
  try {
    await waitReady(other);
    assert.equal((await send('POST', `${env.server}/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`, agent, env.tokens.admin, {
      metadata: { name: 'bob-reads' },
      rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get'] }],
    })).status, 201);
    assert.equal((await send('POST', `${env.server}/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, agent, env.tokens.admin, {
      metadata: { name: 'bob-reads' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'bob-reads' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'bob' }],
    })).status, 201);
    for (let i = 0; i < 50 && (await get(env.server + path, agent, env.tokens.bob)).status !== 200; i++) await new Promise((r) => setTimeout(r, 100));
    const admin = await get(other.url.origin + path, agent, env.tokens.admin);
    const bob = await get(other.url.origin + path, agent, env.tokens.bob);
    assert.deepEqual([admin.status, bob.status], [200, 200]);
    assert.equal(admin.headers['levee-consistent-read'], 'cache');
    assert.equal(bob.headers['levee-consistent-read'], undefined, 'bob matches no rule: the resource policy forwards him');
    assert.equal(bob.body, admin.body);
  } finally {
    await other.stop();
    await send('DELETE', `${env.server}/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings/bob-reads`, agent, env.tokens.admin);
    await send('DELETE', `${env.server}/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles/bob-reads`, agent, env.tokens.admin);
  }
});

test('a node-local cache holds one node\'s pods and answers only what stays on that node', async () => {
  const local = await startLevee({
    kubeconfig: env.kubeconfig,
    tls: env.leveeServing,
    extra: ['--cache', 'pods', '--cache-selector', 'pods=spec.nodeName=node-1', '--cache-index', 'pods=status.phase'],
  });
  try {
    await waitReady(local);
    const cachedAnswers = async () =>
      [...(await get(`${local.url.origin}/metrics`, agent)).body.matchAll(/levee_request_total\{[^}]*resource="pods"[^}]*source="cache"[^}]*\} (\d+)/g)].reduce((n, m) => n + Number(m[1]), 0);
    const same = async (path: string) => {
      const [a, b] = await Promise.all([get(env.server + path, agent, env.tokens.admin), get(local.url.origin + path, agent, env.tokens.admin)]);
      assert.equal(b.status, a.status, path);
      assert.equal(b.body, a.body, path);
      return a;
    };
    const onNode = (JSON.parse((await same('/api/v1/pods?resourceVersion=0&fieldSelector=spec.nodeName%3Dnode-1')).body) as { items: unknown[] }).items.length;
    assert.equal(await cachedAnswers(), 1);
    const metrics = (await get(`${local.url.origin}/metrics`, agent)).body;
    assert.match(metrics, new RegExp(`levee_cache_objects\\{resource="pods"\\} ${onNode}\\b`));
    await same(`/api/v1/namespaces/${namespaces[0]}/pods?resourceVersion=0&fieldSelector=spec.nodeName%3Dnode-1,status.phase%3DPending`);
    assert.equal(await cachedAnswers(), 2);
    // Outside the node: the apiserver answers, whole and exact.
    // Scoped to this test's namespace: a cluster-wide LIST would carry any benchmark cluster left in etcd.
    await same(`/api/v1/namespaces/${namespaces[0]}/pods?resourceVersion=0&labelSelector=app`);
    await same(`/api/v1/namespaces/${namespaces[0]}/pods/absent?resourceVersion=0`);
    assert.equal(await cachedAnswers(), 2);
  } finally {
    await local.stop();
  }
});

test('answers from the cache follow the apiserver\'s authorization, down to single object names', async () => {
  const ns = namespaces[0];
  const rbac = `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}`;
  assert.equal((await send('POST', `${env.server}${rbac}/roles`, agent, env.tokens.admin, {
    metadata: { name: 'one-configmap' },
    rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get'], resourceNames: ['cm-1'] }],
  })).status, 201);
  assert.equal((await send('POST', `${env.server}${rbac}/rolebindings`, agent, env.tokens.admin, {
    metadata: { name: 'alice-one-configmap' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'one-configmap' },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'alice' }],
  })).status, 201);
  // RBAC takes effect through the apiserver's own informers; wait until it does directly.
  for (let i = 0; i < 50; i++) {
    if ((await get(`${env.server}/api/v1/namespaces/${ns}/configmaps/cm-1?resourceVersion=0`, agent, env.tokens.alice)).status === 200) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const cases: Array<[string, string]> = [
    ['alice', `/api/v1/namespaces/${ns}/configmaps/cm-1?resourceVersion=0`],
    ['alice', `/api/v1/namespaces/${ns}/configmaps/cm-2?resourceVersion=0`],
    ['alice', `/api/v1/namespaces/${ns}/configmaps?resourceVersion=0`],
    ['alice', `/api/v1/namespaces/${namespaces[1]}/configmaps/cm-1?resourceVersion=0`],
    ['bob', `/api/v1/namespaces/${ns}/configmaps/cm-1?resourceVersion=0`],
    ['bob', `/api/v1/configmaps?resourceVersion=0`],
    ['bob', `/api/v1/namespaces/${ns}/configmaps?resourceVersion=0&limit=2`],
  ];
  for (const [user, path] of cases) {
    const token = env.tokens[user as 'alice' | 'bob'];
    const [a, b] = await Promise.all([get(env.server + path, agent, token), get(levee.url.origin + path, agent, token)]);
    assert.equal(b.status, a.status, `${user} ${path}`);
    assert.equal(b.body, a.body, `${user} ${path}`);
  }
  // A request without credentials is refused before anything is looked up (anonymous is off by
  // default), with the apiserver's own 401 body.
  const anon = await get(`${levee.url.origin}/api/v1/namespaces/${ns}/configmaps?resourceVersion=0`, agent);
  assert.equal(anon.status, 401);
  assert.deepEqual(JSON.parse(anon.body), { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'Unauthorized', reason: 'Unauthorized', code: 401 });
});

test('a request deadline the apiserver cannot read is its 400, before credentials are looked at', async () => {
  const ns = namespaces[0];
  const cases: Array<[token: string | undefined, path: string]> = [
    [undefined, `/api/v1/namespaces/${ns}/configmaps?resourceVersion=0&timeout=abc`],
    [env.tokens.admin, `/api/v1/namespaces/${ns}/configmaps?resourceVersion=0&timeout=1e3s`],
    [env.tokens.bob, `/api/v1/namespaces/${ns}/configmaps/cm-1?resourceVersion=0&timeout=+1s`],
    ['not-a-token', `/api/v1/pods?resourceVersion=0&timeout=1`],
  ];
  for (const [token, path] of cases) {
    const [a, b] = await Promise.all([get(env.server + path, agent, token), get(levee.url.origin + path, agent, token)]);
    assert.equal(a.status, 400, `${path}: ${a.body}`);
    assert.equal(b.status, a.status, path);
    assert.equal(b.body, a.body, path);
  }
  // Written as the apiserver writes its errors for the client: YAML, protobuf, indented, or
  // (nothing acceptable) indented JSON.
  const path = `/api/v1/namespaces/${ns}/configmaps?timeout=a%3Cb`;
  for (const headers of [{ accept: 'application/yaml' }, { accept: 'application/vnd.kubernetes.protobuf' }, { accept: 'text/html' }, { 'user-agent': 'curl/8.5.0' }, { accept: 'application/json;as=Table;v=v1;g=meta.k8s.io, application/yaml' }]) {
    const ask = async (origin: string) => {
      const res = await request(origin + path, { dispatcher: agent, headers: { authorization: `Bearer ${env.tokens.admin}`, ...headers } });
      return { status: res.statusCode, type: res.headers['content-type'], body: Buffer.from(await res.body.arrayBuffer()).toString('base64') };
    };
    const [a, b] = await Promise.all([ask(env.server), ask(levee.url.origin)]);
    assert.deepEqual(b, a, JSON.stringify(headers));
  }
});

test('a path is read as the apiserver reads it, escapes decoded: names it refuses, subresources behind %2F', async () => {
  const ns = namespaces[0];
  for (const token of [env.tokens.admin, env.tokens.bob]) {
    for (const name of ['cm-1%2Fx', '%2e%2e', 'cm%2D1', 'a%25b']) {
      const path = `/api/v1/namespaces/${ns}/configmaps/${name}?resourceVersion=0`;
      const [a, b] = await Promise.all([get(env.server + path, agent, token), get(levee.url.origin + path, agent, token)]);
      assert.equal(b.status, a.status, path);
      assert.equal(b.body, a.body, path);
    }
  }
});
