// A lost watch window: while kube-apiserver is down, etcd's revision moves on and its history is
// compacted, so when the apiserver is back Levee's watch from its old resourceVersion can only get
// "410 too old resource version". Levee must then relist, and its cache must equal the apiserver
// again, with nothing stale left. To prove the relist itself matters, some configmaps are removed
// from etcd directly while the apiserver is down: no watch can ever deliver their DELETED events,
// so only a fresh list takes them out of the cache.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { request, type Agent } from 'undici';
import { loadEnv, startApiserver, stopApiserver, type TestEnv } from '../env/testenv.ts';
import { startLevee, type LeveeProcess } from '../support/levee.ts';
import { agentFor, get, send, suffix } from '../support/http.ts';
import { etcdCompact, etcdDelete, etcdExists, etcdPut } from '../support/etcd.ts';
import { createNamespace } from '../support/cluster.ts';

let env: TestEnv;
let levee: LeveeProcess;
let agent: Agent;
const ns = `lostwindow-${suffix()}`;
const path = `/api/v1/namespaces/${ns}/configmaps`;
const KEEP = 8;
const STALE = 3;
const CONVERGE_MS = 30_000;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Item {
  metadata: { name: string; resourceVersion: string };
}
interface List {
  metadata: { resourceVersion: string };
  items: Item[];
}
const summary = (items: Item[]): string[] => items.map((i) => `${i.metadata.name}@${i.metadata.resourceVersion}`);

/** The value of one sample of Levee's /metrics; 0 when the series does not exist yet. */
function sample(metrics: string, name: string, labels: Record<string, string>): number {
  for (const line of metrics.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const close = line.indexOf('}');
    const have: Record<string, string | undefined> = Object.fromEntries([...line.slice(name.length + 1, close).matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1]!, m[2]!]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) return Number(line.slice(close + 1).trim());
  }
  return 0;
}

/** The sum of every sample of a metric. */
function total(metrics: string, name: string): number {
  let n = 0;
  for (const line of metrics.split('\n')) if (line.startsWith(`${name}{`) || line.startsWith(`${name} `)) n += Number(line.slice(line.lastIndexOf(' ') + 1));
  return n;
}

async function metrics(): Promise<string> {
  const r = await get(`${levee.url.origin}/metrics`, agent);
  assert.equal(r.status, 200);
  return r.body;
}

interface Observed {
  lists: number;
  expired: number;
  errors: number;
  rv: number;
  objects: number;
}
async function observe(): Promise<Observed> {
  const m = await metrics();
  const resource = { resource: 'configmaps' };
  return {
    lists: sample(m, 'levee_reflector_lists_total', resource),
    expired: sample(m, 'levee_reflector_watch_restarts_total', { ...resource, reason: 'expired' }),
    errors: sample(m, 'levee_reflector_watch_restarts_total', { ...resource, reason: 'error' }),
    rv: sample(m, 'levee_cache_resource_version', resource),
    objects: sample(m, 'levee_cache_objects', resource),
  };
}

async function listDirect(): Promise<List> {
  const r = await get(`${env.server}${path}`, agent, env.tokens.admin);
  assert.equal(r.status, 200, r.body);
  return JSON.parse(r.body) as List;
}

/** Levee's LIST at `rv`, and whether the cache answered it (nothing was forwarded meanwhile). */
async function listLevee(rv: string): Promise<{ list: List; fromCache: boolean }> {
  const forwardedBefore = total(await metrics(), 'levee_read_forwarded_total');
  const r = await get(`${levee.url.origin}${path}?resourceVersion=${rv}`, agent, env.tokens.admin, { 'user-agent': 'levee-test' });
  assert.equal(r.status, 200, r.body);
  // A forward is counted before it goes upstream, so it is visible by the time its answer is here.
  const forwardedAfter = total(await metrics(), 'levee_read_forwarded_total');
  return { list: JSON.parse(r.body) as List, fromCache: forwardedAfter === forwardedBefore };
}

