// The test environment's control plane reaches the apiserver only through Levee: the real
// kube-controller-manager (each controller with its own ServiceAccount token), kube-scheduler and
// KWOK's fake kubelets, with client certificates Levee verifies and impersonates, protobuf,
// watch-lists, metadata-only informers and leader election. Through that same Levee, a
// Deployment must get Running pods on the simulated nodes and a deleted namespace must go away;
// and Levee's log and metrics must show the control plane's own requests, the reads it answered
// from its cache and why it forwarded the others.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import type { Agent } from 'undici';
import { KWOK_LABEL, loadEnv, status, CONTROL_PLANE_USERS, type TestEnv } from '../env/testenv.ts';
import { agentFor, get, send, suffix } from '../support/http.ts';
import { waitFor } from '../support/wait.ts';

const env: TestEnv = loadEnv();
const skip = env.controlPlane ? false : 'the environment is bare: no control plane runs (npm run testenv -- up)';
const levee = env.controlPlane?.levee ?? '';
const ns = `controlplane-${suffix()}`;
const started = Date.now();
let agent: Agent;

interface Pod {
  metadata: { name: string; deletionTimestamp?: string };
  spec: { nodeName?: string };
  status: { phase?: string; podIP?: string; conditions?: Array<{ type: string; status: string }> };
}
interface Deployment {
  metadata: { generation: number };
  status: { observedGeneration?: number; replicas?: number; readyReplicas?: number; availableReplicas?: number; updatedReplicas?: number };
}

/** Every request here goes through the control plane's Levee, as the admin. */
const viaLevee = {
  get: (path: string) => get(`${levee}${path}`, agent, env.tokens.admin),
  send: (method: 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown, contentType?: string) => send(method, `${levee}${path}`, agent, env.tokens.admin, body, contentType),
};

async function pods(): Promise<Pod[]> {
  const r = await viaLevee.get(`/api/v1/namespaces/${ns}/pods?labelSelector=app%3Dweb`);
  assert.equal(r.status, 200, r.body);
  return (JSON.parse(r.body) as { items: Pod[] }).items;
}

const running = (p: Pod): boolean =>
  p.metadata.deletionTimestamp === undefined && p.status.phase === 'Running' && (p.status.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');

/** Until the Deployment has `replicas` ready pods, all Running on simulated nodes, and no others. */
async function settled(replicas: number): Promise<Pod[]> {
  let last = '';
  let current: Pod[] = [];
  await waitFor(
    `${replicas} ready replicas (last: ${last})`,
    async () => {
      const d = JSON.parse((await viaLevee.get(`/apis/apps/v1/namespaces/${ns}/deployments/web`)).body) as Deployment;
      current = await pods();
      last = `${JSON.stringify(d.status)}; pods ${current.map((p) => `${p.metadata.name} ${p.status.phase} on ${p.spec.nodeName}`).join(', ')}`;
      return (
        d.status.observedGeneration === d.metadata.generation &&
        d.status.readyReplicas === replicas &&
        d.status.availableReplicas === replicas &&
        d.status.replicas === replicas &&
        current.length === replicas &&
        current.every(running)
      );
    },
    120_000,
  ).catch((err: Error) => assert.fail(`${err.message}; last seen: ${last}`));
  return current;
}

before(() => {
  agent = agentFor(env.caFile);
});

after(async () => {
  await agent?.close();
});

test('a Deployment created through Levee gets Running pods on simulated nodes, and scales', { skip }, async () => {
  assert.equal((await viaLevee.send('POST', '/api/v1/namespaces', { metadata: { name: ns } })).status, 201);
  // Pods are admitted once the namespace's ServiceAccount exists: the serviceaccount controller's work.
  await waitFor('the default ServiceAccount', async () => (await viaLevee.get(`/api/v1/namespaces/${ns}/serviceaccounts/default`)).status === 200, 60_000);
  const created = await viaLevee.send('POST', `/apis/apps/v1/namespaces/${ns}/deployments`, {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'web' },
    spec: {
      replicas: 3,
      selector: { matchLabels: { app: 'web' } },
      template: {
        metadata: { labels: { app: 'web' } },
        spec: {
          // Only simulated nodes run pods; other tests' Node objects have no kubelet.
          nodeSelector: { [KWOK_LABEL.key]: KWOK_LABEL.value },
          containers: [{ name: 'web', image: 'registry.k8s.io/pause:3.10' }],
        },
      },
    },
  });
  assert.equal(created.status, 201, created.body);

  // The deployment and replicaset controllers made the pods, the scheduler bound them, KWOK ran them.
  const three = await settled(3);
  for (const p of three) {
    assert.ok(env.nodes.includes(p.spec.nodeName!), `${p.metadata.name} is on ${p.spec.nodeName}, not a simulated node`);
    assert.match(p.status.podIP ?? '', /^10\.244\./, `${p.metadata.name} has no pod IP from KWOK`);
  }
  console.log(`3 replicas Running: ${three.map((p) => `${p.metadata.name} on ${p.spec.nodeName}`).join(', ')}`);

  // Scaling down: the replicaset controller deletes pods gracefully and the fake kubelets finish it.
  const scaled = await viaLevee.send('PATCH', `/apis/apps/v1/namespaces/${ns}/deployments/web/scale`, { spec: { replicas: 1 } }, 'application/merge-patch+json');
  assert.equal(scaled.status, 200, scaled.body);
  const one = await settled(1);
  assert.ok(three.some((p) => p.metadata.name === one[0]!.metadata.name), 'the pod left is not one of the three: scaling down made a new one');
});

