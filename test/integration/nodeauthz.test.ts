// Kubelets through Levee get what the apiserver's Node authorizer gives them directly. The test
// environment runs --authorization-mode=Node,RBAC, as real clusters do; two node identities
// (system:node:node-a and system:node:node-b in system:nodes, by client certificate) read pods,
// Nodes, secrets and configmaps with and without selectors, directly and through Levee (running as
// the service account of deploy/rbac.yaml, trusting the test CA). The Node authorizer decides on
// the request's field selector (a kubelet may list and watch pods only with its own spec.nodeName)
// and on the object graph (a secret or configmap only when a pod bound to the node uses it), so
// every cell must get the same code and, for refusals, the same Status body; and cells of cached
// resources must have been answered by Levee itself, not handed to the apiserver.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Agent, request } from 'undici';
import { loadEnv, NODE_NAMES, type NodeName, type TestEnv } from '../env/testenv.ts';
import { startLevee, writeKubeconfig, type LeveeProcess } from '../support/levee.ts';
import { kubectl } from '../support/kubectl.ts';
import { send, suffix } from '../support/http.ts';
import { createNamespace, createNodes, deleteNodes, NO_SCHEDULER } from '../support/cluster.ts';
import { persistentDifference } from '../support/wait.ts';

const run = suffix();
const ns = `nodeauthz-${run}`;
const RBAC_MANIFEST = resolve(import.meta.dirname, '../../deploy/rbac.yaml');

let env: TestEnv;
let admin: Agent;
let levee: LeveeProcess;
let localRbacLevee: LeveeProcess;
let leveeToken: string;
const agents = new Map<string, Agent>();
let createdNodes: string[] = [];

function agentFor(node?: NodeName): Agent {
  const key = node ?? '';
  let a = agents.get(key);
  if (!a) {
    const cert = node ? env.clientCerts[node] : undefined;
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

type Kind = 'read' | 'watch' | 'patch';

/** A node's request; what it learns is the names it was given (a list, watch events, an object). */
async function ask(origin: string, node: NodeName, path: string, kind: Kind, auditId?: string): Promise<Answer> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (auditId) headers['audit-id'] = auditId;
  const res =
    kind === 'patch'
      ? await request(origin + path, {
          method: 'PATCH',
          dispatcher: agentFor(node),
          headers: { ...headers, 'content-type': 'application/merge-patch+json' },
          body: JSON.stringify({ metadata: { labels: { [`levee-test-${run}`]: 'x' } } }),
        })
      : await request(origin + path, { dispatcher: agentFor(node), headers });
  const body = await res.body.text();
  if (res.statusCode !== 200) return { status: res.statusCode, body };
  if (kind === 'watch') {
    const events = body.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as { type: string; object: { metadata?: { name?: string } } });
    return { status: 200, body: events.filter((e) => e.type !== 'BOOKMARK').map((e) => `${e.type} ${e.object.metadata?.name}`).sort().join(',') };
  }
  const o = JSON.parse(body) as { items?: Array<{ metadata: { name: string } }>; metadata: { name?: string } };
  return { status: 200, body: o.items ? o.items.map((i) => i.metadata.name).join(',') : (o.metadata.name ?? '') };
}

