// Graceful shutdown: on SIGTERM Levee fails /readyz, stops accepting (GOAWAY on HTTP/2,
// `Connection: close` on HTTP/1.1), ends every watch normally between two events so its client
// re-watches on another replica from the last resourceVersion it received, lets every request in
// flight finish with its whole body, and exits 0.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import http2, { type ClientHttp2Session, type ClientHttp2Stream } from 'node:http2';
import https from 'node:https';
import net from 'node:net';
import { request, type Agent } from 'undici';
import { loadEnv, type TestEnv } from '../env/testenv.ts';
import { startLevee, type LeveeProcess } from '../support/levee.ts';
import { agentFor, get, send, suffix } from '../support/http.ts';
import { createNamespace } from '../support/cluster.ts';

let env: TestEnv;
let agent: Agent;
let ca: Buffer;
const ns = `shutdown-${suffix()}`;
// Enough bytes that a LIST the client does not read stays in flight: far beyond HTTP/2's 64 KiB
// stream window.
const CONFIGMAPS = 120;
const PAYLOAD = 'x'.repeat(8 * 1024);
const started: LeveeProcess[] = [];

before(async () => {
  env = loadEnv();
  agent = agentFor(env.caFile);
  ca = readFileSync(env.caFile);
  await createNamespace(env, agent, ns);
  for (let i = 0; i < CONFIGMAPS; i += 20) {
    await Promise.all(
      Array.from({ length: 20 }, (_, j) =>
        send('POST', `${env.server}/api/v1/namespaces/${ns}/configmaps`, agent, env.tokens.admin, { metadata: { name: `cm-${i + j}` }, data: { payload: PAYLOAD } }),
      ),
    );
  }
});

after(async () => {
  await Promise.all(started.map((l) => l.stop()));
  // The namespace stays (no controller-manager finalizes namespaces); free etcd of the bulk now.
  await send('DELETE', `${env.server}/api/v1/namespaces/${ns}/configmaps`, agent, env.tokens.admin).catch(() => undefined);
  await agent?.close();
});

async function levee(extra: string[]): Promise<LeveeProcess> {
  const l = await startLevee({ kubeconfig: env.kubeconfig, tls: env.leveeServing, extra: ['--cache', 'configmaps', ...extra] });
  started.push(l);
  for (let i = 0; i < 200 && (await get(`${l.url.origin}/readyz`, agent)).status !== 200; i++) await sleep(50);
  return l;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (await check()) return;
    await sleep(50);
  }
  assert.fail(`timed out waiting for ${what}`);
}

interface Stream {
  stream: ClientHttp2Stream;
  status: Promise<number>;
  body(): string;
  bytes(): Buffer;
  /** Settles when the response ended: 'end' normally, 'error' or 'aborted' otherwise. */
  ended: Promise<'end' | 'error' | 'aborted'>;
}

function h2get(session: ClientHttp2Session, path: string, accept = 'application/json'): Stream {
  const stream = session.request({ ':path': path, authorization: `Bearer ${env.tokens.admin}`, accept });
  const chunks: Buffer[] = [];
  stream.on('data', (c: Buffer) => chunks.push(c));
  const status = new Promise<number>((resolve) => stream.once('response', (h) => resolve(Number(h[':status']))));
  const ended = new Promise<'end' | 'error' | 'aborted'>((resolve) => {
    stream.once('end', () => resolve('end'));
    stream.once('error', () => resolve('error'));
    stream.once('aborted', () => resolve('aborted'));
  });
  return { stream, status, body: () => Buffer.concat(chunks).toString(), bytes: () => Buffer.concat(chunks), ended };
}

interface Event {
  type: string;
  object: { metadata: { name?: string; resourceVersion: string } };
}

/** Every line of a watch body, which must be whole events only. */
function events(body: string): Event[] {
  assert.ok(body === '' || body.endsWith('\n'), `the watch ended inside an event: ${JSON.stringify(body.slice(-80))}`);
  return body
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Event);
}

