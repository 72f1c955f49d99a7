// The forwarding path on the wire: a watch held open through Levee delivers each event as it
// happens, HTTP/2 clients and @kubernetes/client-node work, metrics move, an unreachable upstream
// is a Status and not a dropped connection.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:http2';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { request, type Agent } from 'undici';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { loadEnv, type TestEnv } from '../env/testenv.ts';
import { startLevee, writeKubeconfig, type LeveeProcess } from '../support/levee.ts';
import { agentFor, get, send, suffix } from '../support/http.ts';
import { createNamespace } from '../support/cluster.ts';
import { startRelay, type Relay } from '../support/relay.ts';
import { waitReady } from '../support/wait.ts';

let env: TestEnv;
let levee: LeveeProcess;
let agent: Agent;
const ns = `forward-${suffix()}`;

before(async () => {
  env = loadEnv();
  levee = await startLevee({ kubeconfig: env.kubeconfig, tls: env.leveeServing });
  agent = agentFor(env.caFile);
  await createNamespace(env, agent, ns);
});

after(async () => {
  await levee?.stop();
  await agent?.close();
});

test('a watch through Levee delivers each event while the stream stays open', async () => {
  const base = `${levee.url.origin}/api/v1/namespaces/${ns}/configmaps`;
  const list = await get(base, agent, env.tokens.admin);
  assert.equal(list.status, 200);
  const rv = (JSON.parse(list.body) as { metadata: { resourceVersion: string } }).metadata.resourceVersion;

  const res = await request(`${base}?watch=true&resourceVersion=${rv}&allowWatchBookmarks=false`, {
    dispatcher: agent,
    headers: { authorization: `Bearer ${env.tokens.admin}`, accept: 'application/json' },
  });
  assert.equal(res.statusCode, 200);
  const events: Array<{ type: string; object: { metadata: { name: string }; data?: Record<string, string> } }> = [];
  let buffered = '';
  const reader = (async () => {
    for await (const chunk of res.body) {
      buffered += (chunk as Buffer).toString();
      let nl;
      while ((nl = buffered.indexOf('\n')) !== -1) {
        events.push(JSON.parse(buffered.slice(0, nl)) as (typeof events)[number]);
        buffered = buffered.slice(nl + 1);
      }
    }
  })();
  const until = async (n: number) => {
    for (let i = 0; i < 200 && events.length < n; i++) await new Promise((r) => setTimeout(r, 25));
    assert.equal(events.length >= n, true, `expected ${n} events, got ${events.length}`);
  };

  const cm = `${env.server}/api/v1/namespaces/${ns}/configmaps`;
  assert.equal((await send('POST', cm, agent, env.tokens.admin, { metadata: { name: 'w' }, data: { v: '1' } })).status, 201);
  // Each event arrives before the next change is made: nothing is held back until the end.
  await until(1);
  assert.equal((await send('PATCH', `${cm}/w`, agent, env.tokens.admin, { data: { v: '2' } }, 'application/merge-patch+json')).status, 200);
  await until(2);
  assert.equal((await send('DELETE', `${cm}/w`, agent, env.tokens.admin)).status, 200);
  await until(3);
  assert.deepEqual(
    events.map((e) => [e.type, e.object.metadata.name, e.object.data?.v]),
    [
      ['ADDED', 'w', '1'],
      ['MODIFIED', 'w', '2'],
      ['DELETED', 'w', '2'],
    ],
  );
  res.body.destroy();
  await reader.catch(() => undefined);
});

test('a watch ends when the apiserver ends it (timeoutSeconds)', async () => {
  const started = Date.now();
  const r = await get(`${levee.url.origin}/api/v1/namespaces/${ns}/configmaps?watch=true&timeoutSeconds=1`, agent, env.tokens.admin);
  assert.equal(r.status, 200);
  assert.equal(Date.now() - started < 10_000, true);
});

test('HTTP/2 clients are served over h2', async () => {
  const session = connect(levee.url.origin, { ca: readFileSync(env.caFile) });
  try {
    const { status, body, alpn } = await new Promise<{ status: number; body: string; alpn: string | false | undefined }>((resolve, reject) => {
      const stream = session.request({ ':path': `/api/v1/namespaces/${ns}`, authorization: `Bearer ${env.tokens.admin}` });
      let status = 0;
      let body = '';
      stream.on('response', (h) => (status = Number(h[':status'])));
      stream.on('data', (c: Buffer) => (body += c.toString()));
      stream.on('end', () => resolve({ status, body, alpn: session.alpnProtocol }));
      stream.on('error', reject);
    });
    assert.equal(alpn, 'h2');
    assert.equal(status, 200);
    assert.equal((JSON.parse(body) as { metadata: { name: string } }).metadata.name, ns);
  } finally {
    session.close();
  }
});

