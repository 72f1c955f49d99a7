// Levee answers from its cache only what the apiserver would answer, to whom it would answer it.
// A matrix of identities (tokens, a service account, client certificates, impersonation, anonymous)
// × verbs × resources × namespaces goes to the apiserver directly and through Levee, which runs as
// the service account of deploy/rbac.yaml; every cell must get the same code and, for refusals, the
// same Status body. Revoking a role ends a running watch; no credential reaches the logs.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, copyFileSync, writeFileSync, renameSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { connect, type PeerCertificate } from 'node:tls';
import { Agent, request } from 'undici';
import { loadEnv, type CertPair, type TestEnv } from '../env/testenv.ts';
import { startLevee, writeKubeconfig, type LeveeProcess } from '../support/levee.ts';
import { kubectl } from '../support/kubectl.ts';
import { send, suffix } from '../support/http.ts';
import { createNamespace, NO_SCHEDULER } from '../support/cluster.ts';
import { persistentDifference } from '../support/wait.ts';
import { tempDir } from '../support/tempdir.ts';

const run = suffix();
const nsA = `sec-a-${run}`;
const nsB = `sec-b-${run}`;
const RBAC_MANIFEST = resolve(import.meta.dirname, '../../deploy/rbac.yaml');

let env: TestEnv;
let admin: Agent;
let levee: LeveeProcess;
let anonymousLevee: LeveeProcess;
let localRbacLevee: LeveeProcess;
let leveeToken: string;
let readerToken: string;
const agents = new Map<string, Agent>();

/** An identity as a client presents it: a bearer token or a client certificate, maybe impersonating. */
interface Who {
  label: string;
  token?: () => string;
  cert?: CertPair;
  impersonate?: string;
  /**
   * A client certificate that asks to impersonate someone it may not: the apiserver (1.37, with
   * constrained impersonation) names the impersonate-on:user-info verb it also tried, Levee the
   * legacy impersonate check it made. Both refuse with 403; only the message differs.
   */
  refusalWordingDiffers?: boolean;
}

function agentFor(cert?: CertPair): Agent {
  const key = cert?.cert ?? '';
  let a = agents.get(key);
  if (!a) {
    a = new Agent({
      connect: { ca: readFileSync(env.caFile), ...(cert ? { cert: readFileSync(cert.cert), key: readFileSync(cert.key) } : {}) },
      allowH2: false,
    });
    agents.set(key, a);
  }
  return a;
}

interface Answer {
  status: number;
  body: string;
}

async function ask(origin: string, who: Who, path: string, watch = false): Promise<Answer> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (who.token) headers.authorization = `Bearer ${who.token()}`;
  if (who.impersonate) headers['impersonate-user'] = who.impersonate;
  const res = await request(origin + path, { dispatcher: agentFor(who.cert), headers });
  const body = await res.body.text();
  if (res.statusCode !== 200) return { status: res.statusCode, body };
  // What the client learns: the names it was given (lists, watch events) or the object's.
  if (watch) {
    const events = body.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as { type: string; object: { metadata?: { name?: string } } });
    return { status: 200, body: events.filter((e) => e.type !== 'BOOKMARK').map((e) => `${e.type} ${e.object.metadata?.name}`).sort().join(',') };
  }
  const o = JSON.parse(body) as { items?: Array<{ metadata: { name: string } }>; metadata: { name?: string } };
  return { status: 200, body: o.items ? o.items.map((i) => i.metadata.name).join(',') : (o.metadata.name ?? '') };
}

