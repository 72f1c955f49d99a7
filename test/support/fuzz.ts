// Property-based differential fuzzing: requests generated with fast-check (paths, query strings,
// selectors, resourceVersions, limits, continue tokens, watch parameters, headers, identities and
// bodies) go to the real apiserver directly and through Levee, and the two answers must be the same
// (test/support/differential.ts says what "the same" leaves out, and why). Used by
// test/integration/fuzz.test.ts (a small budget, in CI) and bench/fuzz.ts (a larger one).
//
// The comparison is exact because the state compared does not move: the fuzz reads a fixture of
// objects created before the first case, in namespaces nothing else writes to, and writes only with
// dryRun=All. Collections the rest of the cluster writes to (cluster-wide lists, watches) are
// compared on the fixture's objects alone. Levee is started before the fixture is created, so its
// event window and snapshots hold the fixture's history: watches and Exact reads from those
// resourceVersions are the cache's to answer, not forwarded.
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { Agent, request, type Dispatcher } from 'undici';
import type { TestEnv } from '../env/testenv.ts';
import { createNamespace, createNodes, deleteNodes, NO_SCHEDULER } from './cluster.ts';
import { exchange, firstDifference, observe, type Exchange, type Mine, type Observed } from './differential.ts';
import { get, send, suffix } from './http.ts';
import { startLevee, type LeveeProcess } from './levee.ts';
import { waitFor, waitReady } from './wait.ts';

// ---- the fixture

export type ResourceKey = 'configmaps' | 'pods' | 'secrets' | 'namespaces' | 'widgets';

interface Resource {
  key: ResourceKey;
  group: string;
  version: string;
  resource: string;
  namespaced: boolean;
}

export type Who = 'admin' | 'alice' | 'bob' | 'unknown-token' | 'anonymous' | 'cert:alice' | 'cert:node-a';

export interface Fixture {
  env: TestEnv;
  run: string;
  /** alice reads everything of the fixture in the first, only configmap cm-1 in the second. */
  namespaces: [string, string];
  /** The custom resource's group: widgets.GROUP, versions v1 (cached) and v1beta1. */
  group: string;
  resources: Record<ResourceKey, Resource>;
  /** Object names per resource (the same in both namespaces). */
  names: Record<ResourceKey, string[]>;
  /** The node the fixture's pods are bound to, besides node-a (a kubelet's identity). */
  node: string;
  /** resourceVersions: before the fixture, of each creation, after it. */
  rvs: { before: string; created: string[]; after: string };
  /** Continue tokens from real answers of both sides. */
  tokens: string[];
  levee: LeveeProcess;
  createdNodes: string[];
  agents: Map<string, Agent>;
}

const CRDS = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';

export function dispatcherFor(f: Fixture, who: Who, protocol: 'HTTP/1.1' | 'HTTP/2'): Agent {
  const cert = who.startsWith('cert:') ? who.slice(5) : '';
  const key = `${cert}/${protocol}`;
  let a = f.agents.get(key);
  if (!a) {
    const pair = cert ? f.env.clientCerts[cert as 'alice' | 'node-a'] : undefined;
    a = new Agent({
      connect: { ca: readFileSync(f.env.caFile), ...(pair ? { cert: readFileSync(pair.cert), key: readFileSync(pair.key) } : {}) },
      allowH2: protocol === 'HTTP/2',
    });
    f.agents.set(key, a);
  }
  return a;
}

