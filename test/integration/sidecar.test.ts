// A request that acts as Levee itself (`--auth trust-loopback` or `none`, no credentials) must
// never borrow Levee's right to impersonate. Levee here runs as the central gateway's service
// account (deploy/rbac.yaml), which may impersonate anyone: the apiserver would honour the
// headers, so only Levee can refuse them. The sidecar ships its own role (deploy/sidecar-rbac.yaml)
// that cannot impersonate at all.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { resolve } from 'node:path';
import { request, type Dispatcher } from 'undici';
import { loadEnv, type TestEnv } from '../env/testenv.ts';
import { agentFor, send, suffix } from '../support/http.ts';
import { kubectl } from '../support/kubectl.ts';
import { startLevee, writeKubeconfig, type LeveeProcess } from '../support/levee.ts';
import { serviceAccountToken } from '../support/serviceaccount.ts';
import { waitReady } from '../support/wait.ts';

const DEPLOY = resolve(import.meta.dirname, '../../deploy');
const run = suffix();
const MALLORY = { 'impersonate-user': 'mallory', 'impersonate-group': 'system:masters' };

let env: TestEnv;
let admin: Dispatcher;
let gatewayToken: string;
let sidecarToken: string;
let trusting: LeveeProcess;
let open: LeveeProcess;
let sidecar: LeveeProcess;

interface Answer {
  status: number;
  body: string;
}

async function ask(origin: string, path: string, headers: Record<string, string> = {}, method: 'GET' | 'POST' = 'GET', body?: unknown): Promise<Answer> {
  const res = await request(origin + path, {
    method,
    dispatcher: origin.startsWith('https:') ? admin : undefined,
    headers: { accept: 'application/json', ...(body ? { 'content-type': 'application/json' } : {}), ...headers },
    body: body === undefined ? null : JSON.stringify(body),
  });
  return { status: res.statusCode, body: await res.body.text() };
}

interface StatusBody {
  kind: string;
  code: number;
  reason: string;
  message: string;
  details?: { name?: string; kind?: string };
}

/** The apiserver's refusal of an impersonation: a 403 Forbidden Status naming the user asked for. */
function assertImpersonationRefused(a: Answer, what: string): void {
  assert.equal(a.status, 403, `${what}: ${a.body}`);
  const s = JSON.parse(a.body) as StatusBody;
  assert.equal(s.kind, 'Status', what);
  assert.equal(s.code, 403, what);
  assert.equal(s.reason, 'Forbidden', what);
  assert.deepEqual(s.details, { name: 'mallory', kind: 'users' }, what);
  assert.match(s.message, /^users "mallory" is forbidden: User "system:serviceaccount:levee:levee" cannot impersonate resource "users" in API group "" at the cluster scope: /, what);
}

before(async () => {
  env = loadEnv();
  admin = agentFor(env.caFile);
  for (const file of ['rbac.yaml', 'sidecar-rbac.yaml']) {
    const applied = await kubectl(env.kubectl, env.kubeconfig, ['apply', '-f', resolve(DEPLOY, file)]);
    assert.equal(applied.code, 0, applied.stderr);
  }
  gatewayToken = await serviceAccountToken(env, admin, 'levee', 'levee');
  sidecarToken = await serviceAccountToken(env, admin, 'levee', 'node-agent');
  [trusting, open, sidecar] = await Promise.all([
    startLevee({ kubeconfig: writeKubeconfig(env.server, env.caFile, gatewayToken), auth: 'trust-loopback', extra: ['--cache', 'pods'] }),
    startLevee({ kubeconfig: writeKubeconfig(env.server, env.caFile, gatewayToken), extra: ['--auth', 'none', '--cache', 'pods'] }),
    startLevee({ kubeconfig: writeKubeconfig(env.server, env.caFile, sidecarToken), auth: 'trust-loopback', extra: ['--cache', 'pods'] }),
  ]);
  await Promise.all([waitReady(trusting), waitReady(open), waitReady(sidecar)]);
});

after(async () => {
  await Promise.all([trusting?.stop(), open?.stop(), sidecar?.stop()]);
  await send('DELETE', `${env.server}/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/mallory-${run}`, admin, env.tokens.admin);
  await (admin as { close(): Promise<void> } | undefined)?.close();
});

test('the gateway\'s own role may impersonate: the apiserver would honour these headers from it', async () => {
  const direct = await ask(env.server, '/api/v1/namespaces/kube-system/secrets', { authorization: `Bearer ${gatewayToken}`, ...MALLORY });
  assert.equal(direct.status, 200, direct.body);
});

