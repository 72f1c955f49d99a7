// What ships: every manifest in deploy/ is accepted by the apiserver (server-side dry run, so
// admission and schema validation run as for a real apply), and Levee runs without writing a single
// file, as a read-only root filesystem requires.
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { loadEnv, type TestEnv } from '../env/testenv.ts';
import { kubectl } from '../support/kubectl.ts';
import { startLevee } from '../support/levee.ts';
import { agentFor, get } from '../support/http.ts';

const DEPLOY = resolve(import.meta.dirname, '../../deploy');
let env: TestEnv;

before(async () => {
  env = loadEnv();
  // The namespace and ServiceAccount the other manifests live in; applying it is idempotent (the
  // security tests apply it too), and a dry run of objects in a namespace needs the namespace.
  const applied = await kubectl(env.kubectl, env.kubeconfig, ['apply', '-f', join(DEPLOY, 'rbac.yaml')]);
  assert.equal(applied.code, 0, applied.stderr);
});

const manifests = readdirSync(DEPLOY).filter((f) => f.endsWith('.yaml'));

test('deploy/ has the manifests of both deployments', () => {
  for (const f of ['rbac.yaml', 'gateway.yaml', 'sidecar-daemonset.yaml', 'sidecar-rbac.yaml']) assert.ok(manifests.includes(f), f);
});

for (const file of manifests) {
  test(`kubectl apply --dry-run=server accepts deploy/${file}`, async () => {
    const r = await kubectl(env.kubectl, env.kubeconfig, ['apply', '--dry-run=server', '--validate=strict', '-f', join(DEPLOY, file)]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /\(server dry run\)/);
    assert.equal(r.stderr, '');
  });
}

test('Levee serves, drains and exits without writing any file (read-only root filesystem)', async () => {
  // Node's permission model: reads anywhere, no file writes, no child processes; worker threads
  // (--workers) allowed.
  const levee = await startLevee({ kubeconfig: env.kubeconfig, tls: env.leveeServing, nodeFlags: ['--permission', '--allow-fs-read=*', '--allow-worker'], extra: ['--workers', '2', '--cache', 'configmaps'] });
  const agent = agentFor(env.caFile);
  try {
    let ready = 0;
    for (let i = 0; i < 200 && (ready = (await get(`${levee.url.origin}/readyz`, agent)).status) !== 200; i++) await new Promise((r) => setTimeout(r, 50));
    assert.equal(ready, 200);
    assert.equal((await get(`${levee.url.origin}/api/v1/configmaps?resourceVersion=0`, agent, env.tokens.admin)).status, 200);
    assert.equal((await get(`${levee.url.origin}/api/v1/secrets?limit=1`, agent, env.tokens.admin)).status, 200);
    assert.equal((await get(`${levee.url.origin}/metrics`, agent)).status, 200);
    assert.equal((await get(`${levee.url.origin}/debug/levee/cache`, agent, env.tokens.admin)).status, 200);
  } finally {
    await agent.close();
  }
  levee.kill('SIGTERM');
  assert.deepEqual(await levee.exited, { code: 0, signal: null }, levee.output());
  assert.doesNotMatch(levee.output(), /ERR_ACCESS_DENIED/);
});
