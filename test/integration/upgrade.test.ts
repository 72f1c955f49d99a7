// Upgrades are tunnelled byte for byte: kubectl exec/attach/port-forward open a WebSocket GET
// (v5.channel.k8s.io) or fall back to a SPDY/3.1 POST. The test apiserver runs no kubelet, so the
// upstream here is a small local echo server that accepts both upgrades.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { connect as tlsConnect } from 'node:tls';
import { connect as netConnect, type Socket } from 'node:net';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { WebSocket, WebSocketServer } from 'ws';
import { loadEnv, type TestEnv } from '../env/testenv.ts';
import { startLevee, writeKubeconfig, type LeveeProcess } from '../support/levee.ts';
import { tempDir } from '../support/tempdir.ts';

let env: TestEnv;
let upstream: Server;
let seen: Array<{ method: string; url: string; authorization: string | undefined; upgrade: string | undefined }> = [];
let tlsLevee: LeveeProcess;
let plainLevee: LeveeProcess;

const EXEC_PATH = '/api/v1/namespaces/default/pods/p/exec?command=sh&stdin=true&stdout=true';

before(async () => {
  env = loadEnv();
  const wss = new WebSocketServer({ noServer: true });
  upstream = createServer((_req, res) => res.writeHead(404).end());
  upstream.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    seen.push({ method: req.method!, url: req.url!, authorization: req.headers.authorization, upgrade: req.headers.upgrade });
    if (req.headers.upgrade?.toLowerCase() === 'websocket') {
      wss.handleUpgrade(req, socket, head, (ws) => ws.on('message', (m, binary) => ws.send(m, { binary })));
      return;
    }
    // SPDY: the apiserver answers 101 with the negotiated stream protocol, then frames flow.
    socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n');
    if (head.length) socket.write(head);
    socket.pipe(socket);
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const kc = writeKubeconfig(`http://127.0.0.1:${(upstream.address() as { port: number }).port}`, undefined, 'levee-own-token');
  tlsLevee = await startLevee({ kubeconfig: kc, tls: env.leveeServing });
  plainLevee = await startLevee({ kubeconfig: kc, auth: 'trust-loopback' });
});

after(async () => {
  await tlsLevee?.stop();
  await plainLevee?.stop();
  upstream?.closeAllConnections();
  await new Promise((r) => upstream?.close(r));
});

test('a WebSocket exec (GET) is tunnelled through the TLS listener', async () => {
  seen = [];
  const ws = new WebSocket(`wss://${tlsLevee.url.host}${EXEC_PATH}`, ['v5.channel.k8s.io'], {
    ca: readFileSync(env.caFile),
    headers: { authorization: 'Bearer client-token' },
  });
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  assert.equal(ws.protocol, 'v5.channel.k8s.io');
  const payload = Buffer.from([0, ...Buffer.from('echo hi\n')]);
  const echoed = new Promise<Buffer>((resolve) => ws.once('message', (m: Buffer) => resolve(m)));
  ws.send(payload);
  assert.deepEqual(await echoed, payload);
  ws.close();
  assert.deepEqual(seen, [{ method: 'GET', url: EXEC_PATH, authorization: 'Bearer client-token', upgrade: 'websocket' }]);
});

/** Sends a raw SPDY-style upgrade, returns the response head and what comes back after `bytes`. */
async function spdyExchange(socket: Socket, authorization?: string): Promise<{ head: string; echoed: string }> {
  const lines = [`POST ${EXEC_PATH} HTTP/1.1`, 'Host: levee', 'Connection: Upgrade', 'Upgrade: SPDY/3.1', 'X-Stream-Protocol-Version: v4.channel.k8s.io', 'Content-Length: 0'];
  if (authorization) lines.push(`Authorization: ${authorization}`);
  socket.write(lines.join('\r\n') + '\r\n\r\n');
  let received = '';
  await new Promise<void>((resolve) => {
    const onData = (c: Buffer) => {
      received += c.toString('latin1');
      if (received.includes('\r\n\r\n')) {
        socket.off('data', onData);
        resolve();
      }
    };
    socket.on('data', onData);
  });
  const [head, rest] = received.split('\r\n\r\n') as [string, string];
  const frame = '\x80\x03\x00\x01frame-bytes';
  socket.write(Buffer.from(frame, 'latin1'));
  let echoed = rest;
  while (echoed.length < frame.length) {
    const c = await new Promise<Buffer>((resolve) => socket.once('data', resolve));
    echoed += c.toString('latin1');
  }
  socket.destroy();
  return { head, echoed };
}

