// Watches from a resourceVersion are served from Levee's cache with the apiserver's semantics: the
// same events, in the same order, with the same objects, including the DELETED and ADDED that
// selector transitions produce. Compared side by side with watches on the apiserver itself.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { request, type Agent } from 'undici';
import { KubeConfig, makeInformer, CoreV1Api, type V1ConfigMap } from '@kubernetes/client-node';
import { loadEnv, type TestEnv } from '../env/testenv.ts';
import { startLevee, writeKubeconfig, type LeveeProcess } from '../support/levee.ts';
import { agentFor, get, send, suffix } from '../support/http.ts';
import { createNamespace, NO_SCHEDULER } from '../support/cluster.ts';

let env: TestEnv;
let levee: LeveeProcess;
let agent: Agent;
const ns = `watch-${suffix()}`;

interface Event {
  type: string;
  object: { metadata: { name: string; resourceVersion: string; namespace?: string } };
}

/** A watch held open, collecting events. */
function watch(origin: string, path: string): { events: Event[]; raw: string[]; stop(): void; ended: Promise<void> } {
  const events: Event[] = [];
  const raw: string[] = [];
  const abort = new AbortController();
  const ended = (async () => {
    const res = await request(origin + path, { dispatcher: agent, headers: { authorization: `Bearer ${env.tokens.admin}`, accept: 'application/json' }, signal: abort.signal });
    assert.equal(res.statusCode, 200);
    let buf = '';
    try {
      for await (const chunk of res.body) {
        buf += (chunk as Buffer).toString();
        let nl;
        while ((nl = buf.indexOf('\n')) !== -1) {
          raw.push(buf.slice(0, nl));
          events.push(JSON.parse(buf.slice(0, nl)) as Event);
          buf = buf.slice(nl + 1);
        }
      }
    } catch {
      // aborted by stop()
    }
  })();
  return { events, raw, stop: () => abort.abort(), ended };
}

