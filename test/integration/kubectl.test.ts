// kubectl through Levee behaves as kubectl against the apiserver: the same objects, the same
// tables, the same errors, for reads, writes and watches.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { loadEnv, type TestEnv } from '../env/testenv.ts';
import { kubectl } from '../support/kubectl.ts';
import { startLevee, writeKubeconfig, type LeveeProcess } from '../support/levee.ts';
import { agentFor, suffix } from '../support/http.ts';
import { namespaceReady, NO_SCHEDULER } from '../support/cluster.ts';

let env: TestEnv;
let levee: LeveeProcess;
let viaLevee: string;
let aliceViaLevee: string;
let aliceDirect: string;
const ns = `kubectl-${suffix()}`;

before(async () => {
  env = loadEnv();
  levee = await startLevee({ kubeconfig: env.kubeconfig, tls: env.leveeServing });
  viaLevee = writeKubeconfig(levee.url.href, env.caFile, env.tokens.admin);
  aliceViaLevee = writeKubeconfig(levee.url.href, env.caFile, env.tokens.alice);
  aliceDirect = writeKubeconfig(env.server, env.caFile, env.tokens.alice);
});

after(async () => {
  await levee?.stop();
});

const k = (kubeconfig: string, args: string[], stdin?: string) => kubectl(env.kubectl, kubeconfig, args, stdin);

/** Both ways, asserting the same exit code and output; the AGE column is the only thing that may differ. */
async function same(args: string[], kcLevee = viaLevee, kcDirect = env.kubeconfig): Promise<string> {
  const [a, b] = await Promise.all([k(kcLevee, args), k(kcDirect, args)]);
  const age = (s: string) => s.replace(/\b\d+(ms|s|m|h|d)(\d+s)?\b/g, '<age>');
  assert.equal(a.code, b.code, `exit codes differ for ${args.join(' ')}:\nlevee: ${a.stderr}\ndirect: ${b.stderr}`);
  assert.equal(age(a.stdout), age(b.stdout), `stdout differs for ${args.join(' ')}`);
  assert.equal(a.stderr.replaceAll(levee.url.host, '<server>'), b.stderr.replaceAll(new URL(env.server).host, '<server>'));
  return a.stdout;
}

test('create, get, list, patch and delete through Levee', async () => {
  let r = await k(viaLevee, ['create', 'namespace', ns]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, new RegExp(`namespace/${ns} created`));
  // The pod below is admitted once the controllers have made the namespace's ServiceAccount.
  const agent = agentFor(env.caFile);
  await namespaceReady(env, agent, ns).finally(() => agent.close());

  const manifest = JSON.stringify({
    apiVersion: 'v1',
    kind: 'List',
    items: [
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'settings', namespace: ns, labels: { app: 'demo' } }, data: { mode: 'a' } },
      {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'web', namespace: ns, labels: { app: 'demo' } },
        // Left Pending (no scheduler of this name runs), so both sides see the same pod throughout.
        spec: { schedulerName: NO_SCHEDULER, containers: [{ name: 'c', image: 'registry.example/web:1' }] },
      },
    ],
  });
  r = await k(viaLevee, ['apply', '-f', '-'], manifest);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /configmap\/settings created/);
  assert.match(r.stdout, /pod\/web created/);

  // Reads: the same bytes of JSON and the same server-side tables.
  const json = JSON.parse(await same(['get', 'configmaps,pods', '-n', ns, '-o', 'json'])) as { items: unknown[] };
  assert.equal(json.items.length >= 2, true);
  await same(['get', 'pods', '-n', ns]);
  await same(['get', 'pods', '-n', ns, '-l', 'app=demo', '-o', 'wide']);
  await same(['get', 'pod', 'web', '-n', ns, '-o', 'yaml']);
  await same(['get', 'namespaces', ns]);

  r = await k(viaLevee, ['patch', 'configmap', 'settings', '-n', ns, '--type', 'merge', '-p', '{"data":{"mode":"b"}}']);
  assert.equal(r.code, 0, r.stderr);
  r = await k(env.kubeconfig, ['get', 'configmap', 'settings', '-n', ns, '-o', 'jsonpath={.data.mode}']);
  assert.equal(r.stdout, 'b');

  r = await k(viaLevee, ['apply', '--server-side', '-f', '-'], JSON.stringify({
    apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'applied', namespace: ns }, data: { x: '1' },
  }));
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /configmap\/applied serverside-applied/);

  r = await k(viaLevee, ['label', 'pod', 'web', '-n', ns, 'tier=front']);
  assert.equal(r.code, 0, r.stderr);
  await same(['get', 'pods', '-n', ns, '-l', 'tier=front', '-o', 'name']);

  r = await k(viaLevee, ['delete', 'configmap', 'settings', '-n', ns]);
  assert.equal(r.code, 0, r.stderr);
  r = await k(env.kubeconfig, ['get', 'configmap', 'settings', '-n', ns]);
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /NotFound|not found/);
});

test('errors are the apiserver\'s own', async () => {
  await same(['get', 'pod', 'no-such-pod', '-n', ns]);
  await same(['get', 'nosuchkind']);
  // A restricted user is refused with the apiserver's Forbidden message, through Levee as directly.
  await same(['get', 'pods', '-n', ns], aliceViaLevee, aliceDirect);
  await same(['auth', 'can-i', 'create', 'pods', '-n', ns], aliceViaLevee, aliceDirect);
});

test('discovery and version are forwarded', async () => {
  await same(['api-resources', '--sort-by=name']);
  await same(['api-versions']);
  const a = await k(viaLevee, ['version', '-o', 'json']);
  const b = await k(env.kubeconfig, ['version', '-o', 'json']);
  assert.deepEqual((JSON.parse(a.stdout) as { serverVersion: unknown }).serverVersion, (JSON.parse(b.stdout) as { serverVersion: unknown }).serverVersion);
});

test('kubectl get --watch through Levee sees changes as they happen', async () => {
  const child = spawn(env.kubectl, ['--kubeconfig', viaLevee, 'get', 'configmaps', '-n', ns, '--watch', '--output-watch-events'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  const waitFor = async (re: RegExp) => {
    for (let i = 0; i < 200 && !re.test(out); i++) await new Promise((r) => setTimeout(r, 50));
    assert.match(out, re);
  };
  try {
    await waitFor(/ADDED\s+applied\b/);
    const r = await k(env.kubeconfig, ['create', 'configmap', 'watched', '-n', ns, '--from-literal=a=1']);
    assert.equal(r.code, 0, r.stderr);
    await waitFor(/ADDED\s+watched\b/);
    await k(env.kubeconfig, ['delete', 'configmap', 'watched', '-n', ns]);
    await waitFor(/DELETED\s+watched\b/);
  } finally {
    child.kill();
  }
});

test('Levee never logs a credential', () => {
  const logs = levee.output();
  assert.match(logs, /"msg":"request"/);
  for (const token of Object.values(env.tokens)) assert.equal(logs.includes(token), false);
});
