// The upstream connector: each new connection presents the certificate of the credentials in force,
// or none for the client identity, and verifies the server against the credentials' CA; a TLS
// context is built once per material, and again when the material changes (a rotated file, an
// exec plugin's new certificate). A local TLS server stands in for the far end of a socket.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createServer, type Server, type TLSSocket } from 'node:tls';
import type { AddressInfo } from 'node:net';
import { connectTarget, identityConnector, openSocket } from '../../src/upstream/connector.ts';
import type { OwnCredentials, Upstream } from '../../src/upstream/credentials.ts';

// Test-only material (EC P-256, valid until 2126): a CA, the server's certificate for 127.0.0.1,
// two client certificates (CN levee-a, levee-b) and a CA that signed none of them. Made with
// `openssl req -x509` and `openssl x509 -req`.
const pem = (name: string): Buffer => readFileSync(join(import.meta.dirname, 'fixtures', 'tls', name));

let server: Server;
const seen: Array<string | undefined> = [];

before(async () => {
  server = createServer({ cert: pem('apiserver.crt'), key: pem('apiserver.key'), ca: pem('ca.crt'), requestCert: true, rejectUnauthorized: false }, (socket: TLSSocket) => {
    const cn = socket.getPeerCertificate().subject?.CN;
    seen.push(typeof cn === 'string' ? cn : undefined);
    socket.end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
});

after(() => server?.close());

/** An upstream whose credentials are whatever `current` holds when asked. */
function upstreamWith(current: () => OwnCredentials): Upstream {
  const url = new URL(`https://127.0.0.1:${(server.address() as AddressInfo).port}`);
  return { server: url, servers: [url], pathPrefix: '', source: 'test', ownCredentials: () => Promise.resolve(current()) };
}

/** Opens a connection with `connector` and waits for the server to have seen it: the certificate's CN. */
async function connectOnce(connector: ReturnType<typeof identityConnector>, up: Upstream): Promise<string | undefined> {
  const before = seen.length;
  const socket = await openSocket(connector, connectTarget(up.server));
  socket.resume();
  await new Promise((resolve) => socket.once('close', resolve));
  assert.equal(seen.length, before + 1);
  return seen.at(-1);
}

test('a new connection presents the certificate in force, and the next one a rotated one', async () => {
  const material = (who: string): OwnCredentials => ({ tls: { ca: pem('ca.crt'), cert: pem(`${who}.crt`), key: pem(`${who}.key`), rejectUnauthorized: true } });
  let creds = material('levee-a');
  const up = upstreamWith(() => creds);
  const connector = identityConnector(up, 'own');
  const open = (): Promise<string | undefined> => connectOnce(connector, up);
  assert.equal(await open(), 'levee-a');
  assert.equal(await open(), 'levee-a');
  creds = material('levee-b');
  assert.equal(await open(), 'levee-b');
});

test('the client identity presents no certificate, whatever Levee holds', async () => {
  const up = upstreamWith(() => ({ tls: { ca: pem('ca.crt'), cert: pem('levee-a.crt'), key: pem('levee-a.key'), rejectUnauthorized: true } }));
  assert.equal(await connectOnce(identityConnector(up, 'client'), up), undefined);
});

test('a server the credentials\' CA did not sign is refused', async () => {
  const up = upstreamWith(() => ({ tls: { ca: pem('other-ca.crt'), rejectUnauthorized: true } }));
  await assert.rejects(openSocket(identityConnector(up, 'own'), connectTarget(up.server)), /certificate/i);
});
