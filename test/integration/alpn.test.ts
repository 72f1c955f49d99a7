// The TLS listener's protocol negotiation, and what a connection costs once negotiated: h2 when
// offered, http/1.1 otherwise, TLS's no_application_protocol alert for a client that offers only
// protocols Levee does not speak; and an open connection pins no Buffer pool of its own
// (src/http/listener.ts, selectProtocol).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { connect, createSecureContext, type SecureContext, type TLSSocket } from 'node:tls';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { listen, type Listener } from '../../src/http/listener.ts';
import { loadEnv, type TestEnv } from '../env/testenv.ts';

let env: TestEnv;
let listener: Listener;
// One context for every client connection, so that what the clients keep is the same for each.
let client: SecureContext;

before(async () => {
  env = loadEnv();
  listener = await listen(
    { host: '127.0.0.1', port: 0, tls: { certFile: env.leveeServing.cert, keyFile: env.leveeServing.key } },
    { request: (_req, res) => res.end('ok'), upgrade: (_req, socket) => socket.destroy() },
  );
  client = createSecureContext({ ca: readFileSync(env.caFile) });
});

after(async () => {
  await listener?.close();
});

function open(alpn: string[] | undefined): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port: Number(listener.url.port), secureContext: client, servername: 'localhost', ALPNProtocols: alpn });
    socket.once('secureConnect', () => resolve(socket));
    socket.once('error', reject);
  });
}

async function http1Get(socket: TLSSocket): Promise<string> {
  let body = '';
  socket.setEncoding('utf8');
  socket.on('data', (d: string) => (body += d));
  const closed = new Promise((resolve) => socket.once('close', resolve));
  socket.write('GET /version HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
  await closed;
  return body;
}

test('ALPN picks h2 whenever the client offers it, in any order', async () => {
  for (const offer of [['h2'], ['h2', 'http/1.1'], ['http/1.1', 'h2']]) {
    const socket = await open(offer);
    assert.equal(socket.alpnProtocol, 'h2', JSON.stringify(offer));
    socket.destroy();
  }
});

test('a client offering only http/1.1, or no ALPN at all, is served HTTP/1.1', async () => {
  const offered = await open(['http/1.1']);
  assert.equal(offered.alpnProtocol, 'http/1.1');
  assert.match(await http1Get(offered), /^HTTP\/1\.1 200 [\s\S]*\r\n\r\nok$/);
  const none = await open(undefined);
  assert.equal(none.alpnProtocol, false);
  assert.match(await http1Get(none), /^HTTP\/1\.1 200 [\s\S]*\r\n\r\nok$/);
});

test('a client offering only protocols Levee does not speak gets no_application_protocol', async () => {
  await assert.rejects(open(['spdy/3.1', 'h3']), { code: 'ERR_SSL_TLSV1_ALERT_NO_APPLICATION_PROTOCOL' });
});

test('an open connection keeps no Buffer pool alive', async () => {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const collect = async (): Promise<number> => {
    for (let i = 0; i < 3; i++) {
      gc();
      await new Promise((resolve) => setImmediate(resolve));
    }
    return process.memoryUsage().arrayBuffers;
  };
  const n = 200;
  const sockets: TLSSocket[] = [];
  const before = await collect();
  try {
    for (let i = 0; i < n; i++) {
      sockets.push(await open(undefined));
      // Other traffic between two handshakes: small Buffers that fill (and replace) Node's shared
      // pool and die at once. What a connection kept of a pool is all that survives the collection.
      for (let j = 0; j < 100; j++) Buffer.from(`frame ${i} ${j} `.padEnd(100, '.'));
    }
    const perConnection = ((await collect()) - before) / n;
    assert.ok(perConnection < 2048, `${Math.round(perConnection)} bytes of ArrayBuffers kept per open connection`);
  } finally {
    for (const s of sockets) s.destroy();
  }
});

/** The cipher suite `port` negotiates with a client that offers `offer` (`ciphers`, `maxVersion`). */
function negotiated(port: number, offer: { ciphers?: string; maxVersion?: 'TLSv1.2' }): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, ca: readFileSync(env.caFile), servername: 'localhost', ALPNProtocols: ['h2'], ...offer });
    socket.once('secureConnect', () => {
      resolve(socket.getCipher().standardName);
      socket.destroy();
    });
    socket.once('error', reject);
  });
}

test('the cipher suite is the one kube-apiserver picks for the same client, by the server\'s order', async () => {
  const offers = [
    // Node's own order (AES-256 first), as @kubernetes/client-node sends it.
    {},
    { ciphers: 'TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256' },
    // A client without AES instructions puts ChaCha20 first, and keeps it.
    { ciphers: 'TLS_CHACHA20_POLY1305_SHA256:TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256' },
    { maxVersion: 'TLSv1.2' as const },
  ];
  const apiserverPort = Number(new URL(env.server).port);
  for (const offer of offers) {
    const apiserver = await negotiated(apiserverPort, offer);
    assert.equal(await negotiated(Number(listener.url.port), offer), apiserver, JSON.stringify(offer));
  }
  assert.equal(await negotiated(Number(listener.url.port), {}), 'TLS_AES_128_GCM_SHA256');
  assert.equal(await negotiated(Number(listener.url.port), offers[2]!), 'TLS_CHACHA20_POLY1305_SHA256');
});
