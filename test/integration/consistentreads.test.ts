// Reads without a resourceVersion (consistent reads) and watch-list starts, as today's clients send
// them, against the real apiserver while other objects change about 50 times a second: the cached
// resources stay quiet, so the cache advances only through Levee's own proof (a consistent LIST,
// then a bookmark probe), never through their own events. Whatever Levee answers from its cache
// holds every write completed before the request began.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { request, type Agent } from 'undici';
import { loadEnv, type TestEnv } from '../env/testenv.ts';
import { agentFor, get, send, suffix } from '../support/http.ts';
import { startLevee, type LeveeProcess } from '../support/levee.ts';
import { waitFor, waitReady } from '../support/wait.ts';

let env: TestEnv;
let agent: Agent;
let levee: LeveeProcess;
const run = suffix();
const ns = `consistent-${run}`;
const large = `consistent-large-${run}`;
const churnNs = `consistent-churn-${run}`;
let churning = true;
let churn: Promise<void> | undefined;

interface WatchEvent {
  type: string;
  object: { metadata?: { name?: string; resourceVersion?: string; annotations?: Record<string, string> }; code?: number };
}

/** A watch-list start read to its end bookmark (or the end of the stream), with its request id. */
async function watchList(origin: string, path: string, query: string): Promise<{ status: number; events: WatchEvent[]; id: string }> {
  const id = randomUUID();
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), 20_000);
  const res = await request(`${origin}${path}?${query}`, {
    dispatcher: agent,
    headers: { authorization: `Bearer ${env.tokens.admin}`, accept: 'application/json', 'audit-id': id },
    signal: ac.signal,
  });
  const events: WatchEvent[] = [];
  if (res.statusCode !== 200) {
    await res.body.text();
    clearTimeout(timer);
    return { status: res.statusCode, events, id };
  }
  let buffered = '';
  try {
    for await (const chunk of res.body) {
      buffered += (chunk as Buffer).toString();
      let nl;
      while ((nl = buffered.indexOf('\n')) !== -1) {
        const e = JSON.parse(buffered.slice(0, nl)) as WatchEvent;
        buffered = buffered.slice(nl + 1);
        events.push(e);
        if (e.type === 'BOOKMARK' && e.object.metadata?.annotations?.['k8s.io/initial-events-end'] === 'true') {
          ac.abort();
        }
      }
    }
  } catch (err) {
    if (!ac.signal.aborted) throw err;
  } finally {
    clearTimeout(timer);
  }
  return { status: res.statusCode, events, id };
}

/** Where Levee answered the request with this Audit-Id, from its request log line. */
async function sourceOf(id: string): Promise<string> {
  let line: RegExpExecArray | null = null;
  await waitFor(`the log line of request ${id}`, () => (line = new RegExp(`"requestId":"${id}"[^\\n]*"source":"(\\w+)"`).exec(levee.output())) !== null);
  return line![1]!;
}

async function names(url: string): Promise<string[]> {
  const r = await get(url, agent, env.tokens.admin);
  assert.equal(r.status, 200, r.body.slice(0, 300));
  return (JSON.parse(r.body) as { items: Array<{ metadata: { name: string } }> }).items.map((o) => o.metadata.name).sort();
}

/**
 * The names a client holds at the end bookmark: the initial events and any change after them,
 * folded as client-go folds them (the apiserver, too, sends changes before that bookmark).
 */
function heldAtEnd(events: WatchEvent[]): string[] {
  const names = new Set<string>();
  for (const e of events) {
    const name = e.object.metadata?.name;
    if (name === undefined || e.type === 'BOOKMARK') continue;
    if (e.type === 'DELETED') names.delete(name);
    else names.add(name);
  }
  return [...names].sort();
}

function endBookmark(events: WatchEvent[]): WatchEvent['object'] {
  const last = events.at(-1);
  assert.equal(last?.type, 'BOOKMARK', JSON.stringify(last));
  assert.equal(last.object.metadata?.annotations?.['k8s.io/initial-events-end'], 'true');
  return last.object;
}