test('@kubernetes/client-node works through Levee', async () => {
  const kc = new KubeConfig();
  kc.loadFromFile(writeKubeconfig(levee.url.href, env.caFile, env.tokens.admin));
  const core = kc.makeApiClient(CoreV1Api);
  const created = await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'from-client-node' }, data: { a: 'b' } } });
  assert.equal(created.metadata?.name, 'from-client-node');
  const list = await core.listNamespacedConfigMap({ namespace: ns });
  assert.equal(list.items.some((c) => c.metadata?.name === 'from-client-node'), true);
  await assert.rejects(core.readNamespacedConfigMap({ namespace: ns, name: 'absent' }), (err: { code?: number }) => err.code === 404);
});

test('metrics count forwarded requests by verb, resource and code', async () => {
  const r = await get(`${levee.url.origin}/metrics`, agent);
  assert.equal(r.status, 200);
  assert.match(r.body, /levee_request_total\{verb="LIST",group="",resource="configmaps",subresource="",source="(cache|upstream)",code="200"\} [1-9]/);
  assert.match(r.body, /levee_request_total\{verb="WATCH",group="",resource="configmaps",subresource="",source="(cache|upstream)",code="200"\} [1-9]/);
  // Writes are always forwarded.
  assert.match(r.body, /levee_request_total\{verb="POST",group="",resource="configmaps",subresource="",source="upstream",code="201"\} [1-9]/);
  assert.match(r.body, /levee_request_duration_seconds_count\{verb="GET",group="",resource="namespaces"/);
  assert.match(r.body, /process_resident_memory_bytes/);
});

/** A port that was free a moment ago and has nothing listening now. */
function deadPort(): Promise<number> {
  return new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });
}