/** client-go's informer on a namespace's ConfigMaps (the test environment's informer command), through `origin`. */
function informer(origin: string, namespace: string): { child: ChildProcessWithoutNullStreams; out: () => string; err: () => string } {
  const child = spawn(env.informer, ['--server', origin, '--token', env.tokens.admin, '--ca', env.caFile, '--namespace', namespace], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  return { child, out: () => out, err: () => err };
}

const settle = async (check: () => boolean, ms = 10_000) => {
  for (let i = 0; i < ms / 50 && !check(); i++) await new Promise((r) => setTimeout(r, 50));
};

before(async () => {
  env = loadEnv();
  agent = agentFor(env.caFile);
  await createNamespace(env, agent, ns);
  for (let i = 0; i < 5; i++) {
    await send('POST', `${env.server}/api/v1/namespaces/${ns}/configmaps`, agent, env.tokens.admin, { metadata: { name: `cm-${i}`, labels: { app: i % 2 ? 'a' : 'b' } }, data: { v: '0' } });
  }
  levee = await startLevee({ kubeconfig: env.kubeconfig, tls: env.leveeServing, extra: ['--cache', 'configmaps,pods'] });
  for (let i = 0; i < 200 && (await get(`${levee.url.origin}/readyz`, agent)).status !== 200; i++) await new Promise((r) => setTimeout(r, 100));
});

after(async () => {
  await levee?.stop();
  await agent?.close();
});

test('watches from a resourceVersion: the same events as the apiserver, selector transitions included', async () => {
  const rv = (JSON.parse((await get(`${env.server}/api/v1/namespaces/${ns}/configmaps?limit=1`, agent, env.tokens.admin)).body) as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
  const paths = [
    `/api/v1/namespaces/${ns}/configmaps?watch=true&resourceVersion=${rv}`,
    `/api/v1/namespaces/${ns}/configmaps?watch=true&resourceVersion=${rv}&labelSelector=app%3Da`,
    `/api/v1/namespaces/${ns}/configmaps?watch=true&resourceVersion=${rv}&fieldSelector=metadata.name%3Dcm-1`,
    `/api/v1/configmaps?watch=true&resourceVersion=${rv}&labelSelector=app%20in%20(b)`,
  ];
  const pairs = paths.map((p) => ({ path: p, direct: watch(env.server, p), viaLevee: watch(levee.url.origin, p) }));
  await new Promise((r) => setTimeout(r, 300));
  const cm = `${env.server}/api/v1/namespaces/${ns}/configmaps`;
  const patch = (name: string, body: unknown) => send('PATCH', `${cm}/${name}`, agent, env.tokens.admin, body, 'application/merge-patch+json');
  await send('POST', cm, agent, env.tokens.admin, { metadata: { name: 'cm-new', labels: { app: 'a' } } });
  await patch('cm-1', { data: { v: '1' } });
  await patch('cm-1', { metadata: { labels: { app: 'b' } } }); // leaves app=a, enters app in (b)
  await patch('cm-2', { metadata: { labels: { app: 'a' } } }); // enters app=a
  await patch('cm-1', { metadata: { labels: { app: 'a' } } }); // back
  await send('DELETE', `${cm}/cm-3`, agent, env.tokens.admin);
  await send('DELETE', `${cm}/cm-new`, agent, env.tokens.admin);
  for (const p of pairs) await settle(() => p.viaLevee.events.length >= p.direct.events.length && p.direct.events.length > 0);
  await new Promise((r) => setTimeout(r, 500));
  for (const p of pairs) {
    p.direct.stop();
    p.viaLevee.stop();
    const strip = (es: Event[]) => es.filter((e) => e.type !== 'BOOKMARK');
    assert.deepEqual(strip(p.viaLevee.events), strip(p.direct.events), `events differ for ${p.path}`);
    assert.equal(p.direct.events.length > 0, true);
  }
  const metrics = (await get(`${levee.url.origin}/metrics`, agent)).body;
  assert.match(metrics, /levee_request_total\{verb="WATCH",group="",resource="configmaps",subresource="",source="cache",code="200"\} [4-9]/);
});

test('a watch from the cache sends bookmarks when asked and ends at its timeout', async () => {
  const rv = (JSON.parse((await get(`${levee.url.origin}/api/v1/namespaces/${ns}/configmaps?resourceVersion=0`, agent, env.tokens.admin)).body) as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
  const started = Date.now();
  const w = watch(levee.url.origin, `/api/v1/namespaces/${ns}/configmaps?watch=true&resourceVersion=${rv}&allowWatchBookmarks=true&timeoutSeconds=3`);
  await w.ended;
  const took = Date.now() - started;
  assert.equal(took >= 2500 && took < 6000, true, `ended after ${took} ms`);
  const bookmarks = w.events.filter((e) => e.type === 'BOOKMARK');
  assert.equal(bookmarks.length >= 1, true);
  assert.equal(Number(bookmarks[0]!.object.metadata.resourceVersion) >= Number(rv), true);
});

test('a resourceVersion older than the cache\'s window is the apiserver\'s to answer', async () => {
  const path = `/api/v1/namespaces/${ns}/configmaps?watch=true&resourceVersion=1&timeoutSeconds=1`;
  const [a, b] = await Promise.all([get(env.server + path, agent, env.tokens.admin), get(levee.url.origin + path, agent, env.tokens.admin)]);
  assert.equal(b.status, a.status);
  assert.deepEqual(b.body.split('\n')[0], a.body.split('\n')[0]);
});

test('an @kubernetes/client-node informer through Levee converges on the apiserver\'s state', async () => {
  const kc = new KubeConfig();
  kc.loadFromFile(writeKubeconfig(levee.url.href, env.caFile, env.tokens.admin));
  const core = kc.makeApiClient(CoreV1Api);
  const informer = makeInformer<V1ConfigMap>(kc, `/api/v1/namespaces/${ns}/configmaps`, () => core.listNamespacedConfigMap({ namespace: ns }));
  await informer.start();
  try {
    const cm = `${env.server}/api/v1/namespaces/${ns}/configmaps`;
    for (let i = 0; i < 30; i++) {
      await send('POST', cm, agent, env.tokens.admin, { metadata: { name: `churn-${i}` }, data: { v: '0' } });
      if (i % 3 === 0) await send('PATCH', `${cm}/churn-${i}`, agent, env.tokens.admin, { data: { v: '1' } }, 'application/merge-patch+json');
      if (i % 5 === 0) await send('DELETE', `${cm}/churn-${i}`, agent, env.tokens.admin);
    }
    const want = (JSON.parse((await get(cm, agent, env.tokens.admin)).body) as { items: Array<{ metadata: { name: string; resourceVersion: string } }> }).items
      .map((o) => `${o.metadata.name}@${o.metadata.resourceVersion}`)
      .sort();
    const have = () => informer.list().map((o) => `${o.metadata!.name}@${o.metadata!.resourceVersion}`).sort();
    await settle(() => JSON.stringify(have()) === JSON.stringify(want));
    assert.deepEqual(have(), want);
  } finally {
    await informer.stop();
  }
  const metrics = (await get(`${levee.url.origin}/metrics`, agent)).body;
  assert.match(metrics, /levee_request_total\{verb="WATCH"[^}]*source="cache"[^}]*\} \d+/);
});

test('watches that begin with the current state: watch-list and resourceVersion 0 as the apiserver', async () => {
  const base = `/api/v1/namespaces/${ns}/configmaps?watch=true`;
  const paths = [
    `${base}&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true`,
    `${base}&resourceVersion=0&allowWatchBookmarks=true`,
    `${base}&resourceVersion=0&labelSelector=app%3Da`,
  ];
  const pairs = paths.map((p) => ({ path: p, direct: watch(env.server, p), viaLevee: watch(levee.url.origin, p) }));
  try {
    const initialDone = (w: ReturnType<typeof watch>, p: string) =>
      p.includes('allowWatchBookmarks') ? w.events.some((e) => e.type === 'BOOKMARK') : w.events.length > 0;
    for (const p of pairs) await settle(() => initialDone(p.direct, p.path) && initialDone(p.viaLevee, p.path));
    await new Promise((r) => setTimeout(r, 300));
    await send('PATCH', `${env.server}/api/v1/namespaces/${ns}/configmaps/cm-1`, agent, env.tokens.admin, { data: { v: 'after' } }, 'application/merge-patch+json');
    for (const p of pairs) await settle(() => p.viaLevee.events.some((e) => e.type === 'MODIFIED') && p.direct.events.some((e) => e.type === 'MODIFIED'));
  } finally {
    for (const p of pairs) {
      p.direct.stop();
      p.viaLevee.stop();
    }
  }
  for (const p of pairs) {
    // Bookmarks' resourceVersions are each server's own; the initial-events-end bookmark's place
    // and annotation are compared. Periodic bookmarks (no annotation) come when each server's own
    // timer says, so they are left out. Levee's end bookmark also carries the list blueprint that
    // client-go 1.32 and 1.33 need (a documented difference): an empty ConfigMapList.
    const BLUEPRINT = 'kubernetes.io/initial-events-list-blueprint';
    const shape = (es: Event[]): unknown[] =>
      es.flatMap((e): unknown[] => {
        if (e.type !== 'BOOKMARK') return [[e.type, e.object]];
        const annotations = (e.object.metadata as { annotations?: Record<string, string> }).annotations;
        if (!annotations) return [];
        const { [BLUEPRINT]: blueprint, ...rest } = annotations;
        if (blueprint !== undefined) assert.deepEqual(JSON.parse(Buffer.from(blueprint, 'base64').toString()), { kind: 'ConfigMapList', apiVersion: 'v1', metadata: {}, items: null });
        return [['BOOKMARK', rest]];
      });
    const annotationsOf = (e: Event): Record<string, string> => (e.object.metadata as { annotations?: Record<string, string> }).annotations ?? {};
    for (const e of p.viaLevee.events) if (annotationsOf(e)['k8s.io/initial-events-end']) assert.ok(annotationsOf(e)[BLUEPRINT], 'no list blueprint');
    assert.deepEqual(shape(p.viaLevee.events), shape(p.direct.events), `events differ for ${p.path}`);
  }
  const metrics = (await get(`${levee.url.origin}/metrics`, agent)).body;
  assert.match(metrics, /levee_request_total\{verb="WATCH",group="",resource="configmaps",subresource="",source="cache",code="200"\} (\d+)/);
});

test('per-node pod watches see a pod arrive on their node when it is bound, and leave when deleted', async () => {
  const rv = (JSON.parse((await get(`${env.server}/api/v1/namespaces/${ns}/pods?limit=1`, agent, env.tokens.admin)).body) as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
  const paths = ['node-1', 'node-2', ''].map((n) => `/api/v1/pods?watch=true&resourceVersion=${rv}&fieldSelector=spec.nodeName%3D${n}`);
  const pairs = paths.map((p) => ({ path: p, direct: watch(env.server, p), viaLevee: watch(levee.url.origin, p) }));
  await new Promise((r) => setTimeout(r, 300));
  const pods = `${env.server}/api/v1/namespaces/${ns}/pods`;
  // Bound here only, by the test: they name a scheduler that does not run.
  for (const name of ['unbound-1', 'unbound-2']) {
    assert.equal((await send('POST', pods, agent, env.tokens.admin, { metadata: { name }, spec: { schedulerName: NO_SCHEDULER, containers: [{ name: 'c', image: 'registry.example/app:1' }] } })).status, 201);
  }
  // Binding sets spec.nodeName: the pod enters node-1's watches and leaves the unscheduled one.
  const bind = await send('POST', `${pods}/unbound-1/binding`, agent, env.tokens.admin, { apiVersion: 'v1', kind: 'Binding', metadata: { name: 'unbound-1' }, target: { apiVersion: 'v1', kind: 'Node', name: 'node-1' } });
  assert.equal(bind.status, 201, bind.body);
  await send('DELETE', `${pods}/unbound-1`, agent, env.tokens.admin);
  await send('DELETE', `${pods}/unbound-2`, agent, env.tokens.admin);
  // Without a kubelet a bound pod's deletion stays graceful: node-1 sees it arrive, then marked.
  await settle(() => pairs[0]!.direct.events.length >= 2 && pairs[2]!.direct.events.length >= 5);
  for (const p of pairs) await settle(() => p.viaLevee.events.length >= p.direct.events.length, 3000);
  await new Promise((r) => setTimeout(r, 300));
  for (const p of pairs) {
    p.direct.stop();
    p.viaLevee.stop();
    assert.deepEqual(p.viaLevee.events, p.direct.events, `events differ for ${p.path}`);
  }
  assert.deepEqual(pairs[0]!.direct.events.map((e) => e.type), ['ADDED', 'MODIFIED']);
  assert.deepEqual(pairs[1]!.direct.events.map((e) => e.type), []);
  // The unscheduled watch: both arrive, then the bound one leaves it (DELETED at the binding).
  assert.deepEqual(pairs[2]!.direct.events.slice(0, 3).map((e) => [e.type, e.object.metadata.name]), [
    ['ADDED', 'unbound-1'],
    ['ADDED', 'unbound-2'],
    ['DELETED', 'unbound-1'],
  ]);
});

test('a client-go informer (watch-list, protobuf preferred) through Levee converges on the apiserver\'s state', async () => {
  const { child, out, err } = informer(levee.url.origin, ns);
  try {
    await settle(() => out().includes('synced\n'), 20_000);
    assert.match(out(), /synced/, err());
    const cm = `${env.server}/api/v1/namespaces/${ns}/configmaps`;
    for (let i = 0; i < 20; i++) {
      await send('POST', cm, agent, env.tokens.admin, { metadata: { name: `go-${i}` } });
      if (i % 2) await send('PATCH', `${cm}/go-${i}`, agent, env.tokens.admin, { data: { v: String(i) } }, 'application/merge-patch+json');
      if (i % 4 === 0) await send('DELETE', `${cm}/go-${i}`, agent, env.tokens.admin);
    }
    const want = (JSON.parse((await get(cm, agent, env.tokens.admin)).body) as { items: Array<{ metadata: { name: string; resourceVersion: string } }> }).items
      .map((o) => `${o.metadata.name}@${o.metadata.resourceVersion}`)
      .sort()
      .join(' ');
    let have = '';
    for (let i = 0; i < 100 && have !== want; i++) {
      const before = out().length;
      child.stdin.write('dump\n');
      await settle(() => out().length > before && out().endsWith('\n'), 2000);
      have = out().slice(before).trim().split('\n').at(-1) ?? '';
      if (have !== want) await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(have, want);
    // Its watch-list is served from the cache when Levee could prove it fresh, else forwarded
    // (writes elsewhere in the cluster move the apiserver's resourceVersion); either is correct.
    const metrics = (await get(`${levee.url.origin}/metrics`, agent)).body;
    console.log(`client-go informer: ${/levee_watchers\{resource="configmaps"\} (\d+)/.exec(metrics)?.[1] ?? '?'} watch(es) open on Levee's cache`);
  } finally {
    child.stdin.end();
    child.kill();
  }
});

test('a watch that starts with more than a watcher may queue (16 MiB) gets it whole: a watch-list, a watch from before the changes, and a client-go informer on it', async () => {
  const large = `${ns}-large`;
  await createNamespace(env, agent, large);
  try {
    const before = (JSON.parse((await get(`${env.server}/api/v1/namespaces/${large}/configmaps?limit=1`, agent, env.tokens.admin)).body) as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
    // 20 ConfigMaps of 900 KiB: 18 MiB of initial state, and of changes since `before`.
    const value = 'x'.repeat(900 * 1024);
    for (let i = 0; i < 20; i++) {
      const r = await send('POST', `${env.server}/api/v1/namespaces/${large}/configmaps`, agent, env.tokens.admin, { metadata: { name: `large-${String(i).padStart(2, '0')}` }, data: { v: value } });
      assert.equal(r.status, 201, r.body.slice(0, 300));
    }
    const cached = async (): Promise<number> =>
      [...(await get(`${levee.url.origin}/metrics`, agent)).body.matchAll(/levee_request_total\{verb="WATCH",group="",resource="configmaps",subresource="",source="cache",code="200"\} (\d+)/g)].reduce((n, m) => n + Number(m[1]), 0);
    const answered = await cached();
    // From `before`, beside the apiserver: the 20 ADDED events.
    const since = `/api/v1/namespaces/${large}/configmaps?watch=true&resourceVersion=${before}`;
    const sinceDirect = watch(env.server, since);
    const sinceViaLevee = watch(levee.url.origin, since);
    // The namespace's kube-root-ca.crt may come too, from the controller manager, in either.
    const ours = (w: ReturnType<typeof watch>) => w.events.filter((e) => e.object.metadata.name.startsWith('large-'));
    await settle(() => ours(sinceDirect).length >= 20 && ours(sinceViaLevee).length >= 20, 30_000);
    await new Promise((r) => setTimeout(r, 300));
    sinceDirect.stop();
    sinceViaLevee.stop();
    assert.equal(ours(sinceDirect).length, 20);
    assert.deepEqual(sinceViaLevee.events, sinceDirect.events);
    // A watch-list in JSON over HTTP/1.1, beside the apiserver's: every object, then the end bookmark.
    const path = `/api/v1/namespaces/${large}/configmaps?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true`;
    const direct = watch(env.server, path);
    const viaLevee = watch(levee.url.origin, path);
    const ended = (w: ReturnType<typeof watch>) => w.events.some((e) => e.type === 'BOOKMARK' && (e.object.metadata as { annotations?: Record<string, string> }).annotations?.['k8s.io/initial-events-end'] === 'true');
    await settle(() => ended(direct) && ended(viaLevee), 30_000);
    direct.stop();
    viaLevee.stop();
    const added = (w: ReturnType<typeof watch>) => w.events.filter((e) => e.type === 'ADDED').map((e) => `${e.object.metadata.name}@${e.object.metadata.resourceVersion}`);
    assert.equal(added(direct).filter((a) => a.startsWith('large-')).length, 20);
    assert.deepEqual(added(viaLevee), added(direct));
    assert.ok(ended(viaLevee), 'no initial-events-end bookmark through Levee');
    // client-go's informer (protobuf preferred, HTTP/2) through Levee: it syncs, rather than see
    // its watch-list cut short and start again.
    const { child, out, err } = informer(levee.url.origin, large);
    try {
      await settle(() => out().includes('synced\n'), 30_000);
      assert.match(out(), /synced/, err().slice(-2000));
    } finally {
      child.stdin.end();
      child.kill();
    }
    // All three were answered from the cache, not forwarded.
    let now = 0;
    for (let i = 0; i < 100 && (now = await cached()) < answered + 3; i++) await new Promise((r) => setTimeout(r, 50));
    assert.ok(now >= answered + 3, `${now - answered} of the 3 watches answered from the cache`);
  } finally {
    await send('DELETE', `${env.server}/api/v1/namespaces/${large}`, agent, env.tokens.admin).catch(() => undefined);
  }
});
