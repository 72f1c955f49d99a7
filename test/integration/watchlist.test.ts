// The reflector's initial state comes through watch-list streaming (KEP-3157) from the real
// apiserver: every object as ADDED, then the bookmark annotated k8s.io/initial-events-end, then the
// same stream goes on as the watch. The cache must hold exactly what the apiserver holds at the
// cache's resourceVersion, and changes made afterwards must reach it. A Levee whose identity may
// list but not watch gets a 403 for the watch-list request and falls back to the paged LIST.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Agent } from 'undici';
import { loadEnv, type TestEnv } from '../env/testenv.ts';
import { startLevee, writeKubeconfig, type LeveeProcess } from '../support/levee.ts';
import { agentFor, get, send, suffix } from '../support/http.ts';
import { createNamespace } from '../support/cluster.ts';

let env: TestEnv;
let agent: Agent;
let levee: LeveeProcess | undefined;
let listOnly: LeveeProcess | undefined;
const run = suffix();
const ns = `watchlist-${run}`;
const listOnlyRole = `levee-watchlist-list-only-${run}`;
const COUNT = 50;

interface LogLine {
  msg?: string;
  resource?: string;
  via?: string;
  objects?: number;
  changes?: number;
  resourceVersion?: number;
  err?: string;
}

interface List {
  metadata: { resourceVersion: string; continue?: string };
  items: Array<{ metadata: { name: string; resourceVersion: string } }>;
}

function logLines(l: LeveeProcess): LogLine[] {
  const out: LogLine[] = [];
  for (const line of l.output().split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      out.push(JSON.parse(line) as LogLine);
    } catch {
      // a line cut by the buffer being read mid-write
    }
  }
  return out;
}

async function waitReady(l: LeveeProcess): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if ((await get(`${l.url.origin}/readyz`, agent)).status === 200) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`levee never became ready:\n${l.output().slice(-3000)}`);
}

async function listJson(url: string): Promise<List> {
  const r = await get(url, agent, env.tokens.admin);
  assert.equal(r.status, 200, `${url}: ${r.body.slice(0, 300)}`);
  return JSON.parse(r.body) as List;
}

/** Levee's cached state of the namespace, and the apiserver's own at exactly that resourceVersion. */
async function compareWithApiserver(l: LeveeProcess, path: string): Promise<{ rv: string; items: number }> {
  const cached = await listJson(`${l.url.origin}${path}?resourceVersion=0`);
  assert.equal(cached.metadata.continue ?? '', '', 'an unlimited LIST from the cache has no continue token');
  const direct = await listJson(`${env.server}${path}?resourceVersion=${cached.metadata.resourceVersion}&resourceVersionMatch=Exact`);
  assert.equal(direct.metadata.resourceVersion, cached.metadata.resourceVersion);
  assert.deepEqual(cached.items, direct.items, `${path}: the cache differs from the apiserver at resourceVersion ${cached.metadata.resourceVersion}`);
  return { rv: cached.metadata.resourceVersion, items: cached.items.length };
}

async function cacheAnswers(l: LeveeProcess): Promise<number> {
  const metrics = (await get(`${l.url.origin}/metrics`, agent)).body;
  return [...metrics.matchAll(/levee_request_total\{[^}]*source="cache"[^}]*\} (\d+)/g)].reduce((n, m) => n + Number(m[1]), 0);
}

before(async () => {
  env = loadEnv();
  agent = agentFor(env.caFile);
  await createNamespace(env, agent, ns);
  const creates: Array<Promise<{ status: number; body: string }>> = [];
  for (let i = 0; i < COUNT; i++) {
    creates.push(send('POST', `${env.server}/api/v1/namespaces/${ns}/configmaps`, agent, env.tokens.admin, { metadata: { name: `cm-${i}`, labels: { app: `a${i % 4}` } }, data: { i: String(i), pad: 'x'.repeat(i * 37) } }));
  }
  for (const r of await Promise.all(creates)) assert.equal(r.status, 201, r.body);
});

after(async () => {
  await levee?.stop();
  await listOnly?.stop();
  await send('DELETE', `${env.server}/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${listOnlyRole}`, agent, env.tokens.admin);
  await send('DELETE', `${env.server}/apis/rbac.authorization.k8s.io/v1/clusterroles/${listOnlyRole}`, agent, env.tokens.admin);
  await agent?.close();
});