// The resourceVersion of the last object written here: the cache has seen it once that event came.
// (The apiserver's list resourceVersion is etcd's, moved by writes to anything, leases included,
// which Levee's configmaps watch only learns of at the next bookmark.)
let lastCreated = '';

async function create(name: string): Promise<string> {
  const r = await send('POST', `${env.server}${path}`, agent, env.tokens.admin, { metadata: { name }, data: { name } });
  assert.equal(r.status, 201, r.body);
  return (JSON.parse(r.body) as Item).metadata.resourceVersion;
}

before(async () => {
  env = loadEnv();
  agent = agentFor(env.caFile);
  // Once the controllers are done with it: the kube-root-ca.crt ConfigMap they add is in place.
  await createNamespace(env, agent, ns);
  for (let i = 0; i < KEEP; i++) await create(`keep-${i}`);
  for (let i = 0; i < STALE; i++) lastCreated = await create(`stale-${i}`);
  levee = await startLevee({ kubeconfig: env.kubeconfig, tls: env.leveeServing, extra: ['--cache', 'configmaps'] });
  for (let i = 0; ; i++) {
    if ((await get(`${levee.url.origin}/readyz`, agent)).status === 200) break;
    if (i > 300) throw new Error(`levee never became ready:\n${levee.output().slice(-2000)}`);
    await sleep(100);
  }
});

after(async () => {
  await levee?.stop();
  await agent?.close();
});