async function waitFor(what: string, check: () => Promise<boolean>, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function waitReady(l: LeveeProcess): Promise<void> {
  await waitFor('levee ready', async () => {
    const res = await request(`${l.url.origin}/readyz`, { dispatcher: admin });
    await res.body.text();
    return res.statusCode === 200;
  });
}

async function create(path: string, body: unknown): Promise<void> {
  const res = await send('POST', env.server + path, admin, env.tokens.admin, body);
  assert.equal(res.status, 201, `${path}: ${res.body}`);
}

async function serviceAccountToken(namespace: string, name: string): Promise<string> {
  const res = await send('POST', `${env.server}/api/v1/namespaces/${namespace}/serviceaccounts/${name}/token`, admin, env.tokens.admin, {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: { expirationSeconds: 3600 },
  });
  assert.equal(res.status, 201, res.body);
  return (JSON.parse(res.body) as { status: { token: string } }).status.token;
}

before(async () => {
  env = loadEnv();
  admin = agentFor();
  // Levee runs with exactly the permissions the shipped manifest grants.
  const applied = await kubectl(env.kubectl, env.kubeconfig, ['apply', '-f', RBAC_MANIFEST]);
  assert.equal(applied.code, 0, applied.stderr);
  leveeToken = await serviceAccountToken('levee', 'levee');

  for (const ns of [nsA, nsB]) {
    await createNamespace(env, admin, ns);
    for (const n of ['cm-1', 'cm-2', 'cm-3']) await create(`/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: n }, data: { k: n } });
    for (const n of ['pod-1', 'pod-2']) {
      // Unscheduled, so they stay as created while the matrix reads them.
      await create(`/api/v1/namespaces/${ns}/pods`, { metadata: { name: n }, spec: { schedulerName: NO_SCHEDULER, containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10' }] } });
    }
    await create(`/api/v1/namespaces/${ns}/secrets`, { metadata: { name: 's-1' }, stringData: { k: 'secret' } });
  }
  // alice: reads configmaps and pods in namespace A, and may get namespace A itself.
  await create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${nsA}/roles`, {
    metadata: { name: 'reader' },
    rules: [{ apiGroups: [''], resources: ['configmaps', 'pods'], verbs: ['get', 'list', 'watch'] }],
  });
  await create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${nsA}/rolebindings`, {
    metadata: { name: 'alice-reader' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'reader' },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'alice' }],
  });
  await create('/apis/rbac.authorization.k8s.io/v1/clusterroles', {
    metadata: { name: `get-${nsA}-${run}` },
    rules: [
      { apiGroups: [''], resources: ['namespaces'], verbs: ['get'], resourceNames: [nsA] },
      // bob reads nothing, but may act as alice.
      { apiGroups: [''], resources: ['users'], verbs: ['impersonate'], resourceNames: ['alice'] },
    ],
  });
  await create('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
    metadata: { name: `get-${nsA}-${run}` },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: `get-${nsA}-${run}` },
    subjects: [
      { apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'alice' },
      { apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'bob' },
    ],
  });
  // A service account that reads pods and configmaps in namespace B, and only lists secrets there.
  await create(`/api/v1/namespaces/${nsB}/serviceaccounts`, { metadata: { name: 'reader' } });
  await create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${nsB}/roles`, {
    metadata: { name: 'reader' },
    rules: [
      { apiGroups: [''], resources: ['configmaps', 'pods'], verbs: ['get', 'list', 'watch'] },
      { apiGroups: [''], resources: ['secrets'], verbs: ['list'] },
    ],
  });
  await create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${nsB}/rolebindings`, {
    metadata: { name: 'reader' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'reader' },
    subjects: [{ kind: 'ServiceAccount', name: 'reader', namespace: nsB }],
  });
  readerToken = await serviceAccountToken(nsB, 'reader');
  // RBAC reaches the apiserver's authorizer through its informers: wait until it is in force.
  await waitFor('RBAC in force', async () => {
    const a = await ask(env.server, { label: '', token: () => env.tokens.alice }, `/api/v1/namespaces/${nsA}/configmaps`);
    const r = await ask(env.server, { label: '', token: () => readerToken }, `/api/v1/namespaces/${nsB}/pods`);
    const n = await ask(env.server, { label: '', token: () => env.tokens.bob, impersonate: 'alice' }, `/api/v1/namespaces/${nsA}`);
    return a.status === 200 && r.status === 200 && n.status === 200;
  });

  const kc = writeKubeconfig(env.server, env.caFile, leveeToken);
  const common = ['--cache', 'configmaps,pods,namespaces', '--client-ca-file', env.caFile];
  [levee, anonymousLevee, localRbacLevee] = await Promise.all([
    startLevee({ kubeconfig: kc, tls: env.leveeServing, extra: common }),
    startLevee({ kubeconfig: kc, tls: env.leveeServing, extra: [...common, '--anonymous-auth'] }),
    startLevee({ kubeconfig: kc, tls: env.leveeServing, extra: [...common, '--authorization-local-rbac'] }),
  ]);
  for (const l of [levee, anonymousLevee, localRbacLevee]) await waitReady(l);
});

after(async () => {
  await Promise.all([levee?.stop(), anonymousLevee?.stop(), localRbacLevee?.stop()]);
  for (const ns of [nsA, nsB]) await send('DELETE', `${env.server}/api/v1/namespaces/${ns}`, admin, env.tokens.admin);
  for (const kind of ['clusterroles', 'clusterrolebindings']) {
    await send('DELETE', `${env.server}/apis/rbac.authorization.k8s.io/v1/${kind}/get-${nsA}-${run}`, admin, env.tokens.admin);
  }
  await Promise.all([...agents.values()].map((a) => a.close()));
});

/** Every request of the matrix for one identity: [description, path, is a watch]. */
function cells(continueFrom: Map<string, string>): Array<[string, string, boolean]> {
  const out: Array<[string, string, boolean]> = [];
  for (const ns of [nsA, nsB]) {
    for (const [resource, name] of [['configmaps', 'cm-1'], ['pods', 'pod-1']] as const) {
      const base = `/api/v1/namespaces/${ns}/${resource}`;
      out.push([`get ${resource}/${name} in ${ns}`, `${base}/${name}?resourceVersion=0`, false]);
      out.push([`list ${resource} in ${ns}`, `${base}?resourceVersion=0`, false]);
      out.push([`watch ${resource} in ${ns}`, `${base}?watch=true&resourceVersion=0&timeoutSeconds=1`, true]);
      out.push([`watch ${resource}/${name} in ${ns}`, `${base}?watch=true&resourceVersion=0&timeoutSeconds=1&fieldSelector=metadata.name%3D${name}`, true]);
      out.push([`continue a list of ${resource} in ${ns}`, `${base}?limit=1&continue=${encodeURIComponent(continueFrom.get(base) ?? '')}`, false]);
    }
    out.push([`get secrets/s-1 in ${ns} (forwarded)`, `/api/v1/namespaces/${ns}/secrets/s-1`, false]);
    out.push([`list secrets in ${ns} (forwarded)`, `/api/v1/namespaces/${ns}/secrets`, false]);
  }
  out.push([`get namespace ${nsA}`, `/api/v1/namespaces/${nsA}?resourceVersion=0`, false]);
  out.push([`get namespace ${nsB}`, `/api/v1/namespaces/${nsB}?resourceVersion=0`, false]);
  out.push(['list namespaces', '/api/v1/namespaces?resourceVersion=0', false]);
  out.push(['watch namespaces', '/api/v1/namespaces?watch=true&resourceVersion=0&timeoutSeconds=1', true]);
  out.push(['list configmaps everywhere', '/api/v1/configmaps?resourceVersion=0', false]);
  return out;
}

/** Continue tokens for page 2 of each list, from an admin's page 1 on that target. */
async function continueTokens(origin: string): Promise<Map<string, string>> {
  const tokens = new Map<string, string>();
  for (const ns of [nsA, nsB]) {
    for (const resource of ['configmaps', 'pods']) {
      const base = `/api/v1/namespaces/${ns}/${resource}`;
      const res = await request(`${origin}${base}?limit=1`, { dispatcher: admin, headers: { authorization: `Bearer ${env.tokens.admin}` } });
      const page = JSON.parse(await res.body.text()) as { metadata: { continue?: string } };
      assert.ok(page.metadata.continue, `${origin}${base}: no continue token`);
      tokens.set(base, page.metadata.continue);
    }
  }
  return tokens;
}

for (const variant of ['SubjectAccessReviews', 'RBAC evaluated locally'] as const) {
test(`every cell of the identity × verb × resource × namespace matrix gets the apiserver's answer (${variant})`, async () => {
  const target = variant === 'SubjectAccessReviews' ? levee : localRbacLevee;
  const identities: Who[] = [
    { label: 'admin (token)', token: () => env.tokens.admin },
    { label: 'alice (token, reads namespace A)', token: () => env.tokens.alice },
    { label: 'bob (token, reads nothing)', token: () => env.tokens.bob },
    { label: `service account ${nsB}/reader (views namespace B)`, token: () => readerToken },
    { label: 'alice (client certificate)', cert: env.clientCerts.alice },
    { label: 'bob (client certificate)', cert: env.clientCerts.bob },
    { label: 'admin (client certificate, system:masters)', cert: env.clientCerts.admin },
    { label: 'admin (token) as alice', token: () => env.tokens.admin, impersonate: 'alice' },
    { label: 'bob (token) as alice', token: () => env.tokens.bob, impersonate: 'alice' },
    { label: 'bob (client certificate) as alice', cert: env.clientCerts.bob, impersonate: 'alice' },
    { label: 'alice (client certificate) as bob, not allowed', cert: env.clientCerts.alice, impersonate: 'bob', refusalWordingDiffers: true },
    { label: `admin (client certificate) as ${nsB}/reader`, cert: env.clientCerts.admin, impersonate: `system:serviceaccount:${nsB}:reader` },
    { label: 'bob (token) as admin, not allowed', token: () => env.tokens.bob, impersonate: 'admin' },
  ];
  const direct = cells(await continueTokens(env.server));
  const through = cells(await continueTokens(target.url.origin));
  const jobs: Array<() => Promise<string | undefined>> = [];
  const codes = new Map<number, number>();
  for (const who of identities) {
    for (let i = 0; i < direct.length; i++) {
      const [what, path, watch] = direct[i]!;
      jobs.push(async () => {
        let code = 0;
        // Cluster-wide cells see other tests' namespaces come and go: asked again while they differ.
        const mismatch = await persistentDifference(async () => {
          const [a, b] = await Promise.all([ask(env.server, who, path, watch), ask(target.url.origin, who, through[i]![1], watch)]);
          code = a.status;
          if (who.refusalWordingDiffers && a.status === 403 && b.status === 403) {
            const reason = (JSON.parse(b.body) as { message: string }).message;
            return reason === 'users "bob" is forbidden: User "alice" cannot impersonate resource "users" in API group "" at the cluster scope'
              ? undefined
              : `${who.label}, ${what}: levee ${b.body}`;
          }
          if (a.status !== b.status || a.body !== b.body) return `${who.label}, ${what}: apiserver ${a.status} ${a.body.slice(0, 200)} / levee ${b.status} ${b.body.slice(0, 200)}`;
          return undefined;
        });
        codes.set(code, (codes.get(code) ?? 0) + 1);
        return mismatch;
      });
    }
  }
  const mismatches: string[] = [];
  const workers = Array.from({ length: 24 }, async () => {
    for (let job = jobs.shift(); job; job = jobs.shift()) {
      const m = await job();
      if (m) mismatches.push(m);
    }
  });
  await Promise.all(workers);
  const total = identities.length * direct.length;
  console.log(`${total} cells, ${mismatches.length} mismatches; apiserver codes: ${[...codes].map(([c, n]) => `${c}×${n}`).join(' ')}`);
  assert.deepEqual(mismatches, []);
  // The matrix means something only if it holds both outcomes in quantity.
  assert.ok((codes.get(200) ?? 0) > 50 && (codes.get(403) ?? 0) > 50, JSON.stringify([...codes]));
  if (variant === 'RBAC evaluated locally') {
    const metrics = await (await request(`${target.url.origin}/metrics`, { dispatcher: admin })).body.text();
    const local = Number(/levee_authorization_local_rbac_allowed_total (\d+)/.exec(metrics)?.[1]);
    assert.ok(local > 10, `RBAC allowed only ${local} decisions locally`);
  }
});
}