function metric(text: string, name: string, labels: string): number {
  const m = new RegExp(`^${name}\\{${labels}\\} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

before(async () => {
  env = loadEnv();
  agent = agentFor(env.caFile);
  for (const n of [ns, large, churnNs]) assert.equal((await send('POST', `${env.server}/api/v1/namespaces`, agent, env.tokens.admin, { metadata: { name: n } })).status, 201);
  for (let i = 0; i < 5; i++) {
    await send('POST', `${env.server}/api/v1/namespaces/${ns}/configmaps`, agent, env.tokens.admin, { metadata: { name: `cm-${i}`, labels: { tier: i % 2 ? 'odd' : 'even' } } });
  }
  // Over a mebibyte: a LIST of it is large enough to be worth a proof.
  for (let i = 0; i < 12; i++) {
    await send('POST', `${env.server}/api/v1/namespaces/${large}/configmaps`, agent, env.tokens.admin, { metadata: { name: `big-${i}` }, data: { v: 'x'.repeat(100_000) } });
  }
  for (let i = 0; i < 10; i++) {
    await send('POST', `${env.server}/apis/coordination.k8s.io/v1/namespaces/${churnNs}/leases`, agent, env.tokens.admin, { metadata: { name: `l-${i}` }, spec: { holderIdentity: 'x' } });
  }
  // Lease renewals elsewhere, as in any cluster: etcd's revision moves, the cached resources do not.
  churn = (async () => {
    for (let i = 0; churning; i++) {
      await send('PATCH', `${env.server}/apis/coordination.k8s.io/v1/namespaces/${churnNs}/leases/l-${i % 10}`, agent, env.tokens.admin, { spec: { holderIdentity: `h-${i}` } }, 'application/merge-patch+json');
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  levee = await startLevee({ kubeconfig: env.kubeconfig, tls: env.leveeServing, extra: ['--cache', 'configmaps,namespaces'] });
  await waitReady(levee, agent);
});

after(async () => {
  churning = false;
  await churn;
  await levee?.stop();
  for (const n of [ns, large, churnNs]) await send('DELETE', `${env.server}/api/v1/namespaces/${n}`, agent, env.tokens.admin);
  await agent.close();
});

const WATCH_LIST = 'watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=30';

test('watch-list starts of every form client-go sends are answered from the cache, proven fresh while the resource is quiet', async () => {
  // Quiet: nothing in configmaps or namespaces has changed for a while; the leases have.
  await new Promise((r) => setTimeout(r, 2000));
  const path = `/api/v1/namespaces/${ns}/configmaps`;
  const forms: Array<[string, string, string, string]> = [
    ['namespaced, no resourceVersion (client-go 1.35+)', path, WATCH_LIST, ''],
    ['with a label selector', path, `${WATCH_LIST}&labelSelector=tier%3Dodd`, 'labelSelector=tier%3Dodd'],
    ['cluster-scoped', '/api/v1/namespaces', WATCH_LIST, ''],
    ['every namespace', '/api/v1/configmaps', `${WATCH_LIST}&fieldSelector=metadata.namespace%3D${ns}`, `fieldSelector=metadata.namespace%3D${ns}`],
  ];
  for (const [what, p, query, listQuery] of forms) {
    const before = performance.now();
    const answer = await watchList(levee.url.origin, p, query);
    const ms = performance.now() - before;
    assert.equal(answer.status, 200, what);
    const end = endBookmark(answer.events);
    // The apiserver's state at the same resourceVersion: namespaces are cluster-wide, and other
    // tests create and delete theirs meanwhile.
    const exact = `resourceVersion=${end.metadata!.resourceVersion}&resourceVersionMatch=Exact`;
    assert.deepEqual(heldAtEnd(answer.events), await names(`${env.server}${p}?${listQuery ? `${listQuery}&` : ''}${exact}`), what);
    // client-go 1.32 and 1.33 want an empty list of the resource here, base64.
    const blueprint = JSON.parse(Buffer.from(end.metadata!.annotations!['kubernetes.io/initial-events-list-blueprint']!, 'base64').toString()) as { kind: string; items: unknown };
    assert.equal(blueprint.kind, p === '/api/v1/namespaces' ? 'NamespaceList' : 'ConfigMapList', what);
    assert.equal(blueprint.items, null);
    assert.equal(await sourceOf(answer.id), 'cache', `${what}: forwarded\n${levee.output().slice(-2000)}`);
    console.log(`${what}: initial state from the cache in ${Math.round(ms)} ms`);
  }
  // With a resourceVersion (NotOlderThan), and from 0: no proof needed, from the cache too.
  const listed = JSON.parse((await get(`${env.server}${path}`, agent, env.tokens.admin)).body) as { metadata: { resourceVersion: string } };
  for (const rv of [listed.metadata.resourceVersion, '0']) {
    const answer = await watchList(levee.url.origin, path, `${WATCH_LIST}&resourceVersion=${rv}`);
    assert.equal(answer.status, 200);
    assert.deepEqual(heldAtEnd(answer.events), await names(`${env.server}${path}`));
    endBookmark(answer.events);
    assert.equal(await sourceOf(answer.id), 'cache', `resourceVersion=${rv}`);
  }
});

test('read your writes: a watch-list or large LIST right after a write holds it', async () => {
  for (let i = 0; i < 5; i++) {
    const name = `ryw-${i}`;
    const created = await send('POST', `${env.server}/api/v1/namespaces/${ns}/configmaps`, agent, env.tokens.admin, { metadata: { name } });
    assert.equal(created.status, 201);
    const answer = await watchList(levee.url.origin, `/api/v1/namespaces/${ns}/configmaps`, WATCH_LIST);
    assert.ok(heldAtEnd(answer.events).includes(name), `${name} missing from the initial state`);
    const rv = Number((JSON.parse(created.body) as { metadata: { resourceVersion: string } }).metadata.resourceVersion);
    assert.ok(Number(endBookmark(answer.events).metadata!.resourceVersion) >= rv);
    const bigName = `big-ryw-${i}`;
    await send('POST', `${env.server}/api/v1/namespaces/${large}/configmaps`, agent, env.tokens.admin, { metadata: { name: bigName }, data: { v: 'y' } });
    const r = await get(`${levee.url.origin}/api/v1/namespaces/${large}/configmaps`, agent, env.tokens.admin);
    assert.equal(r.status, 200);
    assert.ok((JSON.parse(r.body) as { items: Array<{ metadata: { name: string } }> }).items.some((o) => o.metadata.name === bigName), `${bigName} missing`);
    // Quiet again before the next round.
    await new Promise((r) => setTimeout(r, 300));
  }
});

test('a large consistent LIST waits for the proof and is answered from the cache; small reads go to the apiserver', async () => {
  await new Promise((r) => setTimeout(r, 1500));
  const before = (await get(`${levee.url.origin}/metrics`, agent)).body;
  const listed = await get(`${levee.url.origin}/api/v1/namespaces/${large}/configmaps`, agent, env.tokens.admin);
  assert.equal(listed.status, 200);
  assert.equal(listed.headers['levee-consistent-read'], 'verified');
  assert.ok(listed.body.length > 1024 * 1024);
  assert.deepEqual((JSON.parse(listed.body) as { items: Array<{ metadata: { name: string } }> }).items.map((o) => o.metadata.name).sort(), await names(`${env.server}/api/v1/namespaces/${large}/configmaps`));
  // A small LIST and a GET cost the apiserver less than a proof: forwarded, and counted so.
  const small = await get(`${levee.url.origin}/api/v1/namespaces/${ns}/configmaps`, agent, env.tokens.admin);
  assert.equal(small.status, 200);
  assert.equal(small.headers['levee-consistent-read'], undefined);
  const one = await get(`${levee.url.origin}/api/v1/namespaces/${ns}/configmaps/cm-1`, agent, env.tokens.admin);
  assert.equal(one.status, 200);
  const after = (await get(`${levee.url.origin}/metrics`, agent)).body;
  const delta = (name: string, labels: string) => metric(after, name, labels) - metric(before, name, labels);
  assert.equal(delta('levee_read_forwarded_total', 'reason="consistency-cost"'), 2);
  assert.equal(delta('levee_consistent_reads_total', 'resource="configmaps",result="verified"'), 1);
  assert.equal(delta('levee_consistent_reads_total', 'resource="configmaps",result="forwarded"'), 2);
  assert.ok((delta('levee_consistent_read_bytes_total', 'resource="configmaps",source="cache"')) > 1024 * 1024);
  assert.ok((delta('levee_consistent_read_bytes_total', 'resource="configmaps",source="upstream"')) > 0);
  assert.ok((delta('levee_consistent_read_wait_seconds_count', 'resource="configmaps"')) >= 1);
});

test('a client-go informer asking for JSON starts from the cache through watch-list and converges', async () => {
  const verified = async (): Promise<number> => metric((await get(`${levee.url.origin}/metrics`, agent)).body, 'levee_consistent_reads_total', 'resource="configmaps",result="verified"');
  const verifiedBefore = await verified();
  const child = spawn(env.informer, ['--server', levee.url.origin, '--token', env.tokens.admin, '--ca', env.caFile, '--namespace', ns, '--json'], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  try {
    await waitFor('the informer synced', () => out.includes('synced\n') || child.exitCode !== null, 20_000);
    assert.match(out, /synced/, err);
    // Its start, a consistent watch-list, was proven fresh and answered from the cache, which it
    // goes on watching.
    assert.ok((await verified()) > verifiedBefore, 'the informer\'s watch-list was not answered from the cache');
    assert.ok(metric((await get(`${levee.url.origin}/metrics`, agent)).body, 'levee_watchers', 'resource="configmaps"') >= 1, 'the informer does not watch the cache');
    const cm = `${env.server}/api/v1/namespaces/${ns}/configmaps`;
    for (let i = 0; i < 10; i++) await send('POST', cm, agent, env.tokens.admin, { metadata: { name: `go-${i}` } });
    const want = (JSON.parse((await get(cm, agent, env.tokens.admin)).body) as { items: Array<{ metadata: { name: string; resourceVersion: string } }> }).items
      .map((o) => `${o.metadata.name}@${o.metadata.resourceVersion}`)
      .sort()
      .join(' ');
    let have = '';
    for (let i = 0; i < 100 && have !== want; i++) {
      const before = out.length;
      child.stdin.write('dump\n');
      await waitFor('a dump', () => out.length > before && out.endsWith('\n'), 2000);
      have = out.slice(before).trim().split('\n').at(-1) ?? '';
      if (have !== want) await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(have, want);
  } finally {
    child.stdin.end();
    child.kill();
  }
});

test('a continue token or an Exact read from the apiserver, ahead of the quiet cache, is answered from the cache once it gets there', async () => {
  await new Promise((r) => setTimeout(r, 1000));
  const path = `/api/v1/namespaces/${ns}/configmaps`;
  // Page 1 from the apiserver: its token carries etcd's current revision, which leases moved on.
  const first = JSON.parse((await get(`${env.server}${path}?limit=2`, agent, env.tokens.admin)).body) as { metadata: { continue: string; resourceVersion: string } };
  assert.ok(first.metadata.continue);
  const cont = encodeURIComponent(first.metadata.continue);
  for (const query of [`limit=2&continue=${cont}`, `resourceVersion=${first.metadata.resourceVersion}&resourceVersionMatch=Exact`]) {
    const id = randomUUID();
    const res = await request(`${levee.url.origin}${path}?${query}`, { dispatcher: agent, headers: { authorization: `Bearer ${env.tokens.admin}`, accept: 'application/json', 'audit-id': id } });
    const viaLevee = JSON.parse(await res.body.text()) as { items: Array<{ metadata: { name: string } }> };
    const direct = JSON.parse((await get(`${env.server}${path}?${query}`, agent, env.tokens.admin)).body) as { items: Array<{ metadata: { name: string } }> };
    assert.equal(res.statusCode, 200);
    assert.deepEqual(viaLevee.items.map((o) => o.metadata.name), direct.items.map((o) => o.metadata.name), query);
    assert.equal(await sourceOf(id), 'cache', query);
  }
});
