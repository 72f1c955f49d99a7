// Upgrades are tunnelled byte for byte: kubectl exec/attach/port-forward open a WebSocket GET
// (v5.channel.k8s.io) or fall back to a SPDY/3.1 POST. The test apiserver runs no kubelet, so the
// upstream here is a small local echo server that accepts both upgrades.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { connect as tlsConnect } from 'node:tls';
import { connect as netConnect, type Socket } from 'node:net';
import { readFileSync } from 'node:fs';
import { WebSocket, WebSocketServer } from 'ws';
import { loadEnv, type TestEnv } from '../env/testenv.ts';
import { startLevee, writeKubeconfig, type LeveeProcess } from '../support/levee.ts';

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
