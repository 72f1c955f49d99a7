// Worker threads (--workers): the kernel spreads connections over every thread, and each answers
// from the one cache as the main thread would: the same objects, writes seen everywhere a
// consistent read is made, watches served from any thread, and every thread drains on SIGTERM.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Client, type Dispatcher } from 'undici';
import { loadEnv, type TestEnv } from '../env/testenv.ts';
import { startLevee, type LeveeProcess } from '../support/levee.ts';
import { agentFor, get, send, suffix } from '../support/http.ts';
import { createNamespace } from '../support/cluster.ts';
import { waitFor, waitReady } from '../support/wait.ts';

let env: TestEnv;
let levee: LeveeProcess;
let ca: Buffer;
const ns = `workers-${suffix()}`;
const clients: Client[] = [];

before(async () => {
  env = loadEnv();
  ca = readFileSync(env.caFile);
  const agent = agentFor(env.caFile);
  await createNamespace(env, agent, ns, { suite: 'workers' });
  for (let i = 0; i < 20; i++) {
    const r = await send('POST', `${env.server}/api/v1/namespaces/${ns}/configmaps`, agent, env.tokens.admin, { metadata: { name: `cm-${i}`, labels: { i: String(i % 3) } }, data: { i: String(i) } });
    assert.equal(r.status, 201, r.body);
  }
  await agent.close();
  // Every consistent read waits for the proof of freshness, however small: the reads below are answered from each thread's replica.
  levee = await startLevee({
    kubeconfig: env.kubeconfig,
    tls: env.leveeServing,
    extra: ['--workers', '2', '--cache', 'configmaps,namespaces', '--consistent-read-proof-bytes', '0'],
  });
  const probe = agentFor(env.caFile);
  await waitReady(levee, probe);
  await probe.close();
});

after(async () => {
  for (const c of clients) await c.close().catch(() => undefined);
  await levee?.stop();
});

/** The thread a connection's requests are served by, from /debug/levee/cache. */
async function threadOf(c: Dispatcher): Promise<number> {
  const r = await get(`${levee.url.origin}/debug/levee/cache`, c, env.tokens.admin);
  assert.equal(r.status, 200, r.body);
  return (JSON.parse(r.body) as { thread: number }).thread;
}

/** One connection per thread: new connections until the kernel has given one to each of `threads` threads. */
async function connectionPerThread(threads: number): Promise<Map<number, Client>> {
  const byThread = new Map<number, Client>();
  for (let i = 0; i < 100 && byThread.size < threads; i++) {
    const c = new Client(levee.url.origin, { connect: { ca }, pipelining: 1 });
    const t = await threadOf(c);
    if (byThread.has(t)) await c.close();
    else {
      byThread.set(t, c);
      clients.push(c);
    }
  }
  return byThread;
}

const names = (body: string): string[] => (JSON.parse(body) as { items: Array<{ metadata: { name: string } }> }).items.map((o) => o.metadata.name).sort();

test('connections are spread over both threads, and each answers from the cache what the apiserver holds', async () => {
  const byThread = await connectionPerThread(2);
  assert.equal(byThread.size, 2, 'one hundred connections all reached the same thread');
  assert.ok(byThread.has(0), 'the main thread serves too');
  const direct = agentFor(env.caFile);
  const expected = await get(`${env.server}/api/v1/namespaces/${ns}/configmaps?labelSelector=i%3D1`, direct, env.tokens.admin);
  await direct.close();
  for (const [thread, c] of byThread) {
    const r = await get(`${levee.url.origin}/api/v1/namespaces/${ns}/configmaps?labelSelector=i%3D1&resourceVersion=0`, c, env.tokens.admin);
    assert.equal(r.status, 200, r.body);
    assert.deepEqual(names(r.body), names(expected.body), `thread ${thread}`);
    const one = await get(`${levee.url.origin}/api/v1/namespaces/${ns}/configmaps/cm-4?resourceVersion=0`, c, env.tokens.admin);
    assert.equal(one.status, 200, one.body);
    assert.equal((JSON.parse(one.body) as { data: { i: string } }).data.i, '4');
  }
  // Answered from the cache on the worker thread, not forwarded.
  await waitFor('a cached LIST logged by the worker thread', () => /"worker":1,[^\n]*"verb":"list","path":"\/api\/v1\/namespaces\/workers-[^"]+\/configmaps"[^\n]*"source":"cache"/.test(levee.output()));
});