test('deleting a namespace through Levee completes', { skip }, async () => {
  const deleted = await viaLevee.send('DELETE', `/api/v1/namespaces/${ns}`);
  assert.equal(deleted.status, 200, deleted.body);
  // The namespace controller deletes every object in it (pods through their kubelets), then the namespace.
  await waitFor('the namespace to be gone', async () => (await viaLevee.get(`/api/v1/namespaces/${ns}`)).status === 404, 180_000);
  assert.equal((await get(`${env.server}/api/v1/namespaces/${ns}`, agent, env.tokens.admin)).status, 404);
  const left = await get(`${env.server}/api/v1/pods?fieldSelector=${encodeURIComponent(`metadata.namespace=${ns}`)}`, agent, env.tokens.admin);
  assert.deepEqual((JSON.parse(left.body) as { items: unknown[] }).items, []);
});

test('Levee served the control plane: its users, reads from the cache, forwards by reason', { skip }, async () => {
  const cp = env.controlPlane!;
  // The log of the Levee running now: request lines after its supervisor's last start.
  const text = readFileSync(cp.leveeLog, 'utf8');
  const lines = text.slice(text.lastIndexOf('\n==== ') + 1).split('\n');
  interface Line { msg?: string; time?: number; user?: string; verb?: string; path?: string; resource?: string; source?: string; code?: number }
  const requests = lines.flatMap((l) => {
    if (!l.startsWith('{')) return [];
    const o = JSON.parse(l) as Line;
    return o.msg === 'request' ? [o] : [];
  });
  const byUser = new Map<string, Map<string, number>>();
  for (const r of requests) {
    // Controllers authenticate with their ServiceAccounts' tokens: Levee names them only once it
    // had to learn the user (for an answer from its cache); a forwarded token is the apiserver's.
    const user = r.user ?? '(token, forwarded)';
    const row = byUser.get(user) ?? new Map<string, number>();
    const key = `${r.verb} ${r.source}`;
    row.set(key, (row.get(key) ?? 0) + 1);
    byUser.set(user, row);
  }
  console.log(
    `requests Levee logged (ended; watches log when they end), by user:\n${[...byUser]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([u, row]) => `  ${u}: ${[...row].sort().map(([k, n]) => `${k} ${n}`).join(', ')}`)
      .join('\n')}`,
  );
  for (const user of Object.values(CONTROL_PLANE_USERS)) assert.ok(byUser.has(user), `no request of ${user} went through Levee`);
  // Each component's part in this test's Deployment went through Levee: the deployment and
  // replicaset controllers (their ServiceAccounts' tokens), the scheduler, the fake kubelets, the
  // namespace controller; and the controller manager's leader lease.
  const inNamespace = (verb: string, pattern: RegExp, user?: string): number =>
    requests.filter((r) => r.verb === verb && (r.code ?? 0) < 300 && pattern.test(r.path ?? '') && (user === undefined || r.user === user)).length;
  const observed = {
    'ReplicaSet created': inNamespace('create', new RegExp(`^/apis/apps/v1/namespaces/${ns}/replicasets$`)),
    'pods created': inNamespace('create', new RegExp(`^/api/v1/namespaces/${ns}/pods$`)),
    'pods bound by the scheduler': inNamespace('create', new RegExp(`^/api/v1/namespaces/${ns}/pods/[^/]+/binding$`), CONTROL_PLANE_USERS['kube-scheduler']),
    'pod status written by KWOK': inNamespace('patch', new RegExp(`^/api/v1/namespaces/${ns}/pods/[^/]+/status$`), CONTROL_PLANE_USERS.kwok),
    'collections deleted with the namespace': inNamespace('deletecollection', new RegExp(`^/apis?/.*/namespaces/${ns}/`)),
    'leader lease renewed': inNamespace('update', /^\/apis\/coordination\.k8s\.io\/v1\/namespaces\/kube-system\/leases\/kube-controller-manager$/, CONTROL_PLANE_USERS['kube-controller-manager']),
  };
  console.log(`this test's Deployment through Levee: ${Object.entries(observed).map(([k, n]) => `${k} ${n}`).join(', ')}`);
  for (const [what, n] of Object.entries(observed)) assert.ok(n > 0, `${what}: none through Levee`);

  // Levee answered the control plane's requests during this test (the apiserver ran throughout,
  // unlike in fault tests): nothing it answered them was its own failure.
  const failed = requests.filter((r) => (r.time ?? 0) >= started && Object.values<string>(CONTROL_PLANE_USERS).includes(r.user ?? '') && (r.code ?? 0) >= 500);
  assert.deepEqual(failed.map((r) => `${r.code} ${r.user} ${r.verb} ${r.path}`), []);

  const metrics = (await get(`${cp.levee}/metrics`, agent)).body;
  const samples = (name: string): Array<[string, number]> =>
    [...metrics.matchAll(new RegExp(`^${name}\\{([^}]*)\\} (\\S+)$`, 'gm'))].map((m) => [m[1]!, Number(m[2])]);
  const forwarded = samples('levee_read_forwarded_total');
  const watching = samples('levee_longrunning_requests').filter(([l]) => l.includes('verb="WATCH"'));
  const open = (source: string, resource?: string): number =>
    watching.filter(([l]) => l.includes(`source="${source}"`) && (resource === undefined || l.includes(`resource="${resource}"`))).reduce((n, [, v]) => n + v, 0);
  const controlPlaneFromCache = requests.filter((r) => Object.values<string>(CONTROL_PLANE_USERS).includes(r.user ?? '') && r.source === 'cache').length;
  console.log(
    [
      `reads on cached resources Levee forwarded, by reason: ${forwarded.map(([l, v]) => `${/reason="([^"]*)"/.exec(l)![1]} ${v}`).join(', ')}`,
      `watches open now: ${open('cache')} from Levee's cache, ${open('upstream')} forwarded`,
      `the components' requests answered from the cache and ended: ${controlPlaneFromCache}`,
    ].join('\n'),
  );
  // The controllers' typed informers read protobuf, and the namespace controller and the garbage
  // collector list what they delete as metadata only (PartialObjectMetadataList, in protobuf):
  // all of it from the cache, none forwarded for its media type.
  assert.equal(forwarded.find(([l]) => l === 'reason="media-type"')?.[1] ?? 0, 0, 'reads were forwarded for their media type');
  // KWOK's informers (JSON) of nodes and pods are served from the cache, as an agent's are.
  assert.ok(open('cache', 'nodes') > 0 && open('cache', 'pods') > 0, 'no watch of nodes and pods is served from the cache');

  // And Levee never crashed under the control plane: its supervisor never had to start it again.
  const s = await status();
  assert.equal(s.components.levee?.restarts, 0, `the control plane's Levee was restarted; see ${cp.leveeLog}`);
});