/** The frames of a protobuf watch body, which must hold whole frames only. */
function frames(body: Buffer): number {
  let n = 0;
  let at = 0;
  while (at < body.length) {
    assert.ok(at + 4 <= body.length, 'the watch ended inside a frame length');
    at += 4 + body.readUInt32BE(at);
    assert.ok(at <= body.length, 'the watch ended inside a frame');
    n++;
  }
  return n;
}

async function metric(l: LeveeProcess, line: RegExp): Promise<number> {
  const text = (await get(`${l.url.origin}/metrics`, agent)).body;
  for (const row of text.split('\n')) if (line.test(row)) return Number(row.slice(row.lastIndexOf(' ') + 1));
  return 0;
}

function refused(url: URL): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(Number(url.port), url.hostname);
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(true));
  });
}

/** A POST whose body is sent in two halves: the second only when `finish` is called. */
function halfSentCreate(l: LeveeProcess, name: string): { sent: Promise<void>; finish(): void; answer: Promise<{ status: number; connection: string | undefined; body: string }> } {
  const body = JSON.stringify({ metadata: { name }, data: { payload: PAYLOAD } });
  const req = https.request({
    host: l.url.hostname,
    port: l.url.port,
    method: 'POST',
    path: `/api/v1/namespaces/${ns}/configmaps`,
    ca,
    agent: new https.Agent({ keepAlive: true, ca }),
    headers: {
      authorization: `Bearer ${env.tokens.admin}`,
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(body)),
      // Levee's listener answers 100 Continue once it has the request: the proof it is in flight.
      expect: '100-continue',
    },
  });
  const half = body.length >> 1;
  const sent = new Promise<void>((resolve) => req.once('continue', () => req.write(body.slice(0, half), () => resolve())));
  const answer = new Promise<{ status: number; connection: string | undefined; body: string }>((resolve, reject) => {
    req.once('response', (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.once('end', () => resolve({ status: res.statusCode!, connection: res.headers.connection, body: text }));
    });
    req.once('error', reject);
  });
  req.flushHeaders();
  return { sent, finish: () => req.end(body.slice(half)), answer };
}