test('without credentials: 401 by default; with --anonymous-auth, system:anonymous as the apiserver decides', async () => {
  const nobody: Who = { label: 'anonymous' };
  const refused = await ask(levee.url.origin, nobody, `/api/v1/namespaces/${nsA}/configmaps?resourceVersion=0`);
  assert.equal(refused.status, 401);
  assert.equal((JSON.parse(refused.body) as { reason: string }).reason, 'Unauthorized');
  const direct = cells(await continueTokens(env.server));
  const through = cells(await continueTokens(anonymousLevee.url.origin));
  for (let i = 0; i < direct.length; i++) {
    const [what, path, watch] = direct[i]!;
    const [a, b] = await Promise.all([ask(env.server, nobody, path, watch), ask(anonymousLevee.url.origin, nobody, through[i]![1], watch)]);
    assert.equal(b.status, a.status, what);
    assert.equal(b.body, a.body, what);
  }
  // A token the apiserver does not know is its 401, from the cache path as from the forwarded one.
  const bogus: Who = { label: 'bogus', token: () => 'not-a-token' };
  for (const path of [`/api/v1/namespaces/${nsA}/configmaps?resourceVersion=0`, `/api/v1/namespaces/${nsA}/secrets`]) {
    const [a, b] = await Promise.all([ask(env.server, bogus, path), ask(levee.url.origin, bogus, path)]);
    assert.equal(b.status, 401, path);
    assert.equal(b.body, a.body, path);
  }
});