for (const mode of ['trust-loopback', 'none'] as const) {
  test(`--auth ${mode}: a client without credentials cannot impersonate through Levee`, async () => {
    const origin = (mode === 'none' ? open : trusting).url.origin;
    // Acting as Levee: its service account may not read secrets, so neither may the client.
    const plain = await ask(origin, '/api/v1/namespaces/kube-system/secrets');
    assert.equal(plain.status, 403, plain.body);
    // Asking to be someone else is refused by Levee itself, on every path: a forwarded read, a
    // read Levee would answer from its cache, a write, an upgrade.
    assertImpersonationRefused(await ask(origin, '/api/v1/namespaces/kube-system/secrets', MALLORY), 'forwarded read');
    assertImpersonationRefused(await ask(origin, '/api/v1/pods?resourceVersion=0', MALLORY), 'cached read');
    assertImpersonationRefused(await ask(origin, '/api/v1/namespaces/kube-system/secrets', { 'impersonate-user': 'mallory' }), 'user only');
    const binding = {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: `mallory-${run}` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'mallory' }],
    };
    assertImpersonationRefused(await ask(origin, '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', MALLORY, 'POST', binding), 'write');
    const created = await ask(env.server, `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/mallory-${run}`, { authorization: `Bearer ${env.tokens.admin}` });
    assert.equal(created.status, 404, 'the binding must not exist');
    const upgrade = await rawUpgrade(origin, '/api/v1/namespaces/kube-system/pods/p/exec?command=sh&stdout=true', MALLORY);
    assert.match(upgrade.head, /^HTTP\/1\.1 403 /);
    assertImpersonationRefused({ status: 403, body: upgrade.body }, 'upgrade');
  });
}

test('a client that brings its own credentials still impersonates as the apiserver decides', async () => {
  // bob's token travels upstream unchanged with his headers: the apiserver refuses bob, not Levee.
  const headers = { authorization: `Bearer ${env.tokens.bob}`, ...MALLORY };
  const [direct, through] = await Promise.all([ask(env.server, '/api/v1/namespaces/kube-system/secrets', headers), ask(trusting.url.origin, '/api/v1/namespaces/kube-system/secrets', headers)]);
  assert.equal(direct.status, 403);
  assert.deepEqual(through, direct);
});

test('the sidecar\'s shipped role cannot impersonate anyone', async () => {
  const user = 'system:serviceaccount:levee:node-agent';
  const groups = ['system:serviceaccounts', 'system:serviceaccounts:levee', 'system:authenticated'];
  const checks = [
    { verb: 'impersonate', resource: 'users', name: 'mallory' },
    { verb: 'impersonate', resource: 'groups', name: 'system:masters' },
    { verb: 'impersonate', resource: 'serviceaccounts', namespace: 'kube-system', name: 'default' },
    { verb: 'impersonate', group: 'authentication.k8s.io', resource: 'uids', name: 'x' },
    { verb: 'impersonate', group: 'authentication.k8s.io', resource: 'userextras', subresource: 'scopes', name: 'x' },
    { verb: 'impersonate-on:user-info:list', resource: 'secrets', namespace: 'kube-system' },
  ];
  for (const resourceAttributes of checks) {
    const review = await send('POST', `${env.server}/apis/authorization.k8s.io/v1/subjectaccessreviews`, admin, env.tokens.admin, {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: { user, groups, resourceAttributes },
    });
    assert.equal(review.status, 201, review.body);
    assert.equal((JSON.parse(review.body) as { status: { allowed: boolean } }).status.allowed, false, JSON.stringify(resourceAttributes));
  }
  // What it may do, it does: its node's pods from the cache; what it may not, the apiserver refuses.
  const pods = await ask(sidecar.url.origin, '/api/v1/pods?resourceVersion=0');
  assert.equal(pods.status, 200, pods.body);
  const secrets = await ask(sidecar.url.origin, '/api/v1/namespaces/kube-system/secrets');
  assert.equal(secrets.status, 403);
  assert.match(secrets.body, /User \\"system:serviceaccount:levee:node-agent\\" cannot list resource \\"secrets\\"/);
  // Directly, with its own token, the apiserver refuses its impersonation too.
  const direct = await ask(env.server, '/api/v1/namespaces/kube-system/secrets', { authorization: `Bearer ${sidecarToken}`, ...MALLORY });
  assert.equal(direct.status, 403, direct.body);
});

/** A SPDY-style upgrade (kubectl exec's POST) on a plain loopback listener; the answer's head and body. */
async function rawUpgrade(origin: string, path: string, headers: Record<string, string>): Promise<{ head: string; body: string }> {
  const url = new URL(origin);
  const socket: Socket = connect(Number(url.port), url.hostname);
  await new Promise((r) => socket.once('connect', r));
  const lines = [`POST ${path} HTTP/1.1`, 'Host: levee', 'Connection: Upgrade', 'Upgrade: SPDY/3.1', 'X-Stream-Protocol-Version: v4.channel.k8s.io', 'Content-Length: 0'];
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  socket.write(lines.join('\r\n') + '\r\n\r\n');
  let received = '';
  for await (const chunk of socket) received += (chunk as Buffer).toString('latin1');
  const at = received.indexOf('\r\n\r\n');
  return { head: received.slice(0, at), body: received.slice(at + 4) };
}
