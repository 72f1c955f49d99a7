// HTTP/2 clients, as client-go is: requests without a body are served on the core stream API
// (src/serve/h2stream.ts), the rest through Node's compat layer. Both must answer exactly as the
// apiserver does over the same protocol, and a client that resets a watch must free its watcher.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, constants, type ClientHttp2Session, type OutgoingHttpHeaders } from 'node:http2';
import { readFileSync } from 'node:fs';
import { loadEnv, type TestEnv } from '../env/testenv.ts';
import { startLevee, type LeveeProcess } from '../support/levee.ts';
import { agentFor, get, suffix } from '../support/http.ts';
import type { Agent } from 'undici';
import { createNamespace } from '../support/cluster.ts';

let env: TestEnv;
let levee: LeveeProcess;
let agent: Agent;
let direct: ClientHttp2Session;
let through: ClientHttp2Session;
const ns = `http2-${suffix()}`;

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

function send(session: ClientHttp2Session, method: string, path: string, body?: unknown): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: OutgoingHttpHeaders = { ':method': method, ':path': path, authorization: `Bearer ${env.tokens.admin}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const stream = session.request(headers, { endStream: body === undefined });
    let answer: Omit<Answer, 'body'> = { status: 0, headers: {} };
    const chunks: Buffer[] = [];
    stream.on('response', (h) => (answer = { status: Number(h[':status']), headers: h }));
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => resolve({ ...answer, body: Buffer.concat(chunks).toString() }));
    stream.on('error', reject);
    if (body !== undefined) stream.end(JSON.stringify(body));
  });
}

async function watchers(): Promise<number> {
  const m = /levee_watchers\{resource="configmaps"\} (\d+)/.exec((await get(`${levee.url.origin}/metrics`, agent)).body);
  return Number(m?.[1] ?? 0);
}

before(async () => {
  env = loadEnv();
  agent = agentFor(env.caFile);
  levee = await startLevee({ kubeconfig: env.kubeconfig, tls: env.leveeServing });
  const ca = readFileSync(env.caFile);
  direct = connect(env.server, { ca });
  through = connect(levee.url.origin, { ca });
  await createNamespace(env, agent, ns);
  for (let i = 0; i < 3; i++) {
    assert.equal((await send(direct, 'POST', `/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: `cm-${i}`, labels: { i: String(i) } } })).status, 201);
  }
  for (let i = 0; i < 100; i++) {
    const r = await send(through, 'GET', `/api/v1/namespaces/${ns}/configmaps?resourceVersion=0`);
    if (r.status === 200 && (JSON.parse(r.body) as { items: Array<{ metadata: { name: string } }> }).items.some((o) => o.metadata.name === 'cm-2')) break;
    await new Promise((r) => setTimeout(r, 100));
  }
});

after(async () => {
  direct?.close();
  through?.close();
  await levee?.stop();
  await agent?.close();
});

test('cached GETs, LISTs and errors over h2 are the apiserver\'s, byte for byte', async () => {
  for (const path of [
    `/api/v1/namespaces/${ns}/configmaps?resourceVersion=0`,
    `/api/v1/namespaces/${ns}/configmaps?resourceVersion=0&labelSelector=i%3D1`,
    `/api/v1/namespaces/${ns}/configmaps/cm-2?resourceVersion=0`,
    `/api/v1/namespaces/${ns}/configmaps/absent?resourceVersion=0`,
    `/api/v1/namespaces/${ns}/configmaps?resourceVersion=0&labelSelector=%3D%3D`,
  ]) {
    const [a, b] = await Promise.all([send(direct, 'GET', path), send(through, 'GET', path)]);
    assert.equal(b.status, a.status, path);
    // A list at resourceVersion=0 carries the serving cache's resourceVersion, which the apiserver
    // also moves when anyone in the cluster reads configmaps consistently (its watch cache then
    // asks etcd for progress) and Levee learns of at its next bookmark: compared apart. Levee's
    // is still a resourceVersion its items had been written by.
    const rv = listRV(b.body);
    if (rv !== undefined) {
      for (const item of (JSON.parse(b.body) as { items: Array<{ metadata: { resourceVersion: string } }> }).items) {
        assert.ok(Number(item.metadata.resourceVersion) <= rv, `${path}: an item is newer than Levee's list at ${rv}`);
      }
    }
    assert.equal(withoutListRV(b.body), withoutListRV(a.body), path);
    assert.equal(b.headers['content-type'], a.headers['content-type'], path);
  }
});

