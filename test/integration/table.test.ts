// kubectl's Table from the cache, compared with the real apiserver's: the same objects in many
// states (test/support/states.ts), asked for directly and through Levee, in every form (includeObject,
// meta.k8s.io v1 and v1beta1, GET, LIST, pages, WATCH), equal byte for byte but for the times
// counted since a moment (Age, Restarts' "(3m ago)", a running Job's Duration). Then kubectl itself.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { request, type Agent } from 'undici';
import { loadEnv, type TestEnv } from '../env/testenv.ts';
import { startLevee, writeKubeconfig, type LeveeProcess } from '../support/levee.ts';
import { agentFor, get, send, suffix } from '../support/http.ts';
import { createNamespace, NO_SCHEDULER } from '../support/cluster.ts';
import { kubectl } from '../support/kubectl.ts';
import { createCustomStates, createStates, pathOf, type States } from '../support/states.ts';
import { persistentDifference, waitFor } from '../support/wait.ts';
import { leveeCounters } from '../support/counters.ts';
import { watchLines as readWatchLines } from '../support/watchstream.ts';

const TABLE = 'application/json;as=Table;v=v1;g=meta.k8s.io';
const TABLE_V1BETA1 = 'application/json;as=Table;v=v1beta1;g=meta.k8s.io';
// What kubectl get sends.
const KUBECTL = `${TABLE},${TABLE_V1BETA1},application/json`;

let env: TestEnv;
let agent: Agent;
let levee: LeveeProcess;
let states: States;
let custom: States;
let resources: States['resources'];
let viaLevee: string;
const ns = `table-${suffix()}`;

interface Answer {
  status: number;
  type: string;
  body: string;
}

async function fetchText(url: string, accept: string): Promise<Answer> {
  const r = await request(url, { dispatcher: agent, headers: { authorization: `Bearer ${env.tokens.admin}`, accept } });
  return { status: r.statusCode, type: String(r.headers['content-type']), body: await r.body.text() };
}

// What a cell counting time since a moment reads: 5s, 3m10s, 7 (3m ago), 2d3h, 6y330d.
const SINCE = /"(\d+ \()?\d+[smhdy](\d+[smhd])?( ago\))?"/g;
const timeless = (s: string): string => s.replace(SINCE, '"<since>"');




const { fromCache, forwardedForMedia, forwardedAll, forwardedLines } = leveeCounters(() => levee.url.origin, () => agent);

before(async () => {
  env = loadEnv();
  agent = agentFor(env.caFile);
  await createNamespace(env, agent, ns, { purpose: 'tables' });
  states = await createStates(env, agent, ns);
  custom = await createCustomStates(env, agent, ns, `${ns}.example.com`);
  resources = [...states.resources, ...custom.resources];
  levee = await startLevee({
    kubeconfig: env.kubeconfig,
    tls: env.leveeServing,
    // kubectl reads without a resourceVersion: answered from the cache as it is, so that every
    // one of its reads is (the comparisons below retry while the cache catches up).
    extra: ['--cache', resources.map((r) => r.resource).join(','), '--consistent-reads', 'cache'],
  });
  await waitFor('levee is ready', async () => (await get(`${levee.url.origin}/readyz`, agent)).status === 200, 30_000);
  viaLevee = writeKubeconfig(levee.url.href, env.caFile, env.tokens.admin);
});

after(async () => {
  await levee?.stop();
  await states?.cleanup();
  await custom?.cleanup();
  await send('DELETE', `${env.server}/api/v1/namespaces/${ns}`, agent, env.tokens.admin);
  await agent?.close();
});

test('the columns are the ones the Go printers of this Kubernetes release register', async () => {
  const module = path.resolve(import.meta.dirname, '../../testenv');
  // Not spawnSync: a cold build of the printers takes a minute on a slow machine, and a blocked
  // loop stops the fixture's node heartbeat (test/support/states.ts), after which the controller
  // manager marks the node's pods not ready and they print NotReady in the tests that follow.
  const r = await promisify(execFile)('go', ['run', '-trimpath', './cmd/tablecolumns'], { cwd: module, encoding: 'utf8', maxBuffer: 64 << 20 });
  assert.equal(r.stdout, readFileSync(path.resolve(import.meta.dirname, '../../src/represent/table/columns.json'), 'utf8'), 'columns.json is stale: regenerate it with `go run ./cmd/tablecolumns` in testenv/');
});

