// The upstream connector against the real apiserver: each new connection presents the certificate of
// the credentials in force, and the apiserver authenticates it as that user; after the material
// changes (a rotated file, an exec plugin's new certificate) the next connection presents the new
// one; the client identity presents none; a server the credentials' CA did not sign is refused.
// The TLS context is built once per material (src/upstream/connector.ts), so these pin that the
// context follows the material.
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';
import { Client } from 'undici';
import { loadEnv, type TestEnv } from '../env/testenv.ts';
import { connectTarget, identityConnector, openSocket } from '../../src/upstream/connector.ts';
import type { OwnCredentials, Upstream } from '../../src/upstream/credentials.ts';

let env: TestEnv;
let ca: Buffer;

before(() => {
  env = loadEnv();
  ca = readFileSync(env.caFile);
});

/** An upstream whose credentials are whatever `current` holds when asked. */
function upstreamWith(current: () => OwnCredentials): Upstream {
  const server = new URL(env.server);
  return { server, servers: [server], pathPrefix: '', source: 'test', ownCredentials: () => Promise.resolve(current()) };
}

const certOf = (user: 'alice' | 'bob'): OwnCredentials => ({
  tls: { ca, cert: readFileSync(env.clientCerts[user].cert), key: readFileSync(env.clientCerts[user].key), rejectUnauthorized: true },
});

/** Who the apiserver says the caller is, over one new connection made by `connector` (a SelfSubjectReview). */
async function whoAmI(up: Upstream, connector: ReturnType<typeof identityConnector>): Promise<{ status: number; body: string }> {
  const client = new Client(up.server.origin, { connect: connector });
  try {
    const res = await client.request({
      method: 'POST',
      path: '/apis/authentication.k8s.io/v1/selfsubjectreviews',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' }),
    });
    return { status: res.statusCode, body: await res.body.text() };
  } finally {
    await client.close();
  }
}

const username = (a: { status: number; body: string }): string => {
  assert.equal(a.status, 201, a.body);
  return (JSON.parse(a.body) as { status: { userInfo: { username: string } } }).status.userInfo.username;
};

test('a new connection presents the certificate in force, and the next one a rotated one', async () => {
  let creds = certOf('alice');
  const up = upstreamWith(() => creds);
  // One connector, as a pool keeps: it must notice the new material itself.
  const connector = identityConnector(up, 'own');
  assert.equal(username(await whoAmI(up, connector)), 'alice');
  assert.equal(username(await whoAmI(up, connector)), 'alice');
  creds = certOf('bob');
  assert.equal(username(await whoAmI(up, connector)), 'bob');
});

test('the client identity presents no certificate, whatever Levee holds', async () => {
  const up = upstreamWith(() => certOf('alice'));
  const answer = await whoAmI(up, identityConnector(up, 'client'));
  // Without a certificate or a token the apiserver sees system:anonymous, which may not ask.
  assert.equal(answer.status, 403, answer.body);
  assert.match(answer.body, /User \\"system:anonymous\\"/);
});

test('an apiserver the credentials\' CA did not sign is refused', async () => {
  // The public roots Node ships: the test apiserver's certificate chains to none of them.
  const up = upstreamWith(() => ({ tls: { ca: rootCertificates.join('\n'), rejectUnauthorized: true } }));
  await assert.rejects(openSocket(identityConnector(up, 'own'), connectTarget(up.server)), /certificate/i);
});