const LIST_RV = /^(\{"kind":"\w+List","apiVersion":"v1","metadata":\{"resourceVersion":")(\d+)"/;
const listRV = (body: string): number | undefined => {
  const m = LIST_RV.exec(body);
  return m ? Number(m[2]) : undefined;
};
const withoutListRV = (body: string): string => body.replace(LIST_RV, '$1"');

test('HEAD over h2 gets the apiserver\'s answer, with no body', async () => {
  for (const path of [`/api/v1/namespaces/${ns}/configmaps/cm-0`, `/api/v1/namespaces/${ns}/configmaps/cm-0?resourceVersion=0`, '/version']) {
    const [a, b] = await Promise.all([send(direct, 'HEAD', path), send(through, 'HEAD', path)]);
    assert.equal(b.status, a.status, path);
    assert.equal(b.body, '', path);
  }
});

test('a request with a body over h2 goes upstream whole', async () => {
  const r = await send(through, 'POST', `/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: 'posted' }, data: { k: 'v'.repeat(100_000) } });
  assert.equal(r.status, 201, r.body.slice(0, 300));
  assert.equal((JSON.parse(r.body) as { data: { k: string } }).data.k.length, 100_000);
});

test('a cache watch over h2 delivers events, and a client reset frees its watcher', async () => {
  const before = await watchers();
  const list = JSON.parse((await send(through, 'GET', `/api/v1/namespaces/${ns}/configmaps`)).body) as { metadata: { resourceVersion: string } };
  const stream = through.request({
    ':path': `/api/v1/namespaces/${ns}/configmaps?watch=1&resourceVersion=${list.metadata.resourceVersion}`,
    authorization: `Bearer ${env.tokens.admin}`,
  });
  let received = '';
  const event = new Promise<{ type: string; object: { metadata: { name: string } } }>((resolve, reject) => {
    stream.on('data', (c: Buffer) => {
      received += c.toString();
      const nl = received.indexOf('\n');
      if (nl !== -1) resolve(JSON.parse(received.slice(0, nl)) as { type: string; object: { metadata: { name: string } } });
    });
    stream.on('error', reject);
  });
  const status = await new Promise<number>((resolve) => stream.once('response', (h) => resolve(Number(h[':status']))));
  assert.equal(status, 200);
  assert.equal(await watchers(), before + 1);
  assert.equal((await send(direct, 'POST', `/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: 'watched' } })).status, 201);
  const e = await event;
  assert.equal(e.type, 'ADDED');
  assert.equal(e.object.metadata.name, 'watched');

  stream.close(constants.NGHTTP2_CANCEL);
  for (let i = 0; i < 50 && (await watchers()) !== before; i++) await new Promise((r) => setTimeout(r, 50));
  assert.equal(await watchers(), before);
  // The session that carried it still serves.
  assert.equal((await send(through, 'GET', `/api/v1/namespaces/${ns}/configmaps/cm-0?resourceVersion=0`)).status, 200);
});

async function upstreamSecretWatches(): Promise<number> {
  const m = (await send(direct, 'GET', '/metrics')).body;
  let n = 0;
  for (const line of m.split('\n')) {
    if (line.startsWith('apiserver_longrunning_requests{') && line.includes('resource="secrets"') && line.includes('verb="WATCH"')) n += Number(line.split(' ').at(-1));
  }
  return n;
}

test('a forwarded watch over h2 that the client resets ends upstream too', async () => {
  const before = await upstreamSecretWatches();
  const stream = through.request({ ':path': `/api/v1/namespaces/${ns}/secrets?watch=1`, authorization: `Bearer ${env.tokens.admin}` });
  stream.on('error', () => undefined);
  const status = await new Promise<number>((resolve) => stream.once('response', (h) => resolve(Number(h[':status']))));
  assert.equal(status, 200);
  for (let i = 0; i < 50 && (await upstreamSecretWatches()) !== before + 1; i++) await new Promise((r) => setTimeout(r, 50));
  assert.equal(await upstreamSecretWatches(), before + 1);
  stream.close(constants.NGHTTP2_CANCEL);
  for (let i = 0; i < 100 && (await upstreamSecretWatches()) !== before; i++) await new Promise((r) => setTimeout(r, 50));
  assert.equal(await upstreamSecretWatches(), before);
});

test('a DELETE without a body over h2 reaches the apiserver', async () => {
  const r = await send(through, 'DELETE', `/api/v1/namespaces/${ns}/configmaps/posted`);
  assert.equal(r.status, 200, r.body.slice(0, 300));
  assert.equal((await send(direct, 'GET', `/api/v1/namespaces/${ns}/configmaps/posted`)).status, 404);
});