/**
 * A LIST through Levee (resourceVersion=0: from the cache) and the apiserver's at exactly that
 * resourceVersion, both as `accept` with `query`: their bytes but for the time cells.
 */
async function compareList(p: string, accept: string, query: string): Promise<{ cached: string; direct: string }> {
  const cached = await fetchText(`${levee.url.origin}${p}?resourceVersion=0${query}`, accept);
  assert.equal(cached.status, 200, `${p}?${query}: ${cached.body.slice(0, 300)}`);
  assert.equal(cached.type, 'application/json');
  const rv = (JSON.parse(cached.body) as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
  const direct = await fetchText(`${env.server}${p}?resourceVersion=${rv}&resourceVersionMatch=Exact${query}`, accept);
  assert.equal(direct.status, 200, direct.body);
  assert.equal(timeless(cached.body), timeless(direct.body), `${p}?${query} (${accept.split(',')[0]}) at resourceVersion ${rv}`);
  return { cached: cached.body, direct: direct.body };
}

interface Table {
  columnDefinitions: Array<{ name: string }> | null;
  rows: Array<{ cells: unknown[]; conditions?: unknown[]; object: { metadata?: { name?: string } } | null }>;
}

test('LIST Tables from the cache equal the apiserver\'s at the same resourceVersion, for every kind and form', async () => {
  const cachedBefore = await fromCache();
  const forwardedBefore = await forwardedForMedia();
  let lists = 0;
  for (const { resource, namespaced } of resources) {
    for (const namespace of namespaced ? [ns, undefined] : [undefined]) {
      for (const [accept, query] of [
        [KUBECTL, ''],
        [TABLE, '&includeObject=None'],
        [TABLE_V1BETA1, '&includeObject=Object'],
        [`${TABLE_V1BETA1},application/json`, '&includeObject=Metadata'],
      ] as const) {
        // All namespaces hold the whole cluster's objects: kubectl's own form suffices there.
        if (namespace === undefined && namespaced && accept !== KUBECTL) continue;
        await compareList(pathOf(resource, namespace), accept, query);
        lists++;
      }
    }
  }
  assert.equal((await fromCache()) - cachedBefore, lists, `every LIST was answered from the cache: ${await forwardedLines()}`);
  assert.equal((await forwardedForMedia()) - forwardedBefore, 0);
});

test('the states printed are the ones made: each pod shows its reason, as the apiserver shows it', async () => {
  const { direct } = await compareList(pathOf('pods', ns), KUBECTL, '');
  const rows = new Map((JSON.parse(direct) as Table).rows.map((r) => [r.cells[0] as string, r]));
  const status = (name: string): unknown => rows.get(name)?.cells[2];
  // Guards the comparison above: the pods are in the states the printer tells apart.
  assert.equal(status('crashloop'), 'CrashLoopBackOff');
  // Minutes since the fixture's 3m10s: a cold first run builds the Go printer check before this test.
  assert.match(String(rows.get('crashloop')?.cells[3]), /^7 \(\d+m\d*s? ago\)$/);
  assert.equal(status('init-crashloop'), 'Init:CrashLoopBackOff');
  assert.equal(status('init-error'), 'Init:Error');
  assert.equal(status('init-exit'), 'Init:ExitCode:2');
  assert.equal(status('init-signal'), 'Init:Signal:2');
  assert.equal(status('init-waiting'), 'Init:0/2');
  assert.equal(status('init-second'), 'Init:1/2');
  assert.equal(status('failed-signal'), 'Signal:9');
  assert.equal(status('failed-exit'), 'ExitCode:3');
  assert.equal(status('evicted'), 'Evicted');
  assert.equal(status('terminating'), 'Terminating');
  assert.equal(status('node-lost'), 'Unknown');
  assert.equal(status('terminated-deleting'), 'Completed');
  assert.equal(status('completed-one-running'), 'Running');
  assert.equal(status('completed-not-ready'), 'NotReady');
  assert.equal(status('completed-with-error'), 'Error');
  assert.equal(status('gated'), 'SchedulingGated');
  assert.equal(rows.get('sidecar')?.cells[1], '2/2');
  assert.equal(rows.get('gates')?.cells[8], '1/2');
  assert.deepEqual(rows.get('succeeded')?.conditions, [{ type: 'Completed', status: 'True', reason: 'Succeeded', message: 'The pod has completed successfully.' }]);
});

test('a custom resource\'s columns read every type and JSONPath form as the apiserver reads them', async () => {
  const { direct } = await compareList(pathOf(custom.resources[0]!.resource, ns), KUBECTL, '');
  const table = JSON.parse(direct) as Table;
  const cells = new Map(table.rows.map((r) => [r.cells[0] as string, r.cells]));
  const column = (name: string): number => table.columnDefinitions!.findIndex((c) => c.name === name);
  // Guards the comparison above: the values are the kinds the convertor tells apart.
  assert.equal(cells.get('full')?.[column('Ready')], 'True');
  assert.equal(cells.get('full')?.[column('Heavy')], 'b');
  // json.Marshal's text, HTML-escaped.
  assert.equal(cells.get('full')?.[column('Config')], '{"a":{"z":"\\u003c"},"b":[1,2.5,null]}');
  assert.equal(cells.get('full')?.[column('Nothing')], '<no value>');
  assert.equal(cells.get('full')?.[column('Missing')], null);
  assert.equal(cells.get('odd')?.[column('Replicas')], -9223372036854775808);
  assert.equal(cells.get('odd')?.[column('Mode')], '12.5');
  assert.equal(cells.get('odd')?.[column('Seen')], '<invalid>');
  assert.equal(cells.get('tiny')?.[column('Mode')], '1e-05');
  // An int64 compared with a float64 is an error that empties the cell, even when a later item
  // would match; float64 with float64 compares.
  assert.equal(cells.get('odd')?.[column('Mismatch')], null);
  assert.equal(cells.get('tiny')?.[column('Mismatch')], 'r');
  // The CRD without columns: Name and Age.
  const { direct: plain } = await compareList(pathOf(custom.resources[1]!.resource, ns), KUBECTL, '');
  assert.deepEqual((JSON.parse(plain) as Table).columnDefinitions!.map((c) => c.name), ['Name', 'Age']);
});

test('GET Tables from the cache equal the apiserver\'s, object by object', async () => {
  const cachedBefore = await fromCache();
  let gets = 0;
  for (const { resource, namespaced } of resources) {
    if (!namespaced) continue;
    const list = JSON.parse((await get(`${env.server}${pathOf(resource, ns)}`, agent, env.tokens.admin)).body) as { items: Array<{ metadata: { name: string } }> };
    assert.ok(list.items.length > 0, resource);
    for (const { metadata } of list.items) {
      const p = `${pathOf(resource, ns)}/${metadata.name}`;
      const difference = await persistentDifference(async () => {
        const direct = await fetchText(`${env.server}${p}`, KUBECTL);
        const cached = await fetchText(`${levee.url.origin}${p}?resourceVersion=0`, KUBECTL);
        gets++;
        assert.equal(cached.status, 200, cached.body);
        return timeless(cached.body) === timeless(direct.body) ? undefined : `${p}:\n${cached.body}\n${direct.body}`;
      }, 10);
      assert.equal(difference, undefined);
    }
  }
  assert.equal((await fromCache()) - cachedBefore, gets, await forwardedLines());
});

test('paged Table LISTs carry the apiserver\'s continue tokens and remaining counts', async () => {
  const p = pathOf('pods', ns);
  const first = await compareList(p, KUBECTL, '&limit=4');
  type ListMeta = { continue?: string; remainingItemCount?: number };
  let cont: ListMeta = (JSON.parse(first.cached) as { metadata: ListMeta }).metadata;
  assert.ok(cont.continue, 'a continue token');
  assert.ok((cont.remainingItemCount ?? 0) > 0);
  let pages = 1;
  while (cont.continue) {
    const q = `?limit=4&continue=${encodeURIComponent(cont.continue)}`;
    const cached: Answer = await fetchText(`${levee.url.origin}${p}${q}`, KUBECTL);
    const direct: Answer = await fetchText(`${env.server}${p}${q}`, KUBECTL);
    assert.equal(timeless(cached.body), timeless(direct.body), `page ${pages + 1}`);
    cont = (JSON.parse(cached.body) as { metadata: ListMeta }).metadata;
    pages++;
  }
  assert.ok(pages >= 3, `${pages} pages`);
});

test('an empty Table, an unknown object, a refused client and a refused includeObject are the apiserver\'s answers', async () => {
  // No row: `"rows":[]`.
  await compareList(pathOf('configmaps', ns), KUBECTL, '&labelSelector=none%3Dhere');
  const cachedBefore = await fromCache();
  // NotFound as each Accept has it written: compact JSON after a plain clause, indented JSON when
  // every clause asks for a conversion, protobuf when that is the first plain clause.
  for (const accept of [KUBECTL, TABLE, `${TABLE},application/vnd.kubernetes.protobuf`]) {
    const p = `${pathOf('pods', ns)}/missing`;
    const cached = await request(`${levee.url.origin}${p}?resourceVersion=0`, { dispatcher: agent, headers: { authorization: `Bearer ${env.tokens.admin}`, accept } });
    const direct = await request(`${env.server}${p}?resourceVersion=0`, { dispatcher: agent, headers: { authorization: `Bearer ${env.tokens.admin}`, accept } });
    assert.equal(cached.statusCode, 404);
    assert.equal(cached.headers['content-type'], direct.headers['content-type'], accept);
    assert.deepEqual(Buffer.from(await cached.body.arrayBuffer()), Buffer.from(await direct.body.arrayBuffer()), accept);
  }
  assert.equal((await fromCache()) - cachedBefore, 3, 'the NotFounds came from the cache');
  // A user the apiserver does not let list pods: its 403, in the same form.
  for (const accept of [KUBECTL, TABLE]) {
    const p = `${pathOf('pods', ns)}?resourceVersion=0`;
    const [cached, direct] = await Promise.all(
      [levee.url.origin, env.server].map(async (origin) => {
        const r = await request(`${origin}${p}`, { dispatcher: agent, headers: { authorization: `Bearer ${env.tokens.alice}`, accept } });
        return { status: r.statusCode, body: await r.body.text() };
      }),
    );
    assert.equal(cached!.status, 403);
    assert.deepEqual(cached, direct, accept);
  }
  // includeObject the apiserver refuses: its own 400, forwarded.
  const bad = await fetchText(`${levee.url.origin}${pathOf('pods', ns)}?resourceVersion=0&includeObject=All`, KUBECTL);
  const badDirect = await fetchText(`${env.server}${pathOf('pods', ns)}?resourceVersion=0&includeObject=All`, KUBECTL);
  assert.equal(bad.status, 400);
  assert.deepEqual(bad, badDirect);
  assert.match(await forwardedLines(), /reason="invalid"/);
});

const watchLines = (url: string, accept: string, done: (lines: string[]) => boolean, ms?: number): Promise<string[]> => readWatchLines(url, agent, env.tokens.admin, accept, done, ms);

const typeOf = (line: string): string => (JSON.parse(line) as { type: string }).type;
const notBookmarks = (lines: string[]): string[] => lines.filter((l) => typeOf(l) !== 'BOOKMARK');

test('Table watches from the cache send the apiserver\'s events: columns first, then rows, for every includeObject', async () => {
  const p = pathOf('pods', ns);
  const list = JSON.parse((await get(`${env.server}${p}`, agent, env.tokens.admin)).body) as { metadata: { resourceVersion: string } };
  const from = list.metadata.resourceVersion;
  const pod = `${p}/watched`;
  const writes = (async () => {
    await new Promise((r) => setTimeout(r, 1000));
    await send('POST', `${env.server}${p}`, agent, env.tokens.admin, { metadata: { name: 'watched', labels: { app: 'w' }, finalizers: ['example.com/levee-test'] }, spec: { nodeName: states.nodes[0], containers: [{ name: 'c', image: 'x' }] } });
    const current = JSON.parse((await get(`${env.server}${pod}`, agent, env.tokens.admin)).body) as Record<string, unknown>;
    await send('PUT', `${env.server}${pod}/status`, agent, env.tokens.admin, {
      ...current,
      status: { phase: 'Running', podIPs: [{ ip: '10.9.9.9' }], containerStatuses: [{ name: 'c', image: 'x', imageID: '', ready: false, restartCount: 1, state: { waiting: { reason: 'CrashLoopBackOff' } }, lastState: { terminated: { exitCode: 1, finishedAt: new Date(Date.now() - 95_000).toISOString().replace(/\.\d+Z/, 'Z') } } }] },
    });
    await send('DELETE', `${env.server}${pod}?gracePeriodSeconds=600`, agent, env.tokens.admin);
    await send('PATCH', `${env.server}${pod}`, agent, env.tokens.admin, { metadata: { finalizers: null } }, 'application/merge-patch+json');
    await send('DELETE', `${env.server}${pod}?gracePeriodSeconds=0`, agent, env.tokens.admin);
  })();
  const events = (lines: string[]): boolean => notBookmarks(lines).some((l) => typeOf(l) === 'DELETED' && l.includes('"watched"'));
  const forms = [
    [KUBECTL, ''],
    [TABLE, '&includeObject=None'],
    [TABLE_V1BETA1, '&includeObject=Object'],
  ] as const;
  const url = (origin: string, query: string) => `${origin}${p}?watch=true&resourceVersion=${from}${query}`;
  const cachedBefore = await fromCache();
  const watches = await Promise.all(forms.flatMap(([accept, query]) => [watchLines(url(levee.url.origin, query), accept, events), watchLines(url(env.server, query), accept, events)]));
  await writes;
  for (let i = 0; i < forms.length; i++) {
    const [cached, direct] = [watches[2 * i]!, watches[2 * i + 1]!];
    // The cluster's controllers may change other pods meanwhile: the watched one's events.
    const types = notBookmarks(cached).filter((l) => l.includes('"watched"')).map(typeOf);
    assert.ok(types[0] === 'ADDED' && types.at(-1) === 'DELETED' && types.length >= 5, types.join(','));
    assert.deepEqual(notBookmarks(cached).map(timeless), notBookmarks(direct).map(timeless), forms[i]!.join(' '));
    const tables = notBookmarks(cached).map((l) => (JSON.parse(l) as { object: Table }).object);
    assert.ok(tables[0]!.columnDefinitions !== null && tables.slice(1).every((t) => t.columnDefinitions === null), 'columns in the first event only');
  }
  // A watch is counted once it has ended, which the client's leaving ends a moment later.
  await waitFor('the watches counted', async () => (await fromCache()) - cachedBefore >= forms.length, 5000).catch(() => undefined);
  assert.equal((await fromCache()) - cachedBefore, forms.length, `the watches were served from the cache: ${await forwardedLines()}`);
});

test('a Table watch from resourceVersion 0 begins with the state and ends it with the apiserver\'s bookmark row', async () => {
  const p = pathOf('configmaps', ns);
  const url = (origin: string) => `${origin}${p}?watch=true&resourceVersion=0&allowWatchBookmarks=true&timeoutSeconds=5`;
  await send('POST', `${env.server}${p}`, agent, env.tokens.admin, { metadata: { name: 'bookmarked' } });
  // resourceVersion=0 is any state the server holds: compared, both must hold the new object. A
  // loaded machine can deliver it to Levee's cache a moment after the apiserver answered the POST.
  await waitFor('the cache holds the new object', async () => (await get(`${levee.url.origin}${p}/bookmarked?resourceVersion=0`, agent, env.tokens.admin)).status === 200, 10_000);
  const [cached, direct] = await Promise.all([watchLines(url(levee.url.origin), KUBECTL, () => false), watchLines(url(env.server), KUBECTL, () => false)]);
  const added = (lines: string[]) => lines.filter((l) => typeOf(l) === 'ADDED').map(timeless);
  assert.deepEqual(added(cached), added(direct));
  assert.ok(added(cached).length >= 3);
  // The state's end: a row of the kind's empty object, its metadata the annotated bookmark's.
  const end = (lines: string[]) => lines.find((l) => typeOf(l) === 'BOOKMARK' && l.includes('k8s.io/initial-events-end'))?.replace(/"\d+"/g, '"N"');
  assert.ok(end(cached), cached.join('\n'));
  assert.equal(end(cached), end(direct));
  // A bookmark before the deadline: the same row with the resourceVersion only.
  const later = cached.filter((l) => typeOf(l) === 'BOOKMARK' && !l.includes('k8s.io/initial-events-end'));
  assert.ok(later.length >= 1, 'a bookmark before the deadline');
  const bookmark = JSON.parse(later[0]!) as { object: Table & { metadata: { resourceVersion: string } } };
  assert.equal(bookmark.object.columnDefinitions, null);
  assert.deepEqual(bookmark.object.rows[0]!.cells, ['', 0, '<unknown>']);
  assert.deepEqual(bookmark.object.rows[0]!.object, { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: { resourceVersion: bookmark.object.metadata.resourceVersion } });
});

test('kubectl get, -o wide and --show-labels -A print through Levee what they print directly, from the cache', async () => {
  const k = (kubeconfig: string, args: string[]) => kubectl(env.kubectl, kubeconfig, args);
  const age = (s: string) => s.replace(/\b\d+(ms|s|m|h|d|y)(\d+(s|m|h|d))?\b/g, '<age>');
  const cachedBefore = await fromCache();
  const forwardedBefore = await forwardedAll();
  let lists = 0;
  for (const args of [
    ['get', 'pods', '-n', ns],
    ['get', 'pods', '-n', ns, '-o', 'wide'],
    ['get', 'pods', '--show-labels', '-A'],
    ['get', 'nodes', '-o', 'wide'],
    ['get', 'namespaces', '--show-labels'],
    ['get', 'services,endpoints,endpointslices', '-n', ns, '-o', 'wide'],
    ['get', 'configmaps,secrets,serviceaccounts,leases', '-n', ns],
    ['get', 'events', '-n', ns, '-o', 'wide'],
    ['get', 'deployments,replicasets,daemonsets,statefulsets,replicationcontrollers', '-n', ns, '-o', 'wide'],
    ['get', 'jobs,cronjobs', '-n', ns, '-o', 'wide'],
    ['get', 'pod', 'crashloop', '-n', ns],
    ['get', custom.resources.map((r) => r.resource).join(','), '-n', ns, '-o', 'wide', '--show-labels'],
  ]) {
    const difference = await persistentDifference(async () => {
      const [a, b] = await Promise.all([k(viaLevee, args), k(env.kubeconfig, args)]);
      // One LIST (or GET) per kind named.
      lists += args[1]!.split(',').length;
      assert.equal(a.code, 0, a.stderr);
      assert.equal(b.code, 0, b.stderr);
      return age(a.stdout) === age(b.stdout) ? undefined : `kubectl ${args.join(' ')}:\n${a.stdout}\n---\n${b.stdout}`;
    }, 5);
    assert.equal(difference, undefined);
  }
  assert.ok((await fromCache()) - cachedBefore >= lists, `kubectl's reads were answered from the cache: ${await forwardedLines()}`);
  assert.equal((await forwardedAll()) - forwardedBefore, 0, `${await forwardedLines()}\n${levee.output().split('\n').filter((l) => l.includes('"source":"upstream"')).slice(-5).join('\n')}`);
});

test('kubectl get --watch through Levee prints the same lines for a change', async () => {
  const watch = (kubeconfig: string) => {
    const child = spawn(env.kubectl, ['--kubeconfig', kubeconfig, 'get', 'pods', '-n', ns, '-l', 'app=kubectl-watch', '--watch', '--output-watch-events', '-o', 'wide'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    return { child, out: () => out };
  };
  const cachedBefore = await fromCache();
  const [a, b] = [watch(viaLevee), watch(env.kubeconfig)];
  const p = pathOf('pods', ns);
  try {
    // kubectl lists, then watches from the list's resourceVersion.
    await new Promise((r) => setTimeout(r, 2000));
    await send('POST', `${env.server}${p}`, agent, env.tokens.admin, { metadata: { name: 'kw', labels: { app: 'kubectl-watch' } }, spec: { schedulerName: NO_SCHEDULER, containers: [{ name: 'c', image: 'x' }] } });
    await send('PATCH', `${env.server}${p}/kw`, agent, env.tokens.admin, { metadata: { labels: { extra: 'yes' } } }, 'application/merge-patch+json');
    await send('DELETE', `${env.server}${p}/kw?gracePeriodSeconds=0`, agent, env.tokens.admin);
    const lines = (s: string) => s.trim().split('\n').filter((l) => l !== '');
    await waitFor('the deletion printed both ways', () => /DELETED/.test(a.out()) && /DELETED/.test(b.out()), 20_000);
    const age = (s: string) => s.replace(/\b\d+(ms|s|m|h|d)(\d+(s|m|h|d))?\b/g, '<age>');
    assert.deepEqual(lines(a.out()).map(age), lines(b.out()).map(age));
    assert.ok(lines(a.out()).length >= 4, a.out());
  } finally {
    a.child.kill();
    b.child.kill();
  }
  await waitFor('the watches counted', async () => (await fromCache()) - cachedBefore >= 2, 5000).catch(() => undefined);
  assert.ok((await fromCache()) - cachedBefore >= 2, `kubectl's list and watch came from the cache: ${await forwardedLines()}`);
});