test('SIGTERM: requests in flight finish whole, watches end between events, clients re-watch elsewhere, exit 0', async () => {
  const a = await levee(['--shutdown-grace-period', '2m']);
  const b = await levee([]);
  const direct = JSON.parse((await get(`${env.server}/api/v1/namespaces/${ns}/configmaps`, agent, env.tokens.admin)).body) as {
    metadata: { resourceVersion: string };
    items: { metadata: { name: string } }[];
  };
  const names = direct.items.map((i) => i.metadata.name).sort();
  const rv = direct.metadata.resourceVersion;

  const session = http2.connect(a.url.origin, { ca });
  const goaway = new Promise<number>((resolve) => session.once('goaway', (code: number) => resolve(code)));
  session.on('error', () => undefined);

  // Two LISTs the client stops reading after the first bytes: one from the cache, one forwarded
  // (pretty output is the apiserver's to write).
  const cachedList = h2get(session, `/api/v1/namespaces/${ns}/configmaps?resourceVersion=0`);
  const forwardedList = h2get(session, `/api/v1/namespaces/${ns}/configmaps?pretty=true`);
  for (const l of [cachedList, forwardedList]) {
    assert.equal(await l.status, 200);
    await new Promise((resolve) => l.stream.once('data', resolve));
    l.stream.pause();
  }

  // Watches from the cache (JSON and protobuf) and a forwarded one (secrets are not cached), each
  // with an event.
  const cacheWatch = h2get(session, `/api/v1/namespaces/${ns}/configmaps?watch=true&resourceVersion=${rv}`);
  const forwardedWatch = h2get(session, `/api/v1/namespaces/${ns}/secrets?watch=true&resourceVersion=${rv}`);
  const protobufWatch = h2get(session, `/api/v1/namespaces/${ns}/configmaps?watch=true&resourceVersion=${rv}`, 'application/vnd.kubernetes.protobuf;stream=watch');
  // And one over HTTP/1.1.
  const http1Watch = await request(`${a.url.origin}/api/v1/namespaces/${ns}/configmaps?watch=true&resourceVersion=${rv}`, {
    dispatcher: agent,
    headers: { authorization: `Bearer ${env.tokens.admin}`, accept: 'application/json' },
  });
  const http1Body = http1Watch.body.text();
  assert.equal(await cacheWatch.status, 200);
  assert.equal(await forwardedWatch.status, 200);
  assert.equal(await protobufWatch.status, 200);
  assert.equal(http1Watch.statusCode, 200);
  await until(async () => (await metric(a, /^levee_longrunning_requests\{verb="WATCH",group="",resource="configmaps",subresource="",source="cache"\}/)) === 3, 'the watches from the cache');
  await until(async () => (await metric(a, /^levee_longrunning_requests\{verb="WATCH",group="",resource="secrets",subresource="",source="upstream"\}/)) === 1, 'the forwarded watch');
  assert.equal((await send('PATCH', `${env.server}/api/v1/namespaces/${ns}/configmaps/cm-0`, agent, env.tokens.admin, { data: { v: '1' } }, 'application/merge-patch+json')).status, 200);
  assert.equal((await send('POST', `${env.server}/api/v1/namespaces/${ns}/secrets`, agent, env.tokens.admin, { metadata: { name: 's-0' } })).status, 201);
  await until(() => cacheWatch.body().includes('"MODIFIED"') && forwardedWatch.body().includes('"ADDED"') && protobufWatch.bytes().length > 0, 'the first events');

  // A forwarded write whose body is half sent.
  const create = halfSentCreate(a, 'created-while-stopping');
  await create.sent;

  a.kill('SIGTERM');

  // HTTP/2 clients are told to go away; nobody new gets in.
  assert.equal(await goaway, http2.constants.NGHTTP2_NO_ERROR);
  await until(() => refused(a.url), 'the listener to stop accepting');

  // Every watch ends normally, on a whole event.
  assert.equal(await cacheWatch.ended, 'end');
  assert.equal(await forwardedWatch.ended, 'end');
  assert.equal(await protobufWatch.ended, 'end');
  assert.ok(events(await http1Body).some((e) => e.type === 'MODIFIED' && e.object.metadata.name === 'cm-0'));
  assert.ok(frames(protobufWatch.bytes()) >= 1);
  const cacheEvents = events(cacheWatch.body());
  const forwardedEvents = events(forwardedWatch.body());
  assert.ok(cacheEvents.some((e) => e.type === 'MODIFIED' && e.object.metadata.name === 'cm-0'));
  assert.ok(forwardedEvents.some((e) => e.type === 'ADDED' && e.object.metadata.name === 's-0'));

  // Changes made meanwhile reach the clients that re-watch, on the other replica, from the last
  // resourceVersion each received: nothing is lost in the move.
  assert.equal((await send('PATCH', `${env.server}/api/v1/namespaces/${ns}/configmaps/cm-1`, agent, env.tokens.admin, { data: { v: '1' } }, 'application/merge-patch+json')).status, 200);
  assert.equal((await send('POST', `${env.server}/api/v1/namespaces/${ns}/secrets`, agent, env.tokens.admin, { metadata: { name: 's-1' } })).status, 201);
  const elsewhere = http2.connect(b.url.origin, { ca });
  const rewatchCache = h2get(elsewhere, `/api/v1/namespaces/${ns}/configmaps?watch=true&resourceVersion=${cacheEvents.at(-1)!.object.metadata.resourceVersion}`);
  const rewatchForwarded = h2get(elsewhere, `/api/v1/namespaces/${ns}/secrets?watch=true&resourceVersion=${forwardedEvents.at(-1)!.object.metadata.resourceVersion}`);
  await until(() => rewatchCache.body().includes('"name":"cm-1"') && rewatchForwarded.body().includes('"name":"s-1"'), 're-watches to see the changes');
  elsewhere.destroy();

  // Requests in flight are still served to the end, whole.
  assert.equal(a.output().includes('"msg":"shut down'), false, 'Levee stopped with requests in flight');
  create.finish();
  const created = await create.answer;
  assert.equal(created.status, 201, created.body);
  assert.equal(created.connection, 'close');
  for (const l of [cachedList, forwardedList]) {
    l.stream.resume();
    assert.equal(await l.ended, 'end');
    const list = JSON.parse(l.body()) as { items: { metadata: { name: string } }[] };
    assert.deepEqual(list.items.map((i) => i.metadata.name).sort(), names);
  }
  session.close();

  const exit = await a.exited;
  assert.deepEqual(exit, { code: 0, signal: null }, a.output());
  assert.match(a.output(), /"msg":"shut down: every request finished"/);
});

