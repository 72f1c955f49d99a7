// PartialObjectMetadata and PartialObjectMetadataList in JSON from the cache, compared byte for
// byte with the real apiserver's: LIST (pages, empty lists), GET, WATCH and watch-list, for
// built-in kinds and custom resources, meta.k8s.io v1 and v1beta1, and their errors.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { request, type Agent } from 'undici';
import { loadEnv, type TestEnv } from '../env/testenv.ts';
import { startLevee, type LeveeProcess } from '../support/levee.ts';
import { agentFor, get, send, suffix } from '../support/http.ts';
import { createNamespace } from '../support/cluster.ts';
import { createCustomStates, createStates, pathOf, type States } from '../support/states.ts';
import { persistentDifference, waitFor } from '../support/wait.ts';
import { leveeCounters } from '../support/counters.ts';
import { watchLines as readWatchLines } from '../support/watchstream.ts';

const META = 'meta.k8s.io';
const list = (v: string, more = ''): string => `application/json;as=PartialObjectMetadataList;g=${META};v=${v}${more}`;
const one = (v: string, more = ''): string => `application/json;as=PartialObjectMetadata;g=${META};v=${v}${more}`;
const PROTOBUF = 'application/vnd.kubernetes.protobuf';

let env: TestEnv;
let agent: Agent;
let levee: LeveeProcess;
let states: States;
let custom: States;
let resources: States['resources'];
const ns = `metadata-${suffix()}`;

interface Answer {
  status: number;
  type: string;
  body: Buffer;
}

async function fetchBytes(url: string, accept: string): Promise<Answer> {
  const r = await request(url, { dispatcher: agent, headers: { authorization: `Bearer ${env.tokens.admin}`, accept } });
  return { status: r.statusCode, type: String(r.headers['content-type']), body: Buffer.from(await r.body.arrayBuffer()) };
}




const { fromCache, forwardedForMedia, forwardedLines } = leveeCounters(() => levee.url.origin, () => agent);

before(async () => {
  env = loadEnv();
  agent = agentFor(env.caFile);
  await createNamespace(env, agent, ns);
  states = await createStates(env, agent, ns);
  custom = await createCustomStates(env, agent, ns, `${ns}.example.com`);
  resources = [...states.resources, ...custom.resources];
  levee = await startLevee({ kubeconfig: env.kubeconfig, tls: env.leveeServing, extra: ['--cache', resources.map((r) => r.resource).join(',')] });
  await waitFor('levee is ready', async () => (await get(`${levee.url.origin}/readyz`, agent)).status === 200, 30_000);
});

after(async () => {
  await levee?.stop();
  await states?.cleanup();
  await custom?.cleanup();
  await send('DELETE', `${env.server}/api/v1/namespaces/${ns}`, agent, env.tokens.admin);
  await agent?.close();
});