test('modes: trust-loopback acts as Levee for requests without credentials, none checks nothing, both only on loopback', async () => {
  const kc = writeKubeconfig(env.server, env.caFile, leveeToken);
  const sidecar = await startLevee({ kubeconfig: kc, auth: 'trust-loopback', extra: ['--cache', 'configmaps'] });
  const open = await startLevee({ kubeconfig: kc, extra: ['--auth', 'none', '--cache', 'configmaps'] });
  try {
    await Promise.all([waitReady(sidecar), waitReady(open)]);
    const nobody: Who = { label: 'nobody' };
    const asLevee: Who = { label: 'levee', token: () => leveeToken };
    // Levee's service account reads configmaps (from the cache) but not secrets (forwarded as Levee).
    for (const path of [`/api/v1/namespaces/${nsA}/configmaps?resourceVersion=0`, `/api/v1/namespaces/${nsA}/configmaps/cm-2?resourceVersion=0`, `/api/v1/namespaces/${nsA}/secrets`]) {
      const [a, b] = await Promise.all([ask(env.server, asLevee, path), ask(sidecar.url.origin, nobody, path)]);
      assert.equal(b.status, a.status, path);
      assert.equal(b.body, a.body, path);
    }
    // A client that brings credentials is still authenticated and authorized as itself.
    const bob: Who = { label: 'bob', token: () => env.tokens.bob };
    const [a, b] = await Promise.all([ask(env.server, bob, `/api/v1/namespaces/${nsA}/configmaps?resourceVersion=0`), ask(sidecar.url.origin, bob, `/api/v1/namespaces/${nsA}/configmaps?resourceVersion=0`)]);
    assert.equal(a.status, 403);
    assert.equal(b.body, a.body);
    // none: the cache answers anyone, all the admin would get; what is forwarded goes as Levee.
    const path = `/api/v1/namespaces/${nsA}/configmaps?resourceVersion=0`;
    const [everything, listed] = await Promise.all([ask(env.server, { label: 'admin', token: () => env.tokens.admin }, path), ask(open.url.origin, nobody, path)]);
    assert.deepEqual([listed.status, listed.body], [200, everything.body]);
    assert.match(listed.body, /^cm-1,cm-2,cm-3\b/);
    assert.equal((await ask(open.url.origin, nobody, `/api/v1/namespaces/${nsA}/secrets`)).status, 403);
  } finally {
    await Promise.all([sidecar.stop(), open.stop()]);
  }
  for (const mode of ['none', 'trust-loopback']) {
    await assert.rejects(
      startLevee({ kubeconfig: kc, tls: env.leveeServing, extra: ['--auth', mode, '--listen', '0.0.0.0:0'] }),
      new RegExp(`--auth ${mode} needs a loopback listener`),
    );
  }
});