/** Waits until Levee has logged its initial sync of configmaps (logs are flushed every 250 ms). */
async function initialSync(l: LeveeProcess): Promise<LogLine> {
  for (let i = 0; i < 100; i++) {
    const listed = logLines(l).find((x) => x.msg === 'listed' && x.resource === 'configmaps');
    if (listed) return listed;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`no 'listed' line:\n${l.output().slice(-3000)}`);
}

test('the initial sync streams through watch-list, and the cache equals the apiserver', async () => {
  // Writes while Levee starts: the state compared below is the apiserver's at exactly the cache's
  // resourceVersion, whatever changed during the sync. Gentle, because the apiserver closes a
  // watch-list watcher whose buffer of pending events (about a second's worth) overflows while its
  // initial events are still being sent; the reflector then lists in pages, checked below too.
  let churning = true;
  let writes = 0;
  const churn = (async () => {
    const path = `${env.server}/api/v1/namespaces/${ns}/configmaps`;
    for (let k = 0; churning; k++) {
      const r = await send('PATCH', `${path}/cm-${k % COUNT}`, agent, env.tokens.admin, { data: { churn: String(k) } }, 'application/merge-patch+json');
      assert.equal(r.status, 200, r.body);
      writes++;
      await new Promise((res) => setTimeout(res, 100));
    }
  })();
  let listed: LogLine | undefined;
  const fallbacks: string[] = [];
  try {
    // Writes by other suites running at the same time can overflow that buffer as well: a start-up
    // whose watch-list was closed early must have fallen back to the paged LIST; Levee is then
    // started again, a few times at most.
    for (let attempt = 0; attempt < 4; attempt++) {
      await levee?.stop();
      levee = await startLevee({ kubeconfig: env.kubeconfig, tls: env.leveeServing, extra: ['--cache', 'configmaps'] });
      await waitReady(levee);
      listed = await initialSync(levee);
      if (listed.via === 'watch-list') break;
      const failed = logLines(levee).find((x) => x.msg === 'watch-list failed, listing in pages');
      assert.equal(listed.via, 'list', levee.output().slice(-3000));
      assert.match(failed?.err ?? '', /ended before the end of the initial events/, levee.output().slice(-3000));
      fallbacks.push(failed!.err!);
      await compareWithApiserver(levee, `/api/v1/namespaces/${ns}/configmaps`);
    }
  } finally {
    churning = false;
    await churn;
  }
  assert.ok(levee && listed);
  if (fallbacks.length > 0) console.log(`watch-list closed early by the apiserver ${fallbacks.length} time(s), fell back to LIST: ${fallbacks.join('; ')}`);

  // (a) Levee says how it listed.
  const lines = logLines(levee);
  assert.equal(listed.via, 'watch-list', levee.output().slice(-3000));
  assert.equal(levee.output().includes('"via":"watch-list"'), true);
  assert.equal(lines.filter((l) => l.msg === 'listed').length, 1, 'one initial sync');
  assert.deepEqual(lines.filter((l) => (l.msg ?? '').startsWith('watch-list')), [], 'no watch-list failure or fallback');
  assert.equal((listed.objects ?? 0) >= COUNT, true);

  // (b) The cache holds exactly what the apiserver holds at the cache's resourceVersion: for the
  // namespace, and for the whole resource (what other suites write concurrently included).
  const one = await compareWithApiserver(levee, `/api/v1/namespaces/${ns}/configmaps`);
  assert.equal(one.items >= COUNT, true);
  const all = await compareWithApiserver(levee, '/api/v1/configmaps');
  console.log(
    `watch-list sync: ${listed.objects} objects at resourceVersion ${listed.resourceVersion}, ${listed.changes} changes before the end bookmark, ` +
      `${writes} writes during start-up; namespace ${one.items} and cluster ${all.items} configmaps identical at ${all.rv}`,
  );

  // (c) Changes after the sync arrive through the same stream.
  const before = await cacheAnswers(levee);
  const created = await send('POST', `${env.server}/api/v1/namespaces/${ns}/configmaps`, agent, env.tokens.admin, { metadata: { name: 'after-sync' }, data: { k: 'v' } });
  assert.equal(created.status, 201, created.body);
  const createdRV = (JSON.parse(created.body) as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
  const path = `/api/v1/namespaces/${ns}/configmaps/after-sync?resourceVersion=${createdRV}`;
  const [viaLevee, direct] = await Promise.all([get(levee.url.origin + path, agent, env.tokens.admin), get(env.server + path, agent, env.tokens.admin)]);
  assert.equal(viaLevee.status, 200, viaLevee.body);
  assert.equal(viaLevee.body, direct.body);

  const patched = await send('PATCH', `${env.server}/api/v1/namespaces/${ns}/configmaps/cm-3`, agent, env.tokens.admin, { data: { later: 'yes' } }, 'application/merge-patch+json');
  assert.equal(patched.status, 200, patched.body);
  const patchedRV = (JSON.parse(patched.body) as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
  const got = await get(`${levee.url.origin}/api/v1/namespaces/${ns}/configmaps/cm-3?resourceVersion=${patchedRV}`, agent, env.tokens.admin);
  assert.equal(got.status, 200, got.body);
  assert.equal((JSON.parse(got.body) as { data: Record<string, string> }).data.later, 'yes');

  assert.equal((await send('DELETE', `${env.server}/api/v1/namespaces/${ns}/configmaps/cm-4`, agent, env.tokens.admin)).status, 200);
  const afterDelete = (await listJson(`${env.server}/api/v1/namespaces/${ns}/configmaps?limit=1`)).metadata.resourceVersion;
  const gone = await get(`${levee.url.origin}/api/v1/namespaces/${ns}/configmaps/cm-4?resourceVersion=${afterDelete}`, agent, env.tokens.admin);
  assert.equal(gone.status, 404, gone.body);
  assert.equal((await cacheAnswers(levee)) - before >= 3, true, 'the reads after the sync were answered from the cache');
  await compareWithApiserver(levee, `/api/v1/namespaces/${ns}/configmaps`);
});

test('an identity that may list but not watch falls back to the paged LIST', async () => {
  // A service account whose only permission on configmaps is list: the apiserver answers the
  // watch-list request 403, the paged LIST 200.
  const sa = 'list-only';
  assert.equal((await send('POST', `${env.server}/api/v1/namespaces/${ns}/serviceaccounts`, agent, env.tokens.admin, { metadata: { name: sa } })).status, 201);
  const role = await send('POST', `${env.server}/apis/rbac.authorization.k8s.io/v1/clusterroles`, agent, env.tokens.admin, {
    metadata: { name: listOnlyRole },
    rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['list'] }],
  });
  assert.equal(role.status, 201, role.body);
  const binding = await send('POST', `${env.server}/apis/rbac.authorization.k8s.io/v1/clusterrolebindings`, agent, env.tokens.admin, {
    metadata: { name: listOnlyRole },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: listOnlyRole },
    subjects: [{ kind: 'ServiceAccount', name: sa, namespace: ns }],
  });
  assert.equal(binding.status, 201, binding.body);
  const tr = await send('POST', `${env.server}/api/v1/namespaces/${ns}/serviceaccounts/${sa}/token`, agent, env.tokens.admin, {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: { expirationSeconds: 3600 },
  });
  assert.equal(tr.status, 201, tr.body);
  const token = (JSON.parse(tr.body) as { status: { token: string } }).status.token;

  // RBAC decisions reach the authorizer's informer shortly after the binding is written.
  for (let i = 0; ; i++) {
    const [canList, canWatch] = await Promise.all([
      get(`${env.server}/api/v1/configmaps?limit=1`, agent, token),
      get(`${env.server}/api/v1/configmaps?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion=&timeoutSeconds=1`, agent, token),
    ]);
    if (canList.status === 200) {
      assert.equal(canWatch.status, 403, canWatch.body.slice(0, 300));
      break;
    }
    assert.equal(i < 50, true, `the list-only identity never could list: ${canList.status}`);
    await new Promise((r) => setTimeout(r, 100));
  }

  listOnly = await startLevee({ kubeconfig: writeKubeconfig(env.server, env.caFile, token), tls: env.leveeServing, extra: ['--cache', 'configmaps'] });
  await waitReady(listOnly);
  await initialSync(listOnly);
  const lines = logLines(listOnly);
  const failed = lines.filter((l) => l.msg === 'watch-list failed, listing in pages');
  assert.equal(failed.length >= 1, true, listOnly.output().slice(-3000));
  assert.match(failed[0]!.err ?? '', /403/);
  // A 403 says nothing about watch-list support: it is tried again at the next relist.
  assert.equal(lines.some((l) => (l.msg ?? '').startsWith('watch-list not supported')), false);
  const listed = lines.filter((l) => l.msg === 'listed' && l.resource === 'configmaps');
  assert.equal(listed[0]?.via, 'list', listOnly.output().slice(-3000));
  // The state the paged LIST stored is the apiserver's at the cache's resourceVersion.
  await compareWithApiserver(listOnly, `/api/v1/namespaces/${ns}/configmaps`);
});