/** A LIST through Levee from the cache and the apiserver's at exactly its resourceVersion, as `accept`. */
async function compareList(p: string, accept: string, query = ''): Promise<Buffer> {
  const cached = await fetchBytes(`${levee.url.origin}${p}?resourceVersion=0${query}`, accept);
  assert.equal(cached.status, 200, `${p}: ${cached.body.toString().slice(0, 300)}`);
  assert.equal(cached.type, 'application/json');
  const rv = (JSON.parse(cached.body.toString()) as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
  const direct = await fetchBytes(`${env.server}${p}?resourceVersion=${rv}&resourceVersionMatch=Exact${query}`, accept);
  assert.equal(direct.status, 200);
  assert.equal(cached.body.toString(), direct.body.toString(), `${p}${query} (${accept}) at resourceVersion ${rv}`);
  return cached.body;
}

test('PartialObjectMetadataLists from the cache equal the apiserver\'s at the same resourceVersion, for every kind', async () => {
  const cachedBefore = await fromCache();
  const forwardedBefore = await forwardedForMedia();
  let lists = 0;
  for (const { resource, namespaced } of resources) {
    for (const namespace of namespaced ? [ns, undefined] : [undefined]) {
      for (const accept of [list('v1'), `${list('v1beta1')},application/json`, `${PROTOBUF};as=Table;g=${META};v=v1,${list('v1')}`]) {
        await compareList(pathOf(resource, namespace), accept);
        lists++;
      }
    }
  }
  assert.equal((await fromCache()) - cachedBefore, lists, `every LIST was answered from the cache: ${await forwardedLines()}`);
  assert.equal((await forwardedForMedia()) - forwardedBefore, 0);
});

test('metadata is the internal object\'s: no annotation the conversion keeps as a field, and a custom resource\'s in the typed order', async () => {
  const ds = JSON.parse((await get(`${env.server}${pathOf('daemonsets.apps', ns)}/agent`, agent, env.tokens.admin)).body) as { metadata: { annotations?: Record<string, string> } };
  assert.ok(ds.metadata.annotations?.['deprecated.daemonset.template.generation'], 'the v1 object carries it');
  const meta = await fetchBytes(`${levee.url.origin}${pathOf('daemonsets.apps', ns)}/agent?resourceVersion=0`, one('v1'));
  assert.equal((JSON.parse(meta.body.toString()) as { metadata: { annotations?: unknown } }).metadata.annotations, undefined);
  const gadget = (await fetchBytes(`${levee.url.origin}${pathOf(custom.resources[0]!.resource, ns)}/full?resourceVersion=0`, one('v1'))).body.toString();
  assert.deepEqual(Object.keys((JSON.parse(gadget) as { metadata: object }).metadata), ['name', 'generateName', 'namespace', 'uid', 'resourceVersion', 'generation', 'creationTimestamp', 'labels', 'annotations', 'finalizers', 'managedFields']);
});

test('pages and empty lists are the apiserver\'s too', async () => {
  // An empty list's items are null.
  assert.match((await compareList(pathOf('configmaps', ns), list('v1'), '&labelSelector=nothing%3Dhere')).toString(), /"items":null/);
  let body = await compareList(pathOf('pods', ns), list('v1beta1'), '&limit=5');
  let meta = (JSON.parse(body.toString()) as { metadata: { continue?: string; remainingItemCount?: number } }).metadata;
  assert.ok(meta.continue && (meta.remainingItemCount ?? 0) > 0);
  let pages = 1;
  while (meta.continue) {
    const q = `?limit=5&continue=${encodeURIComponent(meta.continue)}`;
    const cached = await fetchBytes(`${levee.url.origin}${pathOf('pods', ns)}${q}`, list('v1beta1'));
    const direct = await fetchBytes(`${env.server}${pathOf('pods', ns)}${q}`, list('v1beta1'));
    assert.equal(cached.body.toString(), direct.body.toString());
    body = cached.body;
    meta = (JSON.parse(body.toString()) as { metadata: typeof meta }).metadata;
    pages++;
  }
  assert.ok(pages >= 3);
});

test('PartialObjectMetadata of each object from the cache equals the apiserver\'s', async () => {
  const cachedBefore = await fromCache();
  let gets = 0;
  for (const { resource, namespaced } of resources) {
    if (!namespaced) continue;
    const items = (JSON.parse((await get(`${env.server}${pathOf(resource, ns)}`, agent, env.tokens.admin)).body) as { items: Array<{ metadata: { name: string } }> }).items;
    for (const { metadata } of items) {
      const p = `${pathOf(resource, ns)}/${metadata.name}`;
      for (const accept of [one('v1'), one('v1beta1', ',application/json')]) {
        const difference = await persistentDifference(async () => {
          const direct = await fetchBytes(`${env.server}${p}`, accept);
          const cached = await fetchBytes(`${levee.url.origin}${p}?resourceVersion=0`, accept);
          gets++;
          return cached.body.equals(direct.body) ? undefined : `${p} (${accept}):\n${cached.body.toString()}\n${direct.body.toString()}`;
        }, 10);
        assert.equal(difference, undefined);
      }
    }
  }
  assert.equal((await fromCache()) - cachedBefore, gets, await forwardedLines());
});

test('errors of a metadata-only request are written as the apiserver writes them', async () => {
  const p = `${pathOf('configmaps', ns)}/missing`;
  const cachedBefore = await fromCache();
  // Indented JSON when every clause asks for a conversion; else the first plain clause's media,
  // even when the conversion asked for first is protobuf.
  for (const accept of [one('v1'), one('v1', ',application/json'), `${PROTOBUF};as=PartialObjectMetadata;g=${META};v=v1,application/json`, `${PROTOBUF};as=PartialObjectMetadata;g=${META};v=v1`]) {
    const cached = await fetchBytes(`${levee.url.origin}${p}?resourceVersion=0`, accept);
    const direct = await fetchBytes(`${env.server}${p}?resourceVersion=0`, accept);
    assert.equal(cached.status, 404);
    assert.equal(cached.type, direct.type, accept);
    assert.ok(cached.body.equals(direct.body), `${accept}:\n${cached.body.toString()}\n${direct.body.toString()}`);
  }
  assert.equal((await fromCache()) - cachedBefore, 4);
  // Metadata of one object asked of a list: the apiserver's 406, forwarded.
  const wrong = await fetchBytes(`${levee.url.origin}${pathOf('configmaps', ns)}?resourceVersion=0`, one('v1'));
  const wrongDirect = await fetchBytes(`${env.server}${pathOf('configmaps', ns)}?resourceVersion=0`, one('v1'));
  assert.equal(wrong.status, 406);
  assert.ok(wrong.body.equals(wrongDirect.body));
});

const watchLines = (url: string, accept: string, done: (lines: string[]) => boolean, ms?: number): Promise<string[]> => readWatchLines(url, agent, env.tokens.admin, accept, done, ms);

const typeOf = (line: string): string => (JSON.parse(line) as { type: string }).type;

test('metadata-only watches from the cache send the apiserver\'s events, for built-in kinds and custom resources', async () => {
  const cachedBefore = await fromCache();
  for (const [resource, body] of [
    ['configmaps', { metadata: { name: 'watched', labels: { a: 'b' } }, data: { k: 'v' } }],
    [custom.resources[1]!.resource, { apiVersion: `${ns}.example.com/v1`, kind: 'PlainThing', metadata: { name: 'watched', annotations: { z: '<' } }, spec: {} }],
  ] as const) {
    const p = pathOf(resource, ns);
    const from = (JSON.parse((await get(`${env.server}${p}`, agent, env.tokens.admin)).body) as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
    const writes = (async () => {
      await new Promise((r) => setTimeout(r, 1000));
      await send('POST', `${env.server}${p}`, agent, env.tokens.admin, body);
      await send('PATCH', `${env.server}${p}/watched`, agent, env.tokens.admin, { metadata: { labels: { c: 'd' } } }, 'application/merge-patch+json');
      await send('DELETE', `${env.server}${p}/watched`, agent, env.tokens.admin);
    })();
    const done = (lines: string[]): boolean => lines.some((l) => typeOf(l) === 'DELETED' && l.includes('"watched"'));
    const url = (origin: string) => `${origin}${p}?watch=true&resourceVersion=${from}`;
    const [cached, direct, cachedBeta, directBeta] = await Promise.all([
      watchLines(url(levee.url.origin), one('v1'), done),
      watchLines(url(env.server), one('v1'), done),
      watchLines(url(levee.url.origin), one('v1beta1', ',application/json'), done),
      watchLines(url(env.server), one('v1beta1', ',application/json'), done),
    ]);
    await writes;
    assert.deepEqual(cached.filter((l) => l.includes('"watched"')).map(typeOf), ['ADDED', 'MODIFIED', 'DELETED']);
    assert.deepEqual(cached, direct, resource);
    assert.deepEqual(cachedBeta, directBeta, resource);
  }
  // A watch is counted once it has ended, which the client's leaving ends a moment later.
  await waitFor('the watches counted', async () => (await fromCache()) - cachedBefore >= 4, 5000).catch(() => undefined);
  assert.equal((await fromCache()) - cachedBefore, 4, await forwardedLines());
});

test('a metadata-only watch-list begins with the apiserver\'s state and ends it with its bookmark', async () => {
  const p = pathOf('pods', ns);
  const url = (origin: string) => `${origin}${p}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0&allowWatchBookmarks=true`;
  const untilEnd = (lines: string[]): boolean => lines.some((l) => l.includes('k8s.io/initial-events-end'));
  const cachedBefore = await fromCache();
  const difference = await persistentDifference(async () => {
    const [cached, direct] = await Promise.all([watchLines(url(levee.url.origin), one('v1'), untilEnd), watchLines(url(env.server), one('v1'), untilEnd)]);
    const added = (lines: string[]) => lines.filter((l) => typeOf(l) === 'ADDED');
    assert.ok(added(cached).length > 20);
    // The end's bookmark carries, besides what the apiserver writes, the list blueprint client-go
    // 1.32 and 1.33 need (README, "Differences from the apiserver").
    const end = (lines: string[]) =>
      JSON.stringify((JSON.parse(lines.find((l) => l.includes('k8s.io/initial-events-end'))!) as { object: { metadata: { annotations: Record<string, string>; resourceVersion?: string } } }).object, (k, v: unknown) =>
        k === 'kubernetes.io/initial-events-list-blueprint' || k === 'resourceVersion' ? undefined : v,
      );
    if (end(cached) !== end(direct)) return `${end(cached)}\n${end(direct)}`;
    return JSON.stringify(added(cached)) === JSON.stringify(added(direct)) ? undefined : 'the initial events differ';
  }, 5);
  assert.equal(difference, undefined);
  await waitFor('the watch-lists counted', async () => (await fromCache()) - cachedBefore >= 1, 5000).catch(() => undefined);
  assert.ok((await fromCache()) - cachedBefore >= 1, await forwardedLines());
});