test('SIGTERM: /readyz fails at once while Levee still serves through the shutdown delay', async () => {
  const l = await levee(['--shutdown-delay-duration', '5s']);
  l.kill('SIGTERM');
  let answer = await get(`${l.url.origin}/readyz?verbose`, agent);
  for (let i = 0; i < 100 && answer.status === 200; i++) {
    await sleep(20);
    answer = await get(`${l.url.origin}/readyz?verbose`, agent);
  }
  assert.equal(answer.status, 500);
  assert.match(answer.body, /\[-\]shutdown failed/);
  assert.match(answer.body, /\[\+\]cache-synced ok/);
  // Still live, and still answering the API.
  assert.equal((await get(`${l.url.origin}/livez`, agent)).status, 200);
  assert.equal((await get(`${l.url.origin}/api/v1/namespaces/${ns}/configmaps/cm-0?resourceVersion=0`, agent, env.tokens.admin)).status, 200);
  assert.deepEqual(await l.exited, { code: 0, signal: null });
});

test('SIGTERM: what is still open when the grace period ends is closed, and Levee exits 0', async () => {
  const l = await levee(['--shutdown-grace-period', '1s']);
  const session = http2.connect(l.url.origin, { ca });
  session.on('error', () => undefined);
  const stuck = h2get(session, `/api/v1/namespaces/${ns}/configmaps?resourceVersion=0`);
  assert.equal(await stuck.status, 200);
  await new Promise((resolve) => stuck.stream.once('data', resolve));
  stuck.stream.pause();
  l.kill('SIGTERM');
  assert.deepEqual(await l.exited, { code: 0, signal: null });
  assert.match(l.output(), /"closedConnections":1,"msg":"shut down: grace period over, closed what was left"/);
  session.destroy();
});

test('SIGTERM: a forwarded watch-list asked for with gzip still ends between two events', async () => {
  // Nothing cached: the watch is forwarded. The apiserver gzips watch-list streams, and events
  // cannot be told apart in compressed bytes: Levee asks for the stream uncompressed.
  const l = await levee(['--cache', '', '--shutdown-grace-period', '20s']);
  const res = await new Promise<import('node:http').IncomingMessage>((resolve, reject) => {
    https
      .get(
        `${l.url.origin}/api/v1/namespaces/${ns}/configmaps?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true`,
        { ca, headers: { authorization: `Bearer ${env.tokens.admin}`, accept: 'application/json', 'accept-encoding': 'gzip' } },
        resolve,
      )
      .on('error', reject);
  });
  assert.equal(res.statusCode, 200);
  assert.equal(res.headers['content-encoding'], undefined);
  let body = '';
  res.on('data', (c: Buffer) => (body += c.toString()));
  const ended = new Promise<boolean>((resolve) => {
    res.once('end', () => resolve(true));
    res.once('error', () => resolve(false));
    res.once('aborted', () => resolve(false));
  });
  await until(() => body.includes('"k8s.io/initial-events-end":"true"'), 'the initial state');
  const t = performance.now();
  l.kill('SIGTERM');
  assert.equal(await ended, true, 'the stream was cut');
  assert.ok(performance.now() - t < 15_000, 'it waited for the grace period');
  // Whole events only: every line parses.
  for (const line of body.split('\n').filter((x) => x !== '')) JSON.parse(line);
  assert.deepEqual(await l.exited, { code: 0, signal: null });
});