async function waitFor(what: string, check: () => Promise<boolean>, ms = 30_000): Promise<void> {
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

const letter = (node: NodeName): string => node.slice('node-'.length);
const other = (node: NodeName): NodeName => (node === 'node-a' ? 'node-b' : 'node-a');
const sel = (s: string): string => encodeURIComponent(s);

before(async () => {
  env = loadEnv();
  admin = agentFor();
  const applied = await kubectl(env.kubectl, env.kubeconfig, ['apply', '-f', RBAC_MANIFEST]);
  assert.equal(applied.code, 0, applied.stderr);
  const token = await send('POST', `${env.server}/api/v1/namespaces/levee/serviceaccounts/levee/token`, admin, env.tokens.admin, {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: { expirationSeconds: 3600 },
  });
  assert.equal(token.status, 201, token.body);
  leveeToken = (JSON.parse(token.body) as { status: { token: string } }).status.token;

  // No kubelet runs for them (KWOK manages only its own nodes): the admin creates the Node objects
  // and binds the pods itself.
  createdNodes = await createNodes(env, admin, NODE_NAMES);
  await createNamespace(env, admin, ns);
  for (const n of ['a', 'b', 'none']) {
    await create(`/api/v1/namespaces/${ns}/secrets`, { metadata: { name: `s-${n}` }, stringData: { k: n } });
    await create(`/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: `cm-${n}` }, data: { k: n } });
  }
  const pod = (name: string, node: string | undefined, app: string, refs: string | undefined): unknown => ({
    metadata: { name, labels: { app } },
    spec: {
      // Unbound stays unbound: no scheduler of this name runs.
      ...(node ? { nodeName: node } : { schedulerName: NO_SCHEDULER }),
      containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10' }],
      volumes: refs ? [{ name: 's', secret: { secretName: `s-${refs}` } }, { name: 'cm', configMap: { name: `cm-${refs}` } }] : [],
    },
  });
  await create(`/api/v1/namespaces/${ns}/pods`, pod('pod-a', 'node-a', 'web', 'a'));
  await create(`/api/v1/namespaces/${ns}/pods`, pod('pod-a2', 'node-a', 'db', undefined));
  await create(`/api/v1/namespaces/${ns}/pods`, pod('pod-b', 'node-b', 'web', 'b'));
  await create(`/api/v1/namespaces/${ns}/pods`, pod('pod-unbound', undefined, 'web', 'none'));
  // The Node authorizer learns pods and what they use from its informers: wait until it knows.
  await waitFor('the Node authorizer\'s graph', async () => {
    const checks = await Promise.all(
      NODE_NAMES.flatMap((n) => [
        ask(env.server, n, `/api/v1/namespaces/${ns}/secrets/s-${letter(n)}`, 'read'),
        ask(env.server, n, `/api/v1/namespaces/${ns}/configmaps/cm-${letter(n)}`, 'read'),
        ask(env.server, n, `/api/v1/namespaces/${ns}/pods/pod-${letter(n)}`, 'read'),
      ]),
    );
    return checks.every((c) => c.status === 200);
  });

  const kc = writeKubeconfig(env.server, env.caFile, leveeToken);
  // The default cache but for what this test does not read; secrets are not cached (deploy/rbac.yaml
  // does not let Levee list them), so they show the forwarded path of a node's certificate.
  const common = ['--cache', 'pods,nodes,configmaps', '--client-ca-file', env.caFile];
  [levee, localRbacLevee] = await Promise.all([
    startLevee({ kubeconfig: kc, tls: env.leveeServing, extra: common }),
    startLevee({ kubeconfig: kc, tls: env.leveeServing, extra: [...common, '--authorization-local-rbac'] }),
  ]);
  await Promise.all([waitReady(levee), waitReady(localRbacLevee)]);
});

after(async () => {
  await Promise.all([levee?.stop(), localRbacLevee?.stop()]);
  // Pods bound to a node wait for its kubelet to confirm their deletion, and none runs for node-a
  // or node-b: deleted at once, so a later run's node does not see this run's pods (which would
  // otherwise stay until the pod garbage collector finds their node gone).
  await send('DELETE', `${env.server}/api/v1/namespaces/${ns}/pods?gracePeriodSeconds=0`, admin, env.tokens.admin);
  await send('DELETE', `${env.server}/api/v1/namespaces/${ns}`, admin, env.tokens.admin);
  await deleteNodes(env, admin, createdNodes);
  createdNodes = [];
  await Promise.all([...agents.values()].map((a) => a.close()));
});

type Source = 'cache' | 'upstream' | 'either';
interface Cell {
  what: string;
  path: string;
  kind: Kind;
  /** Where Levee must have answered it: cached resources are decided by Levee itself. */
  source: Source;
}

/** Every request of the matrix for one node. */
function cells(me: NodeName): Cell[] {
  const them = other(me);
  const [x, y] = [letter(me), letter(them)];
  const pods = `/api/v1/namespaces/${ns}/pods`;
  const out: Cell[] = [];
  const read = (what: string, path: string, source: Source = 'cache'): void => void out.push({ what, path, kind: 'read', source });
  const watch = (what: string, path: string, source: Source = 'cache'): void =>
    void out.push({ what, path: `${path}${path.includes('?') ? '&' : '?'}resourceVersion=0&timeoutSeconds=1`, kind: 'watch', source });

  // Pods: a list or watch needs the node's own spec.nodeName selector; a get, a pod bound to it.
  read(`get its pod pod-${x}`, `${pods}/pod-${x}?resourceVersion=0`);
  read(`get the other node's pod pod-${y}`, `${pods}/pod-${y}?resourceVersion=0`);
  read('get an unbound pod', `${pods}/pod-unbound?resourceVersion=0`);
  read('list pods everywhere, no selector', '/api/v1/pods?resourceVersion=0');
  read('list pods in the namespace, no selector', `${pods}?resourceVersion=0`);
  read('list pods everywhere by its spec.nodeName', `/api/v1/pods?resourceVersion=0&fieldSelector=${sel(`spec.nodeName=${me}`)}`);
  read('list pods in the namespace by its spec.nodeName', `${pods}?resourceVersion=0&fieldSelector=${sel(`spec.nodeName=${me}`)}`);
  read('list pods by the other spec.nodeName', `/api/v1/pods?resourceVersion=0&fieldSelector=${sel(`spec.nodeName=${them}`)}`);
  read('list pods by its spec.nodeName, spelled ==', `/api/v1/pods?resourceVersion=0&fieldSelector=${sel(`spec.nodeName==${me}`)}`);
  read('list pods by spec.nodeName != the other', `/api/v1/pods?resourceVersion=0&fieldSelector=${sel(`spec.nodeName!=${them}`)}`);
  read('list pods by its spec.nodeName and status.phase', `/api/v1/pods?resourceVersion=0&fieldSelector=${sel(`status.phase=Pending,spec.nodeName=${me}`)}`);
  read('list pods by its spec.nodeName and a label', `/api/v1/pods?resourceVersion=0&fieldSelector=${sel(`spec.nodeName=${me}`)}&labelSelector=${sel('app=web')}`);
  read('list pods by a label only', `/api/v1/pods?resourceVersion=0&labelSelector=${sel('app=web')}`);
  read(`list pods by metadata.name=pod-${x}`, `${pods}?resourceVersion=0&fieldSelector=${sel(`metadata.name=pod-${x}`)}`);
  read(`list pods by metadata.name=pod-${y}`, `${pods}?resourceVersion=0&fieldSelector=${sel(`metadata.name=pod-${y}`)}`);
  // Without a resourceVersion, Levee verifies it is current and may forward when it cannot.
  read('list pods by its spec.nodeName, consistent read', `/api/v1/pods?fieldSelector=${sel(`spec.nodeName=${me}`)}`, 'either');
  watch('watch pods everywhere by its spec.nodeName', `/api/v1/pods?watch=true&fieldSelector=${sel(`spec.nodeName=${me}`)}`);
  watch('watch pods in the namespace by its spec.nodeName and a label', `${pods}?watch=true&fieldSelector=${sel(`spec.nodeName=${me}`)}&labelSelector=${sel('app=web')}`);
  watch('watch pods by the other spec.nodeName', `/api/v1/pods?watch=true&fieldSelector=${sel(`spec.nodeName=${them}`)}`);
  watch('watch pods, no selector', '/api/v1/pods?watch=true');
  watch(`watch pods by metadata.name=pod-${x}`, `${pods}?watch=true&fieldSelector=${sel(`metadata.name=pod-${x}`)}`);
  // The deprecated /watch/ path is authorized without its selectors, by the apiserver and Levee.
  watch('watch pods by its spec.nodeName through /watch/', `/api/v1/watch/pods?fieldSelector=${sel(`spec.nodeName=${me}`)}`);

  // Nodes: only its own, by name or by metadata.name.
  read('get its Node', `/api/v1/nodes/${me}?resourceVersion=0`);
  read('get the other Node', `/api/v1/nodes/${them}?resourceVersion=0`);
  read('list Nodes', '/api/v1/nodes?resourceVersion=0');
  read('list Nodes by its metadata.name', `/api/v1/nodes?resourceVersion=0&fieldSelector=${sel(`metadata.name=${me}`)}`);
  read('list Nodes by the other metadata.name', `/api/v1/nodes?resourceVersion=0&fieldSelector=${sel(`metadata.name=${them}`)}`);
  watch('watch Nodes by its metadata.name', `/api/v1/nodes?watch=true&fieldSelector=${sel(`metadata.name=${me}`)}`);
  watch('watch Nodes, no selector', '/api/v1/nodes?watch=true');

  // Secrets (forwarded: not cached) and configmaps (cached): only what a pod bound to the node uses.
  for (const [resource, prefix, source] of [['secrets', 's', 'upstream'], ['configmaps', 'cm', 'cache']] as const) {
    const base = `/api/v1/namespaces/${ns}/${resource}`;
    read(`get ${resource} its pod uses`, `${base}/${prefix}-${x}?resourceVersion=0`, source);
    read(`get ${resource} the other node's pod uses`, `${base}/${prefix}-${y}?resourceVersion=0`, source);
    read(`get ${resource} only an unbound pod uses`, `${base}/${prefix}-none?resourceVersion=0`, source);
    read(`list ${resource}`, `${base}?resourceVersion=0`, source);
    read(`list ${resource} by the metadata.name its pod uses`, `${base}?resourceVersion=0&fieldSelector=${sel(`metadata.name=${prefix}-${x}`)}`, source);
    read(`list ${resource} by the metadata.name the other's pod uses`, `${base}?resourceVersion=0&fieldSelector=${sel(`metadata.name=${prefix}-${y}`)}`, source);
    watch(`watch ${resource} by the metadata.name its pod uses`, `${base}?watch=true&fieldSelector=${sel(`metadata.name=${prefix}-${x}`)}`, source);
    watch(`watch ${resource}`, `${base}?watch=true`, source);
  }

  // List options the apiserver cannot read (timeoutSeconds is an int64) make it drop the name the
  // metadata.name selector gave before it authorizes, so the node is refused; such a request is
  // the apiserver's to answer.
  read(
    'list configmaps by the metadata.name its pod uses, timeoutSeconds unreadable',
    `/api/v1/namespaces/${ns}/configmaps?resourceVersion=0&fieldSelector=${sel(`metadata.name=cm-${x}`)}&timeoutSeconds=x`,
    'upstream',
  );

  // A write, forwarded under the node's identity: the Node authorizer allows it and NodeRestriction
  // refuses a node changing another node.
  out.push({ what: 'patch the other Node', path: `/api/v1/nodes/${them}`, kind: 'patch', source: 'upstream' });
  return out;
}

/**
 * The source Levee logged for each request it answered, by the Audit-Id it was sent. A watch logs
 * once it has ended, which the client may learn before the line reaches this process: waited for.
 */
async function sources(l: LeveeProcess, ids: readonly string[]): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const read = (): boolean => {
    for (const line of l.output().split('\n')) {
      if (!line.includes('"msg":"request"')) continue;
      const entry = JSON.parse(line) as { requestId?: string; source?: string };
      if (entry.requestId && entry.source) out.set(entry.requestId, entry.source);
    }
    return ids.every((id) => out.has(id));
  };
  // What is still missing then shows as "(not logged)" in the assertion.
  await waitFor('Levee\'s request log', () => Promise.resolve(read()), 10_000).catch(() => undefined);
  return out;
}

for (const variant of ['SubjectAccessReviews', 'RBAC evaluated locally'] as const) {
  test(`a node's reads get the apiserver's answers through Levee, selectors included (${variant})`, async () => {
    const target = variant === 'SubjectAccessReviews' ? levee : localRbacLevee;
    const jobs: Array<() => Promise<string | undefined>> = [];
    const rows: Array<{ id: string; node: NodeName; cell: Cell; status: number }> = [];
    const codes = new Map<number, number>();
    let n = 0;
    for (const node of NODE_NAMES) {
      for (const cell of cells(node)) {
        const id = `nodeauthz-${run}-${variant === 'SubjectAccessReviews' ? 'sar' : 'rbac'}-${n++}`;
        jobs.push(async () => {
          let a: Answer = { status: 0, body: '' };
          let b: Answer = { status: 0, body: '' };
          // The node lifecycle controller changes node-a and node-b (no kubelet posts their status):
          // a watch that differs by such an event is asked again.
          const mismatch = await persistentDifference(async () => {
            // A write is asked of the apiserver first: both must refuse it, neither may apply it.
            a = await ask(env.server, node, cell.path, cell.kind);
            b = await ask(target.url.origin, node, cell.path, cell.kind, id);
            if (a.status !== b.status || a.body !== b.body) {
              return `${node}, ${cell.what}: apiserver ${a.status} ${a.body.slice(0, 300)} / levee ${b.status} ${b.body.slice(0, 300)}`;
            }
            return undefined;
          });
          codes.set(a.status, (codes.get(a.status) ?? 0) + 1);
          rows.push({ id, node, cell, status: b.status });
          return mismatch;
        });
      }
    }
    const mismatches: string[] = [];
    const workers = Array.from({ length: 8 }, async () => {
      for (let job = jobs.shift(); job; job = jobs.shift()) {
        const m = await job();
        if (m) mismatches.push(m);
      }
    });
    await Promise.all(workers);
    console.log(`${rows.length} cells, ${mismatches.length} mismatches; apiserver codes: ${[...codes].map(([c, k]) => `${c}×${k}`).join(' ')}`);
    assert.deepEqual(mismatches, []);
    assert.ok((codes.get(200) ?? 0) >= 30 && (codes.get(403) ?? 0) >= 30, JSON.stringify([...codes]));

    // Which answers Levee gave itself: every cell of a cached resource, allowed or refused, was
    // decided by Levee (its SubjectAccessReview or local RBAC), not by the apiserver.
    const seen = await sources(target, rows.map((r) => r.id));
    const wrong: string[] = [];
    const table: string[] = [];
    for (const r of rows.sort((p, q) => p.id.localeCompare(q.id, 'en', { numeric: true }))) {
      const source = seen.get(r.id) ?? '(not logged)';
      if (r.node === 'node-a') table.push(`  ${String(r.status).padEnd(4)} ${source.padEnd(9)} ${r.cell.what}`);
      if (r.cell.source !== 'either' && source !== r.cell.source) wrong.push(`${r.node}, ${r.cell.what}: ${source}, expected ${r.cell.source}`);
    }
    console.log(`node-a through Levee (${variant}): code, source, request\n${table.join('\n')}`);
    assert.deepEqual(wrong, []);
  });
}

test('a node\'s watch of its own pods stays open through re-authorization, which carries its selector', async () => {
  const kc = writeKubeconfig(env.server, env.caFile, leveeToken);
  const quick = await startLevee({
    kubeconfig: kc,
    tls: env.leveeServing,
    extra: ['--cache', 'pods', '--client-ca-file', env.caFile, '--watch-reauthorize-interval', '1s', '--authorization-cache-allowed-ttl', '200ms'],
  });
  try {
    await waitReady(quick);
    const reviews = async (): Promise<number> => {
      const text = await (await request(`${quick.url.origin}/metrics`, { dispatcher: admin })).body.text();
      return Number(/^levee_subject_access_reviews_total (\d+)/m.exec(text)?.[1] ?? 'NaN');
    };
    const before = await reviews();
    const path = `/api/v1/namespaces/${ns}/pods?watch=true&resourceVersion=0&timeoutSeconds=6&fieldSelector=${sel('spec.nodeName=node-a')}`;
    const watched = await ask(quick.url.origin, 'node-a', path, 'watch', `nodeauthz-${run}-recheck`);
    const after = await reviews();
    // The watch ran its whole course: no ERROR event ended it, and it was re-authorized meanwhile.
    assert.equal(watched.status, 200, watched.body);
    assert.equal(watched.body, 'ADDED pod-a,ADDED pod-a2');
    assert.equal((await sources(quick, [`nodeauthz-${run}-recheck`])).get(`nodeauthz-${run}-recheck`), 'cache');
    assert.ok(after - before >= 3, `only ${after - before} reviews: the watch was not re-authorized`);
  } finally {
    await quick.stop();
  }
});

test('no credential reaches Levee\'s logs, which name the nodes only as users', () => {
  for (const l of [levee, localRbacLevee]) {
    const out = l.output();
    assert.match(out, /"user":"system:node:node-a"/);
    assert.ok(!out.includes(leveeToken), 'Levee\'s token was logged');
    assert.ok(!/BEGIN [A-Z ]*(PRIVATE KEY|CERTIFICATE)/.test(out), 'key or certificate material was logged');
  }
});