test('after a lost watch window (410) Levee relists and its cache equals the apiserver, nothing stale', async () => {
  // Levee holds every object, the stale ones included, before anything happens.
  const initial = await listDirect();
  const seeded = await listLevee(lastCreated);
  assert.equal(seeded.fromCache, true, 'the first read was forwarded: the cache never reached the seeded state');
  assert.deepEqual(summary(seeded.list.items), summary(initial.items));
  assert.equal(seeded.list.items.filter((i) => i.metadata.name.startsWith('stale-')).length, STALE);

  // A client watch held through Levee across everything below: the relist must not end it.
  const watchEvents: Array<{ type: string; object: { metadata: { name: string; resourceVersion: string } } }> = [];
  let watchEnded = false;
  const watchAbort = new AbortController();
  const watchDone = (async () => {
    const res = await request(`${levee.url.origin}${path}?watch=true&allowWatchBookmarks=true&resourceVersion=${initial.metadata.resourceVersion}`, {
      dispatcher: agent,
      headers: { authorization: `Bearer ${env.tokens.admin}` },
      signal: watchAbort.signal,
    });
    let buf = '';
    try {
      for await (const chunk of res.body) {
        buf += (chunk as Buffer).toString();
        let nl;
        while ((nl = buf.indexOf('\n')) !== -1) {
          watchEvents.push(JSON.parse(buf.slice(0, nl)) as (typeof watchEvents)[number]);
          buf = buf.slice(nl + 1);
        }
      }
      watchEnded = true;
    } catch {
      // aborted at the end of the test
    }
  })();

  const before = await observe();
  let restartedAt = 0;
  let oldRV: number | undefined;
  let compactedAt = 0;
  await stopApiserver();
  try {
    // Nothing reaches the cache now: this is the resourceVersion its watch will resume from.
    oldRV = (await observe()).rv;
    // Behind the apiserver's back: gone from etcd, and no watch will ever say so.
    for (let i = 0; i < STALE; i++) {
      const key = `/registry/configmaps/${ns}/stale-${i}`;
      assert.equal((await etcdDelete(env.etcd, key)).deleted, 1, `${key} was not in etcd`);
      assert.equal(await etcdExists(env.etcd, key), false);
    }
    // The revision moves on, and the history Levee would need is compacted away.
    for (let i = 0; i < 5; i++) compactedAt = await etcdPut(env.etcd, '/levee-test/tick', `${Date.now()}-${i}`);
    await etcdCompact(env.etcd, compactedAt);
  } finally {
    await startApiserver();
    restartedAt = Date.now();
  }
  assert.ok(oldRV !== undefined && oldRV > 0 && oldRV < compactedAt, `Levee's resourceVersion ${oldRV} is not older than the compaction at ${compactedAt}`);

  // What the restarted apiserver says to a watch from Levee's old resourceVersion (429 while its
  // watch cache is still initializing: asked again until it is a real answer).
  let answer = { status: 0, body: '' };
  for (let i = 0; i < 50; i++) {
    const r = await get(`${env.server}${path}?watch=true&allowWatchBookmarks=true&timeoutSeconds=2&resourceVersion=${oldRV}`, agent, env.tokens.admin);
    answer = { status: r.status, body: r.body.trim() };
    if (r.status !== 429) break;
    await sleep(200);
  }
  console.log(`apiserver, watch from Levee's old resourceVersion ${oldRV} (etcd compacted at ${compactedAt}): HTTP ${answer.status} ${answer.body.slice(0, 300)}`);
  const expiredEvent = answer.status === 200 ? (JSON.parse(answer.body.split('\n')[0]!) as { type: string; object: { code?: number; reason?: string } }) : undefined;
  assert.ok(
    answer.status === 410 || (expiredEvent?.type === 'ERROR' && expiredEvent.object.code === 410),
    `the apiserver did not answer 410 to a watch from a compacted resourceVersion: HTTP ${answer.status} ${answer.body.slice(0, 500)}`,
  );

  // The world changes right away, through the apiserver: the cache must end up with exactly this.
  assert.equal((await send('DELETE', `${env.server}${path}/keep-0`, agent, env.tokens.admin)).status, 200);
  assert.equal((await send('DELETE', `${env.server}${path}/keep-1`, agent, env.tokens.admin)).status, 200);
  const patched = await send('PATCH', `${env.server}${path}/keep-2`, agent, env.tokens.admin, { data: { changed: 'yes' } }, 'application/merge-patch+json');
  assert.equal(patched.status, 200, patched.body);
  await create('new-0');
  // The last write: its resourceVersion is the newest one this namespace has.
  const lastRV = await create('new-1');

  let converged: { ms: number; polls: number; items: string[] } | undefined;
  let last: { levee: string[]; direct: string[]; fromCache: boolean } | undefined;
  let polls = 0;
  while (Date.now() - restartedAt < CONVERGE_MS) {
    polls++;
    const direct = await listDirect();
    const viaLevee = await listLevee(lastRV);
    last = { levee: summary(viaLevee.list.items), direct: summary(direct.items), fromCache: viaLevee.fromCache };
    if (viaLevee.fromCache && JSON.stringify(last.levee) === JSON.stringify(last.direct)) {
      converged = { ms: Date.now() - restartedAt, polls, items: last.levee };
      break;
    }
    await sleep(100);
  }
  const afterward = await observe();
  await sleep(300); // Levee flushes its log every 250 ms
  const relistLog = levee
    .output()
    .split('\n')
    .filter((l) => /watch window lost|"msg":"listed"/.test(l) && l.includes('configmaps'))
    .flatMap((l) => {
      let o: { time?: number; msg: string; err?: string; via?: string; objects?: number; resourceVersion?: number };
      try {
        o = JSON.parse(l) as typeof o;
      } catch {
        return [];
      }
      const at = o.time ? `${o.time - restartedAt} ms after restart` : '';
      return [`  ${o.msg}${o.err ? `: ${o.err}` : ''}${o.objects !== undefined ? ` (${o.via ? `via ${o.via}, ` : ''}${o.objects} objects at ${o.resourceVersion})` : ''} ${at}`];
    });
  console.log(
    [
      `levee metrics (configmaps) before -> after:`,
      `  levee_reflector_lists_total                  ${before.lists} -> ${afterward.lists}`,
      `  levee_reflector_watch_restarts_total{expired} ${before.expired} -> ${afterward.expired}`,
      `  levee_reflector_watch_restarts_total{error}   ${before.errors} -> ${afterward.errors}`,
      `  levee_cache_resource_version                 ${oldRV} (while the apiserver was down) -> ${afterward.rv}`,
      `levee log:`,
      ...relistLog,
      converged
        ? `converged ${converged.ms} ms after the apiserver was ready (${converged.polls} polls): ${converged.items.join(' ')}`
        : `NOT converged within ${CONVERGE_MS} ms: last levee=${JSON.stringify(last)}`,
    ].join('\n'),
  );

  // The relist happened, because the window was lost.
  assert.ok(afterward.expired > before.expired, `no watch restart with reason="expired" (${before.expired} -> ${afterward.expired})`);
  assert.ok(afterward.lists > before.lists, `no relist (${before.lists} -> ${afterward.lists})`);
  // The cache answers the apiserver's own state, from the cache, within the time allowed.
  assert.ok(converged, `the cache did not converge within ${CONVERGE_MS} ms: ${JSON.stringify(last)}`);
  // All but the namespace's kube-root-ca.crt, which the controller manager made and nobody touched.
  const names = converged.items.map((s) => s.split('@')[0]).filter((n) => n !== 'kube-root-ca.crt');
  assert.deepEqual(names, ['keep-2', 'keep-3', 'keep-4', 'keep-5', 'keep-6', 'keep-7', 'new-0', 'new-1']);
  // Nothing stale: the objects removed behind the apiserver's back are gone from the cache too.
  const current = await get(`${levee.url.origin}${path}?resourceVersion=0`, agent, env.tokens.admin, { 'user-agent': 'levee-test' });
  assert.deepEqual(summary((JSON.parse(current.body) as List).items), summary((await listDirect()).items));
  for (let i = 0; i < STALE; i++) {
    const r = await get(`${levee.url.origin}${path}/stale-${i}?resourceVersion=0`, agent, env.tokens.admin, { 'user-agent': 'levee-test' });
    assert.equal(r.status, 404, `stale-${i} is still in the cache: ${r.body.slice(0, 200)}`);
  }

  // The watch carried on through the relist: the differences arrived as events (the stale objects
  // as DELETED), and the events applied to the first list give the apiserver's state.
  await new Promise((r) => setTimeout(r, 500));
  watchAbort.abort();
  await watchDone;
  assert.equal(watchEnded, false, 'the relist ended the client watch');
  const state = new Map(initial.items.map((i) => [i.metadata.name, i.metadata.resourceVersion]));
  for (const e of watchEvents) {
    if (e.type === 'ADDED' || e.type === 'MODIFIED') state.set(e.object.metadata.name, e.object.metadata.resourceVersion);
    if (e.type === 'DELETED') state.delete(e.object.metadata.name);
  }
  const finalDirect = (await listDirect()).items.map((i) => `${i.metadata.name}@${i.metadata.resourceVersion}`).sort();
  assert.deepEqual([...state].map(([n, rv]) => `${n}@${rv}`).sort(), finalDirect);
  for (let i = 0; i < STALE; i++) assert.equal(watchEvents.some((e) => e.type === 'DELETED' && e.object.metadata.name === `stale-${i}`), true);
  // Per object, events keep their order and none comes twice: resourceVersions strictly increase.
  const rvByName = new Map<string, number>();
  for (const e of watchEvents) {
    if (e.type === 'BOOKMARK') continue;
    const rv = Number(e.object.metadata.resourceVersion);
    const prev = rvByName.get(e.object.metadata.name);
    assert.equal(prev === undefined || rv > prev, true, `${e.type} ${e.object.metadata.name}@${rv} after @${prev}`);
    rvByName.set(e.object.metadata.name, rv);
  }
  console.log(`client watch through the relist: ${watchEvents.length} events (${watchEvents.filter((e) => e.type === 'BOOKMARK').length} bookmarks), still open`);
});