test('a write through one thread is seen by a consistent read on the other at once', async () => {
  const byThread = await connectionPerThread(2);
  const [a, b] = [...byThread.values()];
  for (let i = 0; i < 5; i++) {
    const name = `written-${i}`;
    const created = await send('POST', `${levee.url.origin}/api/v1/namespaces/${ns}/configmaps`, i % 2 === 0 ? a! : b!, env.tokens.admin, { metadata: { name }, data: { n: String(i) } });
    assert.equal(created.status, 201, created.body);
    for (const c of [a!, b!]) {
      const list = await get(`${levee.url.origin}/api/v1/namespaces/${ns}/configmaps`, c, env.tokens.admin);
      assert.equal(list.status, 200, list.body);
      assert.ok(names(list.body).includes(name), `thread ${await threadOf(c)} did not list ${name} after it was created`);
      const one = await get(`${levee.url.origin}/api/v1/namespaces/${ns}/configmaps/${name}`, c, env.tokens.admin);
      assert.equal(one.status, 200, one.body);
    }
  }
});

test('a watch served by a worker thread gets every event, from the replica', async () => {
  const byThread = await connectionPerThread(2);
  const worker = [...byThread].find(([t]) => t !== 0)![1];
  const list = await get(`${levee.url.origin}/api/v1/namespaces/${ns}/configmaps?resourceVersion=0`, worker, env.tokens.admin);
  const rv = (JSON.parse(list.body) as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
  const res = await worker.request({
    method: 'GET',
    path: `/api/v1/namespaces/${ns}/configmaps?watch=true&resourceVersion=${rv}&timeoutSeconds=20`,
    headers: { authorization: `Bearer ${env.tokens.admin}`, accept: 'application/json' },
  });
  assert.equal(res.statusCode, 200);
  const seen: string[] = [];
  let buffered = '';
  const reading = (async () => {
    for await (const chunk of res.body) {
      buffered += (chunk as Buffer).toString();
      let nl;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const e = JSON.parse(buffered.slice(0, nl)) as { type: string; object: { metadata: { name: string } } };
        buffered = buffered.slice(nl + 1);
        seen.push(`${e.type} ${e.object.metadata.name}`);
        if (seen.length === 3) return;
      }
    }
  })();
  const direct = agentFor(env.caFile);
  assert.equal((await send('POST', `${env.server}/api/v1/namespaces/${ns}/configmaps`, direct, env.tokens.admin, { metadata: { name: 'watched' } })).status, 201);
  assert.equal((await send('PATCH', `${env.server}/api/v1/namespaces/${ns}/configmaps/watched`, direct, env.tokens.admin, { data: { a: 'b' } }, 'application/merge-patch+json')).status, 200);
  assert.equal((await send('DELETE', `${env.server}/api/v1/namespaces/${ns}/configmaps/watched`, direct, env.tokens.admin)).status, 200);
  await direct.close();
  await reading;
  res.body.destroy();
  assert.deepEqual(seen, ['ADDED watched', 'MODIFIED watched', 'DELETED watched']);
});

test('SIGTERM drains every thread, and the process exits cleanly', async () => {
  const byThread = await connectionPerThread(2);
  const worker = [...byThread].find(([t]) => t !== 0)![1];
  const res = await worker.request({
    method: 'GET',
    path: `/api/v1/namespaces/${ns}/configmaps?watch=true&resourceVersion=0&timeoutSeconds=60`,
    headers: { authorization: `Bearer ${env.tokens.admin}`, accept: 'application/json' },
  });
  assert.equal(res.statusCode, 200);
  const ended = (async () => {
    let text = '';
    for await (const chunk of res.body) text += (chunk as Buffer).toString();
    return text;
  })();
  levee.kill('SIGTERM');
  // The watch on the worker thread ends cleanly, between two events, well before its timeout.
  const text = await ended;
  assert.ok(text.endsWith('\n'), 'the watch ended in the middle of an event');
  const exit = await levee.exited;
  assert.equal(exit.code, 0, levee.output().slice(-3000));
  assert.match(levee.output(), /"msg":"shut down: every request finished"/);
});