test('with a dead first endpoint, requests and the cache fail over to the next one', async () => {
  const kc = writeKubeconfig(`https://127.0.0.1:${await deadPort()}`, env.caFile, env.tokens.admin);
  const l = await startLevee({ kubeconfig: kc, tls: env.leveeServing, extra: ['--upstream-server', env.server, '--cache', 'namespaces'] });
  try {
    for (let i = 0; i < 20; i++) {
      const r = await get(`${l.url.origin}/api/v1/namespaces/${ns}`, agent, env.tokens.admin);
      assert.equal(r.status, 200, r.body);
    }
    let ready = 0;
    for (let i = 0; i < 100 && ready !== 200; i++) {
      ready = (await get(`${l.url.origin}/readyz`, agent)).status;
      if (ready !== 200) await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal(ready, 200, 'the cache never synced through the live endpoint');
    const cached = await get(`${l.url.origin}/api/v1/namespaces/${ns}?resourceVersion=0`, agent, env.tokens.admin);
    assert.equal(cached.status, 200);
  } finally {
    await l.stop();
  }
});

test('an unreachable upstream is a 503 Status, not a dropped connection', async () => {
  const port = await deadPort();
  const kc = writeKubeconfig(`https://127.0.0.1:${port}`, env.caFile, 'unused');
  const dead = await startLevee({ kubeconfig: kc });
  try {
    const r = await get(`${dead.url.origin}/api/v1/namespaces`, agent, env.tokens.admin);
    assert.equal(r.status, 503);
    assert.equal(r.headers['retry-after'], '1');
    const status = JSON.parse(r.body) as { kind: string; reason: string; code: number };
    assert.deepEqual([status.kind, status.reason, status.code], ['Status', 'ServiceUnavailable', 503]);
    const live = await get(`${dead.url.origin}/livez`, agent);
    assert.equal(live.status, 200);
  } finally {
    await dead.stop();
  }
});

/**
 * A Levee whose connections to the apiserver pass through a relay the test can silence (`extra`:
 * its flags), ready; both closed after `use`, the relay released first.
 */
async function throughRelay(extra: string[], use: (l: LeveeProcess, relay: Relay) => Promise<void>): Promise<void> {
  const relay = await startRelay(env.server);
  const l = await startLevee({ kubeconfig: writeKubeconfig(relay.url, env.caFile, env.tokens.admin), tls: env.leveeServing, extra });
  try {
    await waitReady(l, agent);
    await use(l, relay);
  } finally {
    relay.release();
    await l.stop();
    await relay.close();
  }
}

test('a forwarded watch the apiserver never answers (its connection silent) gets a 504 by its timeoutSeconds, not at the headers\' timeout', async () => {
  await throughRelay(['--cache', ''], async (l, relay) => {
    const watch = `${l.url.origin}/api/v1/namespaces/${ns}/secrets?watch=true&timeoutSeconds=2`;
    // Once with the connection alive: the client's token and rights are reviewed now, and kept.
    assert.equal((await get(watch, agent, env.tokens.admin)).status, 200);
    // Every connection silent, new ones too: the request goes out and nothing comes back.
    relay.stall({ newConnections: true });
    const started = performance.now();
    const r = await get(watch, agent, env.tokens.admin);
    const seconds = (performance.now() - started) / 1000;
    assert.equal(r.status, 504, r.body);
    const status = JSON.parse(r.body) as { kind: string; reason: string };
    assert.deepEqual([status.kind, status.reason], ['Status', 'Timeout']);
    // By its deadline and the second's grace Levee gives the apiserver's own end; the headers'
    // timeout is two minutes.
    assert.ok(seconds >= 2 && seconds < 30, `answered after ${seconds.toFixed(1)} s`);
  });
});

test('a watch forwarded after waiting for its resourceVersion still ends by its timeoutSeconds, counted from its arrival', async () => {
  // One thread: each thread keeps its own reviews, and this watch must find them kept.
  await throughRelay(['--cache', 'configmaps', '--workers', '1'], async (l, relay) => {
    const base = `${l.url.origin}/api/v1/namespaces/${ns}/configmaps`;
    // Once with the connection alive: the client's token and rights are reviewed now, and kept.
    assert.equal((await get(`${base}?watch=true&timeoutSeconds=1`, agent, env.tokens.admin)).status, 200);
    // Levee hears nothing more from the apiserver; a write there is a resourceVersion its cache
    // never reaches, so a watch-list from it waits its 3 s and is then forwarded, into the silence.
    relay.stall({ newConnections: true });
    const created = await send('POST', `${env.server}/api/v1/namespaces/${ns}/configmaps`, agent, env.tokens.admin, JSON.stringify({ metadata: { name: `ahead-${suffix()}` } }));
    assert.equal(created.status, 201, created.body);
    const rv = (JSON.parse(created.body) as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
    const started = performance.now();
    const r = await get(`${base}?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&resourceVersion=${rv}&timeoutSeconds=1`, agent, env.tokens.admin);
    const seconds = (performance.now() - started) / 1000;
    assert.equal(r.status, 504, r.body);
    assert.equal((JSON.parse(r.body) as { reason: string }).reason, 'Timeout');
    // Its second and the grace were spent waiting: it ends as soon as it is forwarded (3 s), not
    // its timeoutSeconds and the grace later again (5 s).
    assert.ok(seconds >= 2.9 && seconds < 4.5, `answered after ${seconds.toFixed(1)} s`);
  });
});

test('a watch whose authorization review hangs gets a 504 by its timeoutSeconds, not when the review comes back', async () => {
  await throughRelay(['--cache', 'configmaps', '--token-cache-ttl', '1s', '--authorization-cache-allowed-ttl', '1s'], async (l, relay) => {
    const watch = `${l.url.origin}/api/v1/namespaces/${ns}/configmaps?watch=true&timeoutSeconds=1`;
    assert.equal((await get(watch, agent, env.tokens.admin)).status, 200);
    // The reviews' answers expire while every connection to the apiserver is silent: the next
    // ones go out and nothing comes back until the connections pass bytes again, 12 s later.
    relay.stall({ newConnections: true });
    await new Promise((r) => setTimeout(r, 1500));
    const released = setTimeout(() => relay.release(), 12_000);
    try {
      const started = performance.now();
      const r = await get(watch, agent, env.tokens.admin);
      const seconds = (performance.now() - started) / 1000;
      assert.equal(r.status, 504, r.body);
      assert.equal((JSON.parse(r.body) as { reason: string }).reason, 'Timeout');
      // By its second and the grace, not when the review's answer arrives.
      assert.ok(seconds < 8, `answered after ${seconds.toFixed(1)} s`);
    } finally {
      clearTimeout(released);
    }
  });
});

test('a path the apiserver cannot make a request of is its plain-text 500, word for word', async () => {
  for (const path of ['/apis/pod-1/widgets/proxy?timeoutSeconds=1', '/api/v1/watch', '/apis/g/v1/proxy?a=%3Cb%3E&c=d']) {
    const ask = async (origin: string) => {
      const res = await request(origin + path, { dispatcher: agent, headers: { authorization: `Bearer ${env.tokens.admin}` } });
      return { status: res.statusCode, type: res.headers['content-type'], body: await res.body.text() };
    };
    const [a, b] = await Promise.all([ask(env.server), ask(levee.url.origin)]);
    assert.equal(a.status, 500, `${path}: ${a.body}`);
    assert.deepEqual(b, a, path);
  }
});