for (const local of [false, true]) {
test(`revoking a role ends a running watch served from the cache with a 403 ERROR event${local ? ' (RBAC evaluated locally)' : ''}`, async () => {
  const kc = writeKubeconfig(env.server, env.caFile, leveeToken);
  const quick = await startLevee({
    kubeconfig: kc,
    tls: env.leveeServing,
    extra: ['--cache', 'configmaps', '--watch-reauthorize-interval', '1s', '--authorization-cache-allowed-ttl', '500ms', ...(local ? ['--authorization-local-rbac'] : [])],
  });
  try {
    await waitReady(quick);
    await create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${nsA}/rolebindings`, {
      metadata: { name: 'bob-reader' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'reader' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'bob' }],
    });
    const path = `/api/v1/namespaces/${nsA}/configmaps?watch=true&resourceVersion=0`;
    await waitFor('bob may watch', async () => (await ask(env.server, { label: '', token: () => env.tokens.bob }, `${path}&timeoutSeconds=1`, true)).status === 200);
    const res = await request(quick.url.origin + path, { dispatcher: admin, headers: { authorization: `Bearer ${env.tokens.bob}` } });
    assert.equal(res.statusCode, 200);
    const started = Date.now();
    let text = '';
    let revoked = false;
    for await (const chunk of res.body) {
      text += (chunk as Buffer).toString();
      if (!revoked && text.includes('"name":"cm-3"')) {
        revoked = true;
        const del = await send('DELETE', `${env.server}/apis/rbac.authorization.k8s.io/v1/namespaces/${nsA}/rolebindings/bob-reader`, admin, env.tokens.admin);
        assert.equal(del.status, 200, del.body);
      }
      assert.ok(Date.now() - started < 30_000, 'the watch was not ended within 30 s of the revocation');
    }
    const events = text.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as { type: string; object: { code?: number; reason?: string; message?: string } });
    const last = events.at(-1)!;
    assert.equal(last.type, 'ERROR');
    assert.equal(last.object.code, 403);
    assert.equal(last.object.reason, 'Forbidden');
    assert.equal(last.object.message, `configmaps is forbidden: User "bob" cannot watch resource "configmaps" in API group "" in the namespace "${nsA}"`);
    assert.ok(events.filter((e) => e.type === 'ADDED').length >= 3);
  } finally {
    await quick.stop();
  }
});
}

test('the serving certificate is reloaded when its files change', async () => {
  const dir = tempDir('levee-certs-');
  const cert = join(dir, 'tls.crt');
  const key = join(dir, 'tls.key');
  copyFileSync(env.leveeServing.cert, cert);
  copyFileSync(env.leveeServing.key, key);
  const l = await startLevee({ kubeconfig: env.kubeconfig, tls: { cert, key }, extra: ['--cache', ''] });
  const served = (): Promise<PeerCertificate> =>
    new Promise((ok, fail) => {
      const s = connect({ host: '127.0.0.1', port: Number(l.url.port), ca: readFileSync(env.caFile), servername: 'localhost' }, () => {
        ok(s.getPeerCertificate());
        s.end();
      });
      s.once('error', fail);
    });
  try {
    assert.equal((await served()).subject.CN, 'levee');
    // As a Secret volume rotates: new files moved into place. The apiserver's certificate is
    // signed by the same CA and valid for 127.0.0.1, so clients keep trusting Levee.
    const pki = resolve(env.caFile, '..');
    writeFileSync(`${key}.new`, readFileSync(join(pki, 'apiserver.key')));
    writeFileSync(`${cert}.new`, readFileSync(join(pki, 'apiserver.crt')));
    renameSync(`${key}.new`, key);
    renameSync(`${cert}.new`, cert);
    // Every thread reloads its own listener's files (README, "Workers"): a connection is dealt to
    // any of them, so twenty in a row, all with the new certificate, mean every thread has it.
    await waitFor(
      'the new certificate on every thread',
      async () => {
        for (let i = 0; i < 20; i++) if ((await served()).subject.CN !== 'kube-apiserver') return false;
        return true;
      },
      15_000,
    );
    // The reloaded context keeps the server's cipher order (src/http/cipherorder.ts): Node's
    // client puts AES-256 first, the apiserver's order (and Levee's) gives it AES-128.
    const cipher = await new Promise<string>((ok, fail) => {
      const s = connect({ host: '127.0.0.1', port: Number(l.url.port), ca: readFileSync(env.caFile), servername: 'localhost' }, () => {
        ok(s.getCipher().standardName);
        s.end();
      });
      s.once('error', fail);
    });
    assert.equal(cipher, 'TLS_AES_128_GCM_SHA256');
    // A half-written rotation (a key that does not match) keeps the working certificate.
    writeFileSync(key, readFileSync(env.leveeServing.key));
    await new Promise((r) => setTimeout(r, 5_000));
    assert.equal((await served()).subject.CN, 'kube-apiserver');
    assert.match(l.output(), /could not be loaded; keeping the old ones/);
  } finally {
    await l.stop();
  }
});

test('no credential ever appears in Levee\'s logs', () => {
  const secrets = [env.tokens.admin, env.tokens.alice, env.tokens.bob, leveeToken, readerToken];
  for (const l of [levee, anonymousLevee]) {
    const out = l.output();
    assert.ok(out.length > 0);
    for (const s of secrets) assert.ok(!out.includes(s), 'a token was logged');
    assert.ok(!/BEGIN [A-Z ]*PRIVATE KEY/.test(out), 'a private key was logged');
  }
});