function rvOf(body: string): string {
  return (JSON.parse(body) as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
}

/**
 * Creates the fixture and a Levee in front of the apiserver (admin's kubeconfig, client
 * certificates verified against the cluster's CA, caching pods, configmaps, namespaces and the
 * fixture's custom resource; secrets are not cached and always forwarded).
 */
export async function setUp(env: TestEnv): Promise<Fixture> {
  const run = suffix();
  const admin = new Agent({ connect: { ca: readFileSync(env.caFile) } });
  const namespaces: [string, string] = [`fuzz-a-${run}`, `fuzz-b-${run}`];
  const group = `fuzz-${run}.example.com`;
  const node = `fuzz-${run}-node`;
  const post = async (path: string, body: unknown): Promise<string> => {
    for (let i = 0; ; i++) {
      const res = await send('POST', env.server + path, admin, env.tokens.admin, body);
      if (res.status === 201) return res.body;
      // A CRD just established may need a moment before its objects can be created.
      if (i > 50) throw new Error(`${path}: ${res.status} ${res.body}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  for (const ns of namespaces) await createNamespace(env, admin, ns, { fuzz: run });
  const createdNodes = await createNodes(env, admin, ['node-a', node]);

  const crdName = `widgets.${group}`;
  const schema = { openAPIV3Schema: { type: 'object', properties: { spec: { type: 'object', properties: { color: { type: 'string' }, size: { type: 'integer' }, shape: { type: 'string' } } } } } };
  const betaSchema = { openAPIV3Schema: { type: 'object', properties: { spec: { type: 'object', properties: { color: { type: 'string' }, size: { type: 'integer' }, shape: { type: 'string' }, old: { type: 'string' } } } } } };
  await post(CRDS, {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: crdName },
    spec: {
      group,
      scope: 'Namespaced',
      names: { plural: 'widgets', singular: 'widget', kind: 'Widget', listKind: 'WidgetList' },
      versions: [
        { name: 'v1', served: true, storage: true, schema, selectableFields: [{ jsonPath: '.spec.color' }, { jsonPath: '.spec.size' }] },
        // Versions with the same schema would have it hoisted to the CRD's top level, where the
        // apiserver refuses per-version selectableFields: v1beta1 has one field more.
        { name: 'v1beta1', served: true, storage: false, schema: betaSchema },
      ],
    },
  });
  await waitFor(`${crdName} established`, async () => {
    const r = JSON.parse((await get(`${env.server}${CRDS}/${crdName}`, admin, env.tokens.admin)).body) as { status?: { conditions?: Array<{ type: string; status: string }> } };
    return r.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') ?? false;
  });

  // alice: everything of the fixture in the first namespace, configmap cm-1 in the second, and the
  // namespaces; bob: nothing; node-a: what the Node authorizer gives a kubelet.
  const rbac = '/apis/rbac.authorization.k8s.io/v1';
  const [a, b] = namespaces;
  await post(`${rbac}/namespaces/${a}/roles`, { metadata: { name: 'reader' }, rules: [{ apiGroups: ['', group], resources: ['configmaps', 'pods', 'secrets', 'widgets'], verbs: ['get', 'list', 'watch'] }] });
  await post(`${rbac}/namespaces/${a}/rolebindings`, { metadata: { name: 'alice' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'reader' }, subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'alice' }] });
  await post(`${rbac}/namespaces/${b}/roles`, { metadata: { name: 'one' }, rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'watch'], resourceNames: ['cm-1'] }] });
  await post(`${rbac}/namespaces/${b}/rolebindings`, { metadata: { name: 'alice' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'one' }, subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'alice' }] });
  await post(`${rbac}/clusterroles`, { metadata: { name: `fuzz-${run}-namespaces` }, rules: [{ apiGroups: [''], resources: ['namespaces'], verbs: ['get', 'list', 'watch'] }] });
  await post(`${rbac}/clusterrolebindings`, { metadata: { name: `fuzz-${run}-namespaces` }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: `fuzz-${run}-namespaces` }, subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'alice' }] });

  const levee = await startLevee({
    kubeconfig: env.kubeconfig,
    tls: env.leveeServing,
    // As the apiserver of the test environment: anonymous requests are system:anonymous's.
    extra: ['--cache', `pods,configmaps,namespaces,widgets.${group}`, '--client-ca-file', env.caFile, '--anonymous-auth'],
  });
  await waitReady(levee, admin);
  // The custom resource is cached once Levee has seen its CRD.
  await waitFor('widgets cached', async () => (await get(`${levee.url.origin}/debug/levee/cache/widgets.${group}`, admin, env.tokens.admin)).status === 200);
  await waitFor('RBAC in force', async () => (await get(`${env.server}/api/v1/namespaces/${a}/configmaps`, admin, env.tokens.alice)).status === 200);

  const before = rvOf((await get(`${env.server}/api/v1/namespaces/${a}/configmaps?limit=1`, admin, env.tokens.admin)).body);
  const names: Record<ResourceKey, string[]> = {
    configmaps: Array.from({ length: 8 }, (_, i) => `cm-${i}`),
    pods: Array.from({ length: 5 }, (_, i) => `pod-${i}`),
    secrets: ['s-0', 's-1'],
    widgets: Array.from({ length: 4 }, (_, i) => `w-${i}`),
    namespaces,
  };
  const created: string[] = [];
  const apps = ['a', 'b', 'c'];
  for (const ns of namespaces) {
    for (const [i, name] of names.configmaps.entries()) {
      const labels: Record<string, string> = { fuzz: run, app: apps[i % 3]!, num: String(i) };
      if (i % 2 === 0) labels.tier = i % 4 === 0 ? 'front' : 'back';
      created.push(rvOf(await post(`/api/v1/namespaces/${ns}/configmaps`, { metadata: { name, labels }, data: { i: String(i) } })));
    }
    for (const [i, name] of names.pods.entries()) {
      // Unscheduled unless bound here: no scheduler runs under NO_SCHEDULER's name.
      const spec: Record<string, unknown> = { schedulerName: NO_SCHEDULER, containers: [{ name: 'c', image: 'registry.example/app:1' }] };
      if (i > 0) spec.nodeName = i % 2 === 0 ? 'node-a' : node;
      if (i === 4) spec.restartPolicy = 'Never';
      created.push(rvOf(await post(`/api/v1/namespaces/${ns}/pods`, { metadata: { name, labels: { fuzz: run, app: apps[i % 3]! } }, spec })));
    }
    for (const name of names.secrets) created.push(rvOf(await post(`/api/v1/namespaces/${ns}/secrets`, { metadata: { name, labels: { fuzz: run } }, stringData: { k: name } })));
    for (const [i, name] of names.widgets.entries()) {
      const body = { apiVersion: `${group}/v1`, kind: 'Widget', metadata: { name, labels: { fuzz: run, app: apps[i % 3]! } }, spec: { color: i % 2 ? 'red' : 'blue', size: i * 10, shape: 'round' } };
      created.push(rvOf(await post(`/apis/${group}/v1/namespaces/${ns}/widgets`, body)));
    }
  }
  const last = created.at(-1)!;
  const after = rvOf((await get(`${env.server}/api/v1/namespaces/${a}/configmaps?limit=1`, admin, env.tokens.admin)).body);
  // Levee has every object of the fixture before the first case.
  for (const path of [`/api/v1/namespaces/${b}/configmaps`, `/api/v1/namespaces/${b}/pods`, `/apis/${group}/v1/namespaces/${b}/widgets`]) {
    await waitFor(`Levee at ${last} for ${path}`, async () => (await get(`${levee.url.origin}${path}?resourceVersion=${last}&resourceVersionMatch=NotOlderThan`, admin, env.tokens.admin)).status === 200);
  }

  const resources: Record<ResourceKey, Resource> = {
    configmaps: { key: 'configmaps', group: '', version: 'v1', resource: 'configmaps', namespaced: true },
    pods: { key: 'pods', group: '', version: 'v1', resource: 'pods', namespaced: true },
    secrets: { key: 'secrets', group: '', version: 'v1', resource: 'secrets', namespaced: true },
    namespaces: { key: 'namespaces', group: '', version: 'v1', resource: 'namespaces', namespaced: false },
    widgets: { key: 'widgets', group, version: 'v1', resource: 'widgets', namespaced: true },
  };

  // Continue tokens as both sides issue them, from the first pages of the fixture's lists.
  const tokens = new Set<string>();
  for (const origin of [env.server, levee.url.origin]) {
    for (const path of [`/api/v1/namespaces/${a}/configmaps`, `/api/v1/namespaces/${b}/pods`, `/apis/${group}/v1/namespaces/${a}/widgets`, `/api/v1/configmaps`, `/api/v1/namespaces`]) {
      for (const q of ['limit=1', 'limit=3', `limit=2&resourceVersion=${created[3]!}`, 'limit=2&resourceVersion=0', `limit=1&labelSelector=fuzz%3D${run}`]) {
        const r = await get(`${origin}${path}?${q}`, admin, env.tokens.admin);
        const token = (JSON.parse(r.body) as { metadata?: { continue?: string } }).metadata?.continue;
        if (r.status === 200 && token) tokens.add(token);
      }
    }
  }
  await admin.close();
  return { env, run, namespaces, group, resources, names, node, rvs: { before, created, after }, tokens: [...tokens], levee, createdNodes, agents: new Map() };
}

export async function tearDown(f: Fixture | undefined, env: TestEnv): Promise<void> {
  if (!f) return;
  await f.levee.stop();
  const admin = new Agent({ connect: { ca: readFileSync(env.caFile) } });
  try {
    await send('DELETE', `${env.server}${CRDS}/widgets.${f.group}`, admin, env.tokens.admin);
    await send('DELETE', `${env.server}/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/fuzz-${f.run}-namespaces`, admin, env.tokens.admin);
    await send('DELETE', `${env.server}/apis/rbac.authorization.k8s.io/v1/clusterroles/fuzz-${f.run}-namespaces`, admin, env.tokens.admin);
    await deleteNodes(env, admin, f.createdNodes);
  } finally {
    await admin.close();
    await Promise.all([...f.agents.values()].map((a) => a.close()));
  }
}

// ---- cases

export type CaseKind = 'list' | 'get' | 'watch' | 'continue' | 'write' | 'chaos' | 'nonresource';

export interface Case {
  kind: CaseKind;
  protocol: 'HTTP/1.1' | 'HTTP/2';
  who: Who;
  method: string;
  path: string;
  /** Query pairs, percent-encoded when sent; a value of null is a key without `=`. */
  query: Array<[string, string | null]>;
  /** Appended to the query as it is: what a parser may choke on (bad escapes, semicolons). */
  rawQuery: string;
  headers: Record<string, string>;
  body?: string | undefined;
  /** Follow continue tokens to the end on both sides. */
  follow: boolean;
}

const pick = <T>(...xs: T[]): fc.Arbitrary<T> => fc.constantFrom(...xs);
/** One time in `oneIn` a value, otherwise undefined. */
const maybe = <T>(a: fc.Arbitrary<T>, oneIn = 2): fc.Arbitrary<T | undefined> =>
  oneIn <= 1 ? a : fc.oneof({ weight: oneIn - 1, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: a });
const w = <T>(weight: number, arbitrary: fc.Arbitrary<T>) => ({ weight, arbitrary });

/** The arbitrary of every case, for this fixture. */
export function cases(f: Fixture): fc.Arbitrary<Case> {
  const [nsA, nsB] = f.namespaces;
  const { run, group } = f;
  const futureRV = String(Number(f.rvs.after) + 1_000_000_000);

  // resourceVersions: valid ones (the fixture's history), huge, negative, garbage and future.
  const rv = fc.oneof(
    w(6, pick('0')),
    w(8, pick(...f.rvs.created, f.rvs.before, f.rvs.after)),
    w(4, pick('abc', '', '-1', '1.5', ' 1', '+1', '0x10', '01', '00', '1e3', '９')),
    w(2, pick('1', '2')),
    w(2, pick('9223372036854775807', '18446744073709551616', '99999999999999999999')),
    // Ahead of everything: the apiserver waits 3 s for its cache, then answers 504.
    w(1, pick(futureRV)),
  );
  const match = pick('NotOlderThan', 'Exact', 'exact', 'Garbage', '');
  const limit = fc.oneof(w(6, pick('1', '2', '3', '5', '100')), w(3, pick('0', '-1', 'abc', '', '+2', '1.5', '007', ' 2', '99999999999999999999', '9223372036854775807')));
  // watch and the other booleans are read by apimachinery's string-to-bool conversion.
  const bool = pick('true', '1', 'false', '0', 'f', 'F', 'FALSE', 't', 'True', 'yes', 'no', '', 'x');
  const timeoutSeconds = fc.oneof(w(8, pick('1')), w(2, pick('2')), w(2, pick('0', '-1', 'abc', '', '99999', '1.5', '+1', '3600')));
  // `timeout` is a Go duration. Positive ones under a second are left out: the apiserver itself
  // answers them or not depending on how fast it is (a 504 with an empty body or its answer).
  const timeout = pick('1s', '30s', '5m', '1h', '0', '0s', '-1s', '1', 'abc', '', '1.5s', '+1s', '.5m', '1e3s', '9999999999h', '1h1m1s', '1µs');
  const pretty = pick('true', 'false', '1', '0', '', 'garbage', 'f');

  // Label selectors, from apimachinery's grammar and around it.
  const labelKey = fc.oneof(w(8, pick('app', 'tier', 'num', 'fuzz')), w(3, pick('missing', 'example.com/role', 'a/b/c', 'App', '-x', 'k'.repeat(64), 'app ', '', 'ü')));
  const labelValue = fc.oneof(w(8, pick('a', 'b', 'c', 'front', 'back', '1', '3', '10', run)), w(3, pick('', 'x y', 'v'.repeat(64), 'é', 'a,b', '-a', 'a_b.c')));
  const valueSet = fc.tuple(fc.array(labelValue, { maxLength: 3 }), pick(',', ', ', ' ,')).map(([vs, sep]) => `(${vs.join(sep)})`);
  const term = fc.oneof(
    w(6, fc.tuple(labelKey, pick('=', '==', '!='), labelValue).map(([k, op, v]) => `${k}${op}${v}`)),
    w(3, fc.tuple(labelKey, pick(' in ', ' notin ', ' in', 'in '), valueSet).map(([k, op, s]) => `${k}${op}${s}`)),
    w(2, labelKey),
    w(2, labelKey.map((k) => `!${k}`)),
    w(2, fc.tuple(labelKey, pick('>', '<', ' > '), pick('0', '2', '5', 'x', '-1', '1.5', '')).map(([k, op, v]) => `${k}${op}${v}`)),
    w(1, pick('=a', '!', '(a)', ',', 'app=a=b', 'app in (a', 'app=~a', '!!app', 'app!', 'app in (a))')),
  );
  const labelSelector = fc.tuple(fc.array(term, { minLength: 1, maxLength: 3 }), pick(',', ', ', ' , ')).map(([ts, sep]) => ts.join(sep));

  // Field selectors, per resource.
  const fieldsOf: Record<ResourceKey, string[]> = {
    pods: ['spec.nodeName', 'status.phase', 'metadata.name', 'metadata.namespace', 'spec.restartPolicy', 'spec.schedulerName', 'spec.serviceAccountName', 'spec.hostNetwork', 'status.podIP', 'status.nominatedNodeName', 'spec.host'],
    configmaps: ['metadata.name', 'metadata.namespace'],
    secrets: ['metadata.name', 'metadata.namespace', 'type'],
    namespaces: ['metadata.name', 'status.phase'],
    widgets: ['metadata.name', 'metadata.namespace', 'spec.color', 'spec.size'],
  };
  const fieldValue = fc.oneof(
    w(8, pick('node-a', f.node, 'Pending', 'Running', 'cm-1', 'pod-2', 'w-1', nsA, nsB, 'Never', 'Always', NO_SCHEDULER, 'default', 'true', 'false', 'red', 'blue', '10', '20', 'Active', 'Opaque')),
    w(2, pick('', 'x\\,y', 'a=b', '\\', 'é', 'a b', '010', '1e1')),
  );
  const fieldSelector = (r: ResourceKey) => {
    const key = fc.oneof(w(8, pick(...fieldsOf[r])), w(2, pick('bogus.field', 'metadata.labels', 'spec.shape', 'Metadata.name', '', 'metadata.name ')));
    const t = fc.oneof(
      w(8, fc.tuple(key, pick('=', '==', '!='), fieldValue).map(([k, op, v]) => `${k}${op}${v}`)),
      w(1, pick('metadata.name', '=x', 'a==b==c', 'metadata.name=a\\', 'metadata.name in (a)', '!metadata.name')),
    );
    return fc.array(t, { minLength: 1, maxLength: 2 }).map((ts) => ts.join(','));
  };

  // Continue tokens: real ones, tampered ones, forged ones and garbage.
  const real = f.tokens.length > 0 ? pick(...f.tokens) : fc.constant('');
  const forge = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const decoded = (t: string): Record<string, unknown> => {
    try {
      return JSON.parse(Buffer.from(t, 'base64url').toString('utf8')) as Record<string, unknown>;
    } catch {
      return {};
    }
  };
  const startKey = pick('/cm-3\u0000', '/cm-3', 'cm-3\u0000', `/${nsA}/cm-3\u0000`, '/', '', '/a/../b', '/../x', '//cm-1', '/zzz', '/pod-1\u0000', '/w-1\u0000', `/${nsB}\u0000`);
  const continueToken = fc.oneof(
    w(6, real),
    w(2, fc.tuple(real, fc.nat(200), pick('=', '==', 'A', '.', '+', '/')).map(([t, i, c]) => t.slice(0, i % Math.max(1, t.length)) + c + t.slice(i % Math.max(1, t.length)))),
    w(1, real.map((t) => `${t}=`)),
    w(1, real.map((t) => t.replace(/-/g, '+').replace(/_/g, '/'))),
    w(3, fc.tuple(real, pick<number | string>(0, -1, 1, 1.5, '5', 2 ** 53, Number(f.rvs.created[0]), Number(f.rvs.after), Number(futureRV))).map(([t, r]) => forge({ ...decoded(t), rv: r }))),
    w(3, fc.tuple(real, startKey).map(([t, s]) => forge({ ...decoded(t), start: s }))),
    w(2, fc.tuple(pick(...f.rvs.created, f.rvs.after), startKey, pick('meta.k8s.io/v1', 'meta.k8s.io/v2', '')).map(([r, s, v]) => forge({ v, rv: Number(r), start: s }))),
    w(1, fc.tuple(real).map(([t]) => forge({ V: 'meta.k8s.io/v1', RV: decoded(t).rv, Start: decoded(t).start }))),
    w(1, pick('garbage', '', 'e30', '!!!', 'eyJ2IjoibWV0YS5rOHMuaW8vdjEi', 'x'.repeat(300))),
  );

  const resourceKey = fc.oneof(w(5, pick<ResourceKey>('configmaps')), w(4, pick<ResourceKey>('pods')), w(2, pick<ResourceKey>('widgets')), w(1, pick<ResourceKey>('secrets')), w(1, pick<ResourceKey>('namespaces')));
  const prefixOf = (r: Resource, version?: string): string => (r.group === '' ? `/api/${version ?? r.version}` : `/apis/${r.group}/${version ?? r.version}`);
  const version = (r: Resource) => fc.oneof(w(12, fc.constant(r.version)), w(1, pick(r.group === '' ? 'v2' : 'v1beta1', 'v1beta1', 'V1')));
  const namespace = fc.oneof(w(8, pick(nsA, nsB)), w(3, fc.constant('')), w(1, pick('default', 'kube-system', `absent-${run}`, 'UPPER', 'a..b')));
  const name = (r: ResourceKey) => fc.oneof(w(8, pick(...f.names[r])), w(2, pick('absent', 'UPPER', 'a..b', 'x'.repeat(260), '%2e%2e', 'cm-1%2Fx', '.', 'cm-1.')));

  const identity = fc.oneof(
    w(14, pick<Who>('admin')),
    w(5, pick<Who>('alice')),
    w(2, pick<Who>('bob')),
    w(1, pick<Who>('unknown-token', 'anonymous')),
    w(2, pick<Who>('cert:alice', 'cert:node-a')),
  );
  const accept = fc.oneof(
    w(20, fc.constant<string | undefined>(undefined)),
    w(20, pick('application/json')),
    w(8, pick(
      'application/json, */*',
      '*/*',
      'application/yaml',
      'application/vnd.kubernetes.protobuf',
      'application/vnd.kubernetes.protobuf, application/json',
      'application/vnd.kubernetes.protobuf;stream=watch',
      'application/json;as=Table;v=v1;g=meta.k8s.io',
      'application/json;as=Table;v=v1;g=meta.k8s.io, application/json',
      'application/json;as=Table;v=v1beta1;g=meta.k8s.io',
      'application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io',
      'application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io',
      'application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io, application/json',
      'application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io',
      'application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;v=v1;g=meta.k8s.io',
      'application/json;as=Table;v=v2;g=meta.k8s.io',
      'application/json;as=Foo;v=v1;g=meta.k8s.io',
      'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList',
    )),
    w(3, pick('text/plain', 'text/html', 'application/*', 'application/json;q=0', 'application/json;stream=watch', 'application/cbor', 'application/json;pretty=1', 'application/json; charset=utf-8', 'APPLICATION/JSON', ';;', 'application', '', ' application/json ', 'application/yaml;q=0.9, application/json;q=0.8', 'application/json;q=0.1, application/vnd.kubernetes.protobuf;q=0.9')),
    w(2, fc.array(fc.tuple(pick('application/json', 'application/yaml', 'application/vnd.kubernetes.protobuf', '*/*', 'text/html', 'application/json;as=Table;v=v1;g=meta.k8s.io'), pick('', ';q=0.5', ';q=1', ';q=0', ';q=x')), { minLength: 1, maxLength: 3 }).map((cs) => cs.map(([m, q]) => m + q).join(', '))),
  );
  const userAgent = fc.oneof(w(10, fc.constant<string | undefined>(undefined)), w(3, pick('kubectl/v1.37.1 (linux/amd64) kubernetes/abcdef', 'levee-fuzz/1', 'curl/8.5.0', 'Wget/1.21', 'Mozilla/5.0 (X11; Linux x86_64)', 'mozilla/5.0', '')));
  const acceptEncoding = fc.oneof(w(10, fc.constant<string | undefined>(undefined)), w(2, pick('gzip', 'gzip, deflate, br', 'identity', 'br', '*', 'gzip;q=0')));
  const impersonation = fc.oneof(
    w(24, fc.constant<Record<string, string>>({})),
    w(2, pick<Record<string, string>>({ 'impersonate-user': 'alice' }, { 'impersonate-user': 'bob' }, { 'impersonate-user': `system:serviceaccount:${nsA}:default` }, { 'impersonate-user': 'alice', 'impersonate-group': 'system:masters' }, { 'impersonate-group': 'system:masters' }, { 'impersonate-user': 'alice', 'impersonate-uid': '1234' }, { 'impersonate-user': 'alice', 'impersonate-extra-scopes': 'view' })),
  );
  const headers = fc.record({ accept, userAgent, acceptEncoding, impersonation, auditId: maybe(pick('fuzz-audit-1', ''), 8) }).map((h) => {
    const out: Record<string, string> = {};
    if (h.accept !== undefined) out.accept = h.accept;
    if (h.userAgent !== undefined) out['user-agent'] = h.userAgent;
    if (h.acceptEncoding !== undefined) out['accept-encoding'] = h.acceptEncoding;
    if (h.auditId !== undefined) out['audit-id'] = h.auditId;
    return { ...out, ...h.impersonation };
  });
  const protocol = fc.oneof(w(4, pick<'HTTP/1.1'>('HTTP/1.1')), w(1, pick<'HTTP/2'>('HTTP/2')));
  const unknownParam = fc.tuple(pick('foo', 'LabelSelector', 'includeObject', 'fieldManager', 'dryRun', 'sendInitialEvents', 'shardSelector', 'resourceversion', ''), pick('x', 'Object', 'None', 'Metadata', 'All', 'true', ''));
  const rawQuery = fc.oneof(w(20, fc.constant('')), w(1, pick('&', '&&', 'x=%zz', '%zz=1', 'watch=1;x=y', 'limit=1;', 'resourceVersion=%', 'labelSelector=app%3Da%3', '=', 'a=b=c', '&resourceVersion=0', '&watch=%zz', 'labelSelector=%zzapp')));
  const common = { protocol, who: identity, headers, rawQuery };

  /** A read's query: each parameter maybe, in any order, sometimes twice. */
  const readQuery = (r: ResourceKey, watch: boolean) =>
    fc
      .record({
        labelSelector: maybe(fc.oneof(w(3, labelSelector), w(1, pick('', `fuzz=${run}`))), 3),
        fieldSelector: maybe(fieldSelector(r), 4),
        resourceVersion: maybe(rv, 2),
        resourceVersionMatch: maybe(match, 5),
        limit: watch ? fc.constant(undefined) : maybe(limit, 2),
        continue: watch ? fc.constant(undefined) : maybe(continueToken, 8),
        timeoutSeconds: watch ? timeoutSeconds : maybe(timeoutSeconds, 8),
        timeout: maybe(timeout, 10),
        watch: watch ? fc.constant(undefined) : maybe(bool, 12),
        allowWatchBookmarks: maybe(bool, watch ? 2 : 10),
        sendInitialEvents: maybe(bool, watch ? 3 : 15),
        pretty: maybe(pretty, 12),
        unknown: maybe(unknownParam, 12),
        again: maybe(fc.tuple(pick('resourceVersion', 'limit', 'labelSelector', 'watch', 'continue', 'timeoutSeconds'), pick('0', '1', 'abc', '', 'app=b', 'true')), 12),
      })
      .chain((q) => {
        const pairs: Array<[string, string | null]> = [];
        for (const [k, v] of Object.entries(q)) {
          if (v === undefined) continue;
          if (k === 'unknown' || k === 'again') pairs.push(v as [string, string]);
          else pairs.push([k, v as string]);
        }
        return fc.shuffledSubarray(pairs, { minLength: pairs.length, maxLength: pairs.length });
      });

  // Well-formed reads, which the cache answers: valid selectors, a resourceVersion from the
  // fixture's history, plain JSON. Half the reads are these, so the cache is exercised as much as
  // the apiserver's refusals are.
  const cleanTerm = fc.oneof(
    fc.tuple(pick('app', 'tier', 'num', 'fuzz', 'missing'), pick('=', '==', '!='), pick('a', 'b', 'c', 'front', 'back', '1', '3', run)).map(([k, op, v]) => `${k}${op}${v}`),
    fc.tuple(pick('app', 'tier', 'num'), pick(' in ', ' notin '), fc.uniqueArray(pick('a', 'b', 'c', 'front', 'back', '2'), { minLength: 1, maxLength: 3 })).map(([k, op, vs]) => `${k}${op}(${vs.join(',')})`),
    pick('tier', '!tier', 'app', '!missing', 'num>3', 'num<5'),
  );
  const cleanFields: Record<ResourceKey, fc.Arbitrary<string>> = {
    pods: fc.tuple(pick('spec.nodeName', 'status.phase', 'metadata.name', 'spec.restartPolicy', 'spec.schedulerName'), pick('=', '!='), pick('node-a', f.node, '', 'Pending', 'pod-1', 'Never', 'Always', NO_SCHEDULER)).map(([k, op, v]) => `${k}${op}${v}`),
    configmaps: fc.tuple(pick('metadata.name', 'metadata.namespace'), pick('=', '!='), pick('cm-1', 'cm-5', nsA, nsB)).map(([k, op, v]) => `${k}${op}${v}`),
    secrets: fc.tuple(pick('metadata.name', 'type'), pick('=', '!='), pick('s-1', 'Opaque')).map(([k, op, v]) => `${k}${op}${v}`),
    namespaces: fc.tuple(pick('metadata.name', 'status.phase'), pick('=', '!='), pick(nsA, 'Active')).map(([k, op, v]) => `${k}${op}${v}`),
    widgets: fc.tuple(pick('metadata.name', 'spec.color', 'spec.size'), pick('=', '!='), pick('w-1', 'red', 'blue', '10', '20')).map(([k, op, v]) => `${k}${op}${v}`),
  };
  const cleanRV = fc.oneof(w(3, pick('0')), w(4, pick(...f.rvs.created, f.rvs.after)));
  const cleanQuery = (r: ResourceKey, watch: boolean) =>
    fc
      .record({
        labelSelector: maybe(fc.array(cleanTerm, { minLength: 1, maxLength: 2 }).map((ts) => ts.join(',')), 2),
        fieldSelector: maybe(cleanFields[r], 3),
        rv: maybe(cleanRV, 6),
        match: watch ? fc.constant(undefined) : maybe(pick('NotOlderThan', 'Exact'), 3),
        limit: watch ? fc.constant(undefined) : maybe(pick('1', '2', '4', '100'), 2),
        timeoutSeconds: watch ? pick('1', '1', '2') : fc.constant(undefined),
        allowWatchBookmarks: watch ? maybe(pick('true', 'false'), 2) : fc.constant(undefined),
        sendInitialEvents: watch ? maybe(pick('true'), 4) : fc.constant(undefined),
      })
      .map((q) => {
        const pairs: Array<[string, string | null]> = [];
        if (q.labelSelector) pairs.push(['labelSelector', q.labelSelector]);
        if (q.fieldSelector) pairs.push(['fieldSelector', q.fieldSelector]);
        if (q.rv !== undefined) pairs.push(['resourceVersion', q.rv]);
        // Exact needs a resourceVersion other than 0; a watch-list start needs NotOlderThan.
        if (q.match && q.rv !== undefined && !(q.match === 'Exact' && q.rv === '0')) pairs.push(['resourceVersionMatch', q.match]);
        if (q.sendInitialEvents) pairs.push(['sendInitialEvents', 'true'], ['resourceVersionMatch', 'NotOlderThan']);
        if (q.limit) pairs.push(['limit', q.limit]);
        if (q.timeoutSeconds) pairs.push(['timeoutSeconds', q.timeoutSeconds]);
        if (q.allowWatchBookmarks) pairs.push(['allowWatchBookmarks', q.allowWatchBookmarks]);
        return pairs;
      });
  const cleanHeaders = fc.record({ accept: pick<string | undefined>(undefined, 'application/json', 'application/json, */*'), gzip: fc.boolean() }).map((h) => {
    const out: Record<string, string> = {};
    if (h.accept) out.accept = h.accept;
    if (h.gzip) out['accept-encoding'] = 'gzip';
    return out;
  });
  const cleanWho = fc.oneof(w(6, pick<Who>('admin')), w(3, pick<Who>('alice')), w(1, pick<Who>('bob', 'cert:alice', 'cert:node-a')));
  /** A read's query and headers: well-formed half the time, anything the rest. */
  const readShape = (key: ResourceKey, watch: boolean) =>
    fc.oneof(
      fc.record({ query: cleanQuery(key, watch), headers: cleanHeaders, who: cleanWho, rawQuery: fc.constant('') }),
      fc.record({ query: readQuery(key, watch), headers, who: identity, rawQuery }),
    );

  const clusterWideGuard = (ns: string, query: Array<[string, string | null]>, guard: boolean): Array<[string, string | null]> => {
    // A cluster-wide read mostly keeps to this run's objects: the shared cluster holds any number
    // of others, and following pages of all of them one by one would take the budget.
    if (ns !== '' || !guard) return query;
    const i = query.findIndex(([k]) => k === 'labelSelector');
    if (i === -1) return [...query, ['labelSelector', `fuzz=${run}`]];
    const copy = [...query];
    copy[i] = ['labelSelector', `${query[i]![1] ?? ''},fuzz=${run}`];
    return copy;
  };

  const collectionPath = (r: Resource, v: string, ns: string, watchPrefix = false): string => {
    const w = watchPrefix ? '/watch' : '';
    if (!r.namespaced) return `${prefixOf(r, v)}${w}/${r.resource}`;
    return ns === '' ? `${prefixOf(r, v)}${w}/${r.resource}` : `${prefixOf(r, v)}${w}/namespaces/${ns}/${r.resource}`;
  };

  const list = resourceKey.chain((key) => {
    const r = f.resources[key];
    return fc.record({ protocol, shape: readShape(key, false), v: version(r), ns: namespace, guard: fc.boolean(), follow: fc.boolean(), slash: fc.oneof(w(15, fc.constant('')), w(1, pick('/', '//'))) }).map(
      (c): Case => {
        const ns = r.namespaced ? c.ns : '';
        return { kind: 'list', protocol: c.protocol, who: c.shape.who, method: 'GET', path: collectionPath(r, c.v, ns) + c.slash, query: clusterWideGuard(ns, c.shape.query, c.guard || c.ns === ''), rawQuery: c.shape.rawQuery, headers: c.shape.headers, follow: c.follow };
      },
    );
  });

  const getCase = resourceKey.chain((key) => {
    const r = f.resources[key];
    const q = fc.record({ resourceVersion: maybe(rv, 2), pretty: maybe(pretty, 10), unknown: maybe(unknownParam, 10), again: maybe(fc.tuple(pick('resourceVersion'), rv), 10), timeout: maybe(timeout, 10) }).map((o) => {
      const pairs: Array<[string, string | null]> = [];
      for (const [k, v] of Object.entries(o)) if (v !== undefined) pairs.push(Array.isArray(v) ? v : [k, v]);
      return pairs;
    });
    const shape = fc.oneof(
      fc.record({ query: cleanRV.map((v): Array<[string, string | null]> => [['resourceVersion', v]]), headers: cleanHeaders, who: cleanWho, rawQuery: fc.constant('') }),
      fc.record({ query: q, headers, who: identity, rawQuery }),
    );
    return fc.record({ protocol, shape, v: version(r), ns: fc.oneof(w(10, pick(nsA, nsB)), w(1, pick('', 'default', `absent-${run}`))), n: name(key), sub: fc.oneof(w(12, fc.constant('')), w(1, pick('/status', '/log', '/foo', '/', '/binding', '/ephemeralcontainers'))) }).map(
      (c): Case => {
        const path = r.namespaced ? (c.ns === '' ? `${prefixOf(r, c.v)}/${r.resource}/${c.n}` : `${prefixOf(r, c.v)}/namespaces/${c.ns}/${r.resource}/${c.n}`) : `${prefixOf(r, c.v)}/${r.resource}/${c.n}`;
        return { kind: 'get', protocol: c.protocol, who: c.shape.who, method: 'GET', path: path + c.sub, query: c.shape.query, rawQuery: c.shape.rawQuery, headers: c.shape.headers, follow: false };
      },
    );
  });

  const watchCase = resourceKey.chain((key) => {
    const r = f.resources[key];
    return fc.record({ protocol, shape: readShape(key, true), ns: namespace, legacy: fc.oneof(w(5, fc.constant(false)), w(1, fc.constant(true))), flag: fc.oneof(w(6, pick('true', '1')), w(1, bool)), guard: fc.boolean(), single: maybe(name(key), 8) }).map((c): Case => {
      const ns = r.namespaced ? c.ns : '';
      let path = collectionPath(r, r.version, ns, c.legacy);
      // /watch/namespaces/NS/RESOURCE/NAME: one object, by its name.
      if (c.single !== undefined && c.legacy && (ns !== '' || !r.namespaced)) path += `/${c.single}`;
      const query: Array<[string, string | null]> = c.legacy ? c.shape.query : [['watch', c.flag], ...c.shape.query];
      return { kind: 'watch', protocol: c.protocol, who: c.shape.who, method: 'GET', path, query: clusterWideGuard(ns, query, c.guard || c.ns === ''), rawQuery: c.shape.rawQuery, headers: c.shape.headers, follow: false };
    });
  });

  const continueCase = resourceKey.chain((key) => {
    const r = f.resources[key];
    return fc.record({ ...common, ns: namespace, token: continueToken, limit: maybe(limit, 2), extra: maybe(fc.tuple(pick('resourceVersion', 'resourceVersionMatch', 'labelSelector', 'fieldSelector'), pick('0', f.rvs.after, 'Exact', 'NotOlderThan', 'app=a', 'metadata.name=cm-5', '')), 3), follow: fc.boolean() }).map((c): Case => {
      const ns = r.namespaced ? c.ns : '';
      const query: Array<[string, string | null]> = [['continue', c.token]];
      if (c.limit !== undefined) query.push(['limit', c.limit]);
      if (c.extra) query.push(c.extra);
      return { kind: 'continue', protocol: c.protocol, who: c.who, method: 'GET', path: collectionPath(r, r.version, ns), query: clusterWideGuard(ns, query, true), rawQuery: c.rawQuery, headers: c.headers, follow: c.follow };
    });
  });

  // Writes: always dryRun=All first (the apiserver reads the first value and refuses any other
  // with a 400), so nothing the fuzz reads ever changes.
  const writeKey = pick<ResourceKey>('configmaps', 'secrets', 'widgets');
  const writeCase = writeKey.chain((key) => {
    const r = f.resources[key];
    const kind = key === 'configmaps' ? 'ConfigMap' : key === 'secrets' ? 'Secret' : 'Widget';
    const apiVersion = r.group === '' ? 'v1' : `${r.group}/v1`;
    const object = (n: string) => JSON.stringify({ apiVersion, kind, metadata: { name: n, labels: { fuzz: run } }, ...(key === 'widgets' ? { spec: { color: 'green' } } : { data: {} }) });
    const body = fc.oneof(
      w(4, name(key).map(object)),
      w(1, pick('', '{', 'null', '[]', '{}', '{"kind":"Pod","apiVersion":"v1","metadata":{"name":"x"}}', 'kind: ConfigMap\napiVersion: v1\nmetadata:\n  name: y\n', '{"metadata":{"name":"cm-1"},"data":{"k":1}}', '[{"op":"add","path":"/data/x","value":"y"}]', '{"data":{"x":"y"}}')),
    );
    return fc.record({
      ...common,
      method: pick('POST', 'PUT', 'PATCH', 'DELETE'),
      ns: fc.oneof(w(8, pick(nsA, nsB)), w(1, pick('default', `absent-${run}`))),
      n: name(key),
      body: maybe(body, 1),
      contentType: pick('application/json', 'application/yaml', 'application/merge-patch+json', 'application/strategic-merge-patch+json', 'application/json-patch+json', 'application/apply-patch+yaml', 'text/plain', ''),
      extra: maybe(fc.tuple(pick('fieldManager', 'fieldValidation', 'force', 'dryRun', 'gracePeriodSeconds', 'propagationPolicy'), pick('fuzz', 'Strict', 'Ignore', 'true', 'x', 'All', '-1', 'Foreground')), 2),
    }).map((c): Case => {
      const collection = `${prefixOf(r)}/namespaces/${c.ns}/${r.resource}`;
      const path = c.method === 'POST' ? collection : `${collection}/${c.n}`;
      const query: Array<[string, string | null]> = [['dryRun', 'All']];
      if (c.extra) query.push(c.extra);
      const headers = { ...c.headers, ...(c.contentType ? { 'content-type': c.contentType } : {}) };
      return { kind: 'write', protocol: c.protocol, who: c.who, method: c.method, path, query, rawQuery: '', headers, body: c.body, follow: false };
    });
  });

  // Paths from segments, valid or not, and reads with any query at all.
  const segment = pick('api', 'apis', 'v1', 'v2', 'namespaces', nsA, nsB, 'default', 'configmaps', 'pods', 'secrets', 'widgets', group, 'watch', 'status', 'cm-1', 'pod-1', 'w-1', 'ConfigMaps', '', '.', '..', '%2F', '%2e', 'apps', 'proxy', 'log', 'x');
  const chaos = fc.record({ ...common, segments: fc.array(segment, { minLength: 1, maxLength: 7 }), query: fc.array(fc.tuple(pick('resourceVersion', 'limit', 'watch', 'labelSelector', 'fieldSelector', 'continue', 'timeoutSeconds', 'resourceVersionMatch', 'sendInitialEvents', 'allowWatchBookmarks', 'pretty', 'x'), fc.oneof(rv, limit, bool, labelSelector, continueToken)), { maxLength: 4 }), method: fc.oneof(w(10, pick('GET')), w(1, pick('HEAD', 'OPTIONS'))) }).map(
    (c): Case => ({ kind: 'chaos', protocol: c.protocol, who: c.who, method: c.method, path: `/${c.segments.join('/')}`, query: [['timeoutSeconds', '1'], ...c.query], rawQuery: c.rawQuery, headers: c.headers, follow: false }),
  );

  const nonResource = fc.record({ ...common, path: pick('/api', '/api/v1', '/apis', `/apis/${group}`, `/apis/${group}/v1`, '/version', '/healthz', '/apis/nonexistent.example.com', '/foo', '/', '/api/v1/', '/openapi/v3') }).map(
    (c): Case => ({ kind: 'nonresource', protocol: c.protocol, who: c.who, method: 'GET', path: c.path, query: [], rawQuery: c.rawQuery, headers: c.headers, follow: false }),
  );

  return fc.oneof(w(40, list), w(18, getCase), w(8, watchCase), w(8, continueCase), w(6, writeCase), w(8, chaos), w(3, nonResource));
}

// ---- running a case

const enc = (s: string): string => encodeURIComponent(s);

export function targetOf(c: Case): string {
  const parts = c.query.map(([k, v]) => (v === null ? enc(k) : `${enc(k)}=${enc(v)}`));
  if (c.rawQuery) parts.push(c.rawQuery);
  const q = parts.join('&');
  return q === '' ? c.path : `${c.path}?${q}`;
}

function authHeaders(f: Fixture, who: Who): Record<string, string> {
  switch (who) {
    case 'admin':
    case 'alice':
    case 'bob':
      return { authorization: `Bearer ${f.env.tokens[who]}` };
    case 'unknown-token':
      return { authorization: 'Bearer not-a-token-anyone-knows' };
    default:
      return {};
  }
}

/** Go's url.ParseQuery, as the apiserver reads a query: a pair with a bad escape or a semicolon is dropped. */
export function goQuery(raw: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const pair of raw.split('&')) {
    if (pair === '' || pair.includes(';')) continue;
    const i = pair.indexOf('=');
    const [k, v] = i === -1 ? [pair, ''] : [pair.slice(0, i), pair.slice(i + 1)];
    try {
      const key = decodeURIComponent(k.replace(/\+/g, ' '));
      const value = decodeURIComponent(v.replace(/\+/g, ' '));
      out.set(key, [...(out.get(key) ?? []), value]);
    } catch {
      // dropped, as Go drops it
    }
  }
  return out;
}

/** The same query without continue and the resourceVersion it pins, with this continue token. */
function nextPage(target: string, token: string): string {
  const q = target.indexOf('?');
  const path = q === -1 ? target : target.slice(0, q);
  const pairs = (q === -1 ? '' : target.slice(q + 1)).split('&').filter((p) => {
    if (p === '') return false;
    const k = p.split('=')[0]!;
    let key = k;
    try {
      key = decodeURIComponent(k);
    } catch {
      // kept as it is
    }
    return !['continue', 'resourceVersion', 'resourceVersionMatch'].includes(key);
  });
  pairs.push(`continue=${enc(token)}`);
  return `${path}?${pairs.join('&')}`;
}

const MAX_PAGES = 25;

async function answers(origin: string, dispatcher: Dispatcher, x: Exchange, follow: boolean, mine: Mine, exact: boolean): Promise<Observed[] | string> {
  const pages: Observed[] = [];
  let target = x.target;
  for (let i = 0; i < MAX_PAGES; i++) {
    const raw = await exchange(origin, dispatcher, { ...x, target });
    if ('failed' in raw) return raw.failed;
    const o = observe(raw, mine, exact);
    pages.push(o);
    if (!follow || o.status !== 200 || !o.continueToken) break;
    target = nextPage(x.target, o.continueToken);
  }
  return pages;
}

export interface Outcome {
  /** What differs, or undefined. */
  difference: string | undefined;
  /** The request, as sent. */
  request: string;
}

function isList(v: unknown): v is { items?: unknown[]; rows?: unknown[] } {
  return typeof v === 'object' && v !== null && (Array.isArray((v as { items?: unknown }).items) || Array.isArray((v as { rows?: unknown }).rows));
}

function entries(pages: Observed[]): unknown[] {
  return pages.flatMap((p) => {
    const v = p.value as { items?: unknown[]; rows?: unknown[] };
    return v.items ?? v.rows ?? [];
  });
}

/** Sends the case both ways and compares. */
export async function runCase(f: Fixture, c: Case): Promise<Outcome> {
  const target = targetOf(c);
  const headers = { ...c.headers, ...authHeaders(f, c.who) };
  const request = `${c.method} ${target} as ${c.who} over ${c.protocol} ${JSON.stringify(c.headers)}${c.body !== undefined ? ` body ${JSON.stringify(c.body)}` : ''}`;
  const query = goQuery(target.includes('?') ? target.slice(target.indexOf('?') + 1) : '');
  const first = (k: string): string | undefined => query.get(k)?.[0];
  const ours = new Set<string>(f.namespaces);
  const mine: Mine = (m) => (m.namespace ? ours.has(m.namespace) : m.name !== undefined && ours.has(m.name));
  // A namespaced list in one of the fixture's namespaces holds the fixture's objects alone: its
  // pages are compared as they are. Anything wider is compared on the fixture's objects, whole.
  const inOurNamespace = [...ours].some((ns) => c.path.includes(`/namespaces/${ns}/`));
  const exact = inOurNamespace && c.path.split('/').filter((s) => s !== '').length <= (c.path.startsWith('/apis/') ? 6 : 5);
  // resourceVersion=0 with a limit: the apiserver ignores the limit, Levee pages (README, "Where
  // Levee differs"); the concatenation of Levee's pages is the apiserver's one answer.
  const rv0Limit = first('resourceVersion') === '0' && /^\+?\d+$/.test(first('limit') ?? '') && Number(first('limit')) > 0;
  const follow = c.follow || !exact || rv0Limit;
  // A watch, as the apiserver tells one (a /watch/ path, or a watch parameter that is not false),
  // is read until it ends or for long enough to see its initial state: up to 3 s of proof that
  // Levee's cache is fresh, then timeoutSeconds.
  const watch = /\/watch(\/|$)/.test(c.path) || (query.has('watch') && !['0', 'false'].includes(first('watch')!.toLowerCase()));
  const x: Exchange = { method: c.method, target, headers, body: c.body, deadlineMs: watch ? 6_500 : 9_000 };
  const dispatcher = dispatcherFor(f, c.who, c.protocol);
  const [direct, viaLevee] = await Promise.all([answers(f.env.server, dispatcher, x, follow, mine, exact), answers(f.levee.url.origin, dispatcher, x, follow, mine, exact)]);
  // A client certificate's user asking to impersonate someone it may not: the apiserver (1.37,
  // constrained impersonation) refuses naming the impersonate-on:user-info:VERB check it tried on
  // the request's resource, Levee naming the legacy impersonate check it made for the certificate's
  // user (which the apiserver only sees as Levee's). The same 403 and reason; the message differs
  // (test/integration/security.test.ts records the same).
  const refusalWording = c.who.startsWith('cert:') && Object.keys(c.headers).some((h) => h.startsWith('impersonate-'));
  return { request, difference: compare(direct, viaLevee, { exact: exact && !rv0Limit, write: c.kind === 'write', refusalWording }) };
}

function compare(direct: Observed[] | string, viaLevee: Observed[] | string, how: { exact: boolean; write: boolean; refusalWording: boolean }): string | undefined {
  if (typeof direct === 'string' || typeof viaLevee === 'string') {
    return typeof direct === 'string' && typeof viaLevee === 'string' ? undefined : `apiserver: ${typeof direct === 'string' ? direct : 'answered'}; Levee: ${typeof viaLevee === 'string' ? viaLevee : 'answered'}`;
  }
  const a = direct[0]!;
  const b = viaLevee[0]!;
  if (a.status !== b.status) return `status ${a.status} vs ${b.status}: ${brief(a.value)} vs ${brief(b.value)}`;
  if (a.media !== b.media) return `media type ${a.media} vs ${b.media}`;
  if (a.cutOff !== b.cutOff) return `the answer ${a.cutOff ? 'was still open' : 'ended'} at the apiserver's deadline, ${b.cutOff ? 'still open' : 'ended'} through Levee: ${brief(a.value)} vs ${brief(b.value)}`;
  if (how.write && a.status < 300) return firstDifference(writeView(a.value), writeView(b.value));
  if (how.refusalWording && a.status === 403) return firstDifference(withoutMessage(a.value), withoutMessage(b.value));
  if (isList(a.value) && isList(b.value) && (direct.length > 1 || viaLevee.length > 1 || !how.exact)) {
    // Compared whole: the items of every page, the last page's status.
    const last = (ps: Observed[]) => ps.at(-1)!;
    if (last(direct).status !== last(viaLevee).status) return `a later page: status ${last(direct).status} vs ${last(viaLevee).status}: ${brief(last(direct).value)} vs ${brief(last(viaLevee).value)}`;
    const e = firstDifference(envelope(a.value), envelope(b.value), '$list');
    if (e) return e;
    if (direct.length === MAX_PAGES || viaLevee.length === MAX_PAGES) return undefined;
    const d = firstDifference(entries(direct), entries(viaLevee), '$items');
    if (d) return `${d} (apiserver ${names(entries(direct))}; Levee ${names(entries(viaLevee))})`;
    if (how.exact) {
      if (direct.length !== viaLevee.length) return `${direct.length} pages vs ${viaLevee.length}`;
      for (let i = 0; i < direct.length; i++) {
        const pd = firstDifference(direct[i]!.value, viaLevee[i]!.value, `page ${i}`);
        if (pd) return pd;
      }
    }
    return undefined;
  }
  const d = firstDifference(a.value, b.value);
  if (d) return isList(a.value) ? `${d} (apiserver ${names(entries([a]))}; Levee ${names(entries([b]))})` : d;
  if (a.layout !== undefined && b.layout !== undefined && a.layout !== b.layout) return `the same content laid out differently: ${a.layout.slice(0, 200)} vs ${b.layout.slice(0, 200)}`;
  return undefined;
}

function withoutMessage(v: unknown): unknown {
  const s = (v as { Status?: Record<string, unknown> }).Status;
  return s ? { Status: { ...s, message: undefined, details: undefined } } : v;
}

/** A list without its entries and without what depends on how it was paged. */
function envelope(v: unknown): unknown {
  const rest = { ...(v as Record<string, unknown>) };
  const meta = { ...(rest.metadata as Record<string, unknown> | undefined) };
  delete rest.items;
  delete rest.rows;
  delete meta.continue;
  delete meta.remainingItemCount;
  return { ...rest, metadata: meta };
}

/**
 * A write's answer: dry-run objects get a new uid, creationTimestamp and managedFields time per
 * request, so two dry runs of the same write never agree on those; the rest is compared.
 */
function writeView(v: unknown): unknown {
  if (typeof v !== 'object' || v === null) return v;
  const o = v as Record<string, unknown>;
  const meta = { ...(o.metadata as Record<string, unknown> | undefined) };
  delete meta.uid;
  delete meta.creationTimestamp;
  delete meta.managedFields;
  if (typeof meta.resourceVersion === 'string') meta.resourceVersion = '#';
  return { ...o, metadata: meta };
}

function names(items: unknown[]): string {
  return `[${items
    .map((i) => {
      const m = (i as { metadata?: { namespace?: string; name?: string } }).metadata ?? (i as { object?: { metadata?: { name?: string } } }).object?.metadata;
      return m ? `${(m as { namespace?: string }).namespace ? `${(m as { namespace?: string }).namespace}/` : ''}${m.name}` : '?';
    })
    .join(' ')}]`;
}

function brief(v: unknown): string {
  const s = JSON.stringify(v) ?? '';
  return s.length > 400 ? `${s.slice(0, 400)}…` : s;
}

// ---- Levee stays up

let logOffset = 0;

/** Undefined while Levee's process lives, /readyz answers 200 and its log has no error since the last look. */
export async function leveeHealth(f: Fixture): Promise<string | undefined> {
  try {
    process.kill(f.levee.pid, 0);
  } catch {
    return `Levee exited:\n${f.levee.output().slice(-3000)}`;
  }
  const res = await request(`${f.levee.url.origin}/readyz`, { dispatcher: dispatcherFor(f, 'admin', 'HTTP/1.1') });
  const ready = await res.body.text();
  if (res.statusCode !== 200) return `Levee's /readyz answered ${res.statusCode}: ${ready}`;
  const out = f.levee.output();
  const fresh = out.slice(logOffset);
  logOffset = out.length;
  const errors = fresh.split('\n').filter((l) => /"level":(50|60)\b/.test(l) || /uncaught|unhandled/i.test(l));
  return errors.length > 0 ? `Levee logged errors:\n${errors.join('\n').slice(0, 3000)}` : undefined;
}

/** What the cache answered and why the rest went upstream, from Levee's metrics. */
export async function cacheStats(f: Fixture): Promise<{ fromCache: number; forwarded: Record<string, number> }> {
  const metrics = (await get(`${f.levee.url.origin}/metrics`, dispatcherFor(f, 'admin', 'HTTP/1.1'))).body;
  const fromCache = [...metrics.matchAll(/^levee_request_total\{[^}]*source="cache"[^}]*\} (\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
  const forwarded: Record<string, number> = {};
  for (const m of metrics.matchAll(/^levee_read_forwarded_total\{reason="([^"]+)"\} (\d+)/gm)) forwarded[m[1]!] = Number(m[2]);
  return { fromCache, forwarded };
}