test('a SPDY exec (POST) is tunnelled byte for byte through the TLS listener', async () => {
  seen = [];
  const socket = tlsConnect({ host: '127.0.0.1', port: Number(tlsLevee.url.port), ca: readFileSync(env.caFile), ALPNProtocols: ['http/1.1'], servername: 'localhost' });
  await new Promise((r) => socket.once('secureConnect', r));
  const { head, echoed } = await spdyExchange(socket, 'Bearer client-token');
  assert.match(head, /^HTTP\/1\.1 101 Switching Protocols/);
  assert.match(head, /X-Stream-Protocol-Version: v4.channel.k8s.io/);
  assert.equal(echoed, '\x80\x03\x00\x01frame-bytes');
  assert.deepEqual(seen, [{ method: 'POST', url: EXEC_PATH, authorization: 'Bearer client-token', upgrade: 'SPDY/3.1' }]);
});

test('in trust-loopback mode a credential-less upgrade travels with Levee\'s own identity', async () => {
  seen = [];
  const socket = netConnect(Number(plainLevee.url.port), '127.0.0.1');
  await new Promise((r) => socket.once('connect', r));
  const { head } = await spdyExchange(socket);
  assert.match(head, /^HTTP\/1\.1 101/);
  assert.equal(seen[0]?.authorization, 'Bearer levee-own-token');
});

test('upgrades pass the rules and flow control: a denied exec never reaches the apiserver, a tunnel holds its seat while open', async () => {
  const dir = tempDir('levee-upgrade-');
  // One thread: each thread has its share of the seats (README, "Workers"); this pins one's.
  writeFileSync(
    join(dir, 'levee.yaml'),
    `cache: { resources: [] }
workers: 1
flowControl: { maxLongRunningRequests: 1, queueLength: 1, queueWait: 1s }
rules:
  - name: no-exec
    match: { resources: [pods/exec] }
    action: deny
`,
  );
  const kc = writeKubeconfig(`http://127.0.0.1:${(upstream.address() as { port: number }).port}`, undefined, 'levee-own-token');
  const ruled = await startLevee({ kubeconfig: kc, tls: env.leveeServing, extra: ['--config', join(dir, 'levee.yaml')] });
  const ca = readFileSync(env.caFile);
  const open = (path: string): Promise<WebSocket | number> => {
    const ws = new WebSocket(`wss://${ruled.url.host}${path}`, ['v5.channel.k8s.io'], { ca, headers: { authorization: 'Bearer client-token' } });
    return new Promise((resolve) => {
      ws.once('open', () => resolve(ws));
      ws.once('unexpected-response', (_req, res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
    });
  };
  try {
    seen = [];
    // exec, over WebSocket and over SPDY: the rule's 403, and nothing upstream.
    assert.equal(await open(EXEC_PATH), 403);
    const socket = tlsConnect({ host: '127.0.0.1', port: Number(ruled.url.port), ca, ALPNProtocols: ['http/1.1'], servername: 'localhost' });
    await new Promise((r) => socket.once('secureConnect', r));
    socket.write(`POST ${EXEC_PATH} HTTP/1.1\r\nHost: levee\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nAuthorization: Bearer client-token\r\nContent-Length: 0\r\n\r\n`);
    let answer = '';
    for await (const chunk of socket) answer += (chunk as Buffer).toString('latin1');
    assert.match(answer, /^HTTP\/1\.1 403 Forbidden\r\n/);
    const status = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as { reason: string; message: string };
    assert.equal(status.reason, 'Forbidden');
    assert.match(status.message, /cannot create resource "pods\/exec" in API group "" in the namespace "default": denied by Levee rule "no-exec"/);
    assert.deepEqual(seen, []);
    // port-forward is not named: its tunnel opens, and holds the one long-running seat while open.
    const forward = '/api/v1/namespaces/default/pods/p/portforward?ports=80';
    const first = await open(forward);
    assert.ok(first instanceof WebSocket);
    const metrics = await fetchText(`${ruled.url.origin}/metrics`, ca);
    assert.match(metrics, /levee_longrunning_requests\{verb="CONNECT",group="",resource="pods",subresource="portforward",source="upstream"\} 1/);
    assert.equal(await open(forward), 429, 'a second tunnel waits for the seat, then gets APF\'s 429');
    first.close();
    await new Promise((r) => first.once('close', r));
    const third = await open(forward);
    assert.ok(third instanceof WebSocket, 'the seat came back when the first tunnel closed');
    third.close();
  } finally {
    await ruled.stop();
  }
});

async function fetchText(url: string, ca: Buffer): Promise<string> {
  const agent = new Agent({ connect: { ca } });
  try {
    const res = await request(url, { dispatcher: agent });
    return await res.body.text();
  } finally {
    await agent.close();
  }
}
