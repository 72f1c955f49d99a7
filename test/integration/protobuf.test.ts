// Protobuf from the cache, compared byte for byte with the real apiserver's: GET, LIST, WATCH and
// watch-list of built-in resources, their PartialObjectMetadata forms, errors, and a client-go
// informer that speaks protobuf. Objects come from the cluster's own controllers and simulated
// nodes (a Deployment's pods, ReplicaSets, EndpointSlices, Nodes, Leases) and from the test.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { BinaryReader } from '@bufbuild/protobuf/wire';
import { request, type Agent } from 'undici';
import { loadEnv, type TestEnv } from '../env/testenv.ts';
import { startLevee, type LeveeProcess } from '../support/levee.ts';
import { agentFor, get, send, suffix } from '../support/http.ts';
import { createNamespace } from '../support/cluster.ts';
import { waitFor } from '../support/wait.ts';
import { leveeCounters, sum } from '../support/counters.ts';

const PROTOBUF = 'application/vnd.kubernetes.protobuf';
const METADATA_LIST = `${PROTOBUF};as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json`;
const METADATA = `${PROTOBUF};as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json`;
const RESOURCES = ['pods', 'nodes', 'namespaces', 'services', 'endpointslices.discovery.k8s.io', 'configmaps', 'secrets', 'deployments.apps', 'replicasets.apps', 'daemonsets.apps', 'leases.coordination.k8s.io', 'events'];

let env: TestEnv;
let agent: Agent;
let levee: LeveeProcess;
const ns = `protobuf-${suffix()}`;

async function fetchBytes(url: string, accept: string): Promise<{ status: number; type: string; body: Buffer }> {
  const r = await request(url, { dispatcher: agent, headers: { authorization: `Bearer ${env.tokens.admin}`, accept } });
  return { status: r.statusCode, type: String(r.headers['content-type']), body: Buffer.from(await r.body.arrayBuffer()) };
}

interface Envelope {
  apiVersion: string;
  kind: string;
  raw: Uint8Array;
}

/** The magic and runtime.Unknown around every protobuf answer. */
function unwrap(b: Uint8Array): Envelope {
  assert.equal(Buffer.from(b.subarray(0, 4)).toString('latin1'), 'k8s\u0000');
  const r = new BinaryReader(b.subarray(4));
  const e: Envelope = { apiVersion: '', kind: '', raw: new Uint8Array() };
  while (r.pos < r.len) {
    const [num] = r.tag();
    const bytes = r.bytes();
    if (num === 1) {
      const t = new BinaryReader(bytes);
      while (t.pos < t.len) {
        const [n] = t.tag();
        if (n === 1) e.apiVersion = t.string();
        else e.kind = t.string();
      }
    } else if (num === 2) e.raw = bytes;
  }
  return e;
}

/** A list's ListMeta resourceVersion. */
function listResourceVersion(raw: Uint8Array): string {
  const r = new BinaryReader(raw);
  const [num] = r.tag();
  assert.equal(num, 1);
  const meta = new BinaryReader(r.bytes());
  while (meta.pos < meta.len) {
    const [n] = meta.tag();
    if (n === 2) return meta.string();
    meta.bytes();
  }
  return '';
}

function pathOf(resource: string, namespace?: string): string {
  const [name, ...group] = resource.split('.');
  const prefix = group.length === 0 ? '/api/v1' : `/apis/${group.join('.')}/v1`;
  return namespace ? `${prefix}/namespaces/${namespace}/${name}` : `${prefix}/${name}`;
}




const { metrics, fromCache, forwardedForMedia } = leveeCounters(() => levee.url.origin, () => agent);

before(async () => {
  env = loadEnv();
  agent = agentFor(env.caFile);
  await createNamespace(env, agent, ns);
  const objects: Array<[string, unknown]> = [
    ['configmaps', { metadata: { name: 'plain', labels: { a: 'b' }, annotations: { 'x/y': 'z<&>' } }, data: { k: 'v', empty: '' } }],
    ['configmaps', { metadata: { name: 'binary' }, binaryData: { b: Buffer.from([0, 1, 2, 255]).toString('base64'), e: '' }, immutable: true }],
    ['configmaps', { metadata: { name: 'unicode', finalizers: ['example.com/x'] }, data: { key: 'значение ✓ 😀 \u2028' } }],
    ['secrets', { metadata: { name: 's' }, type: 'Opaque', data: { password: Buffer.from('hunter2').toString('base64') } }],
    ['services', { metadata: { name: 'web' }, spec: { selector: { app: 'web' }, ports: [{ port: 80, targetPort: 'http', name: 'http' }, { port: 81, targetPort: 8081, name: 'alt' }] } }],
    ['services', { metadata: { name: 'ext' }, spec: { type: 'ExternalName', externalName: 'example.com' } }],
    [
      'deployments.apps',
      {
        metadata: { name: 'web' },
        spec: {
          replicas: 2,
          selector: { matchLabels: { app: 'web' } },
          template: {
            metadata: { labels: { app: 'web' } },
            spec: {
              containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10', ports: [{ name: 'http', containerPort: 8080 }], resources: { requests: { cpu: '100m', memory: '64Mi' }, limits: { cpu: '1.5' } }, readinessProbe: { httpGet: { path: '/', port: 'http' }, periodSeconds: 5 } }],
              // An int64 beyond 2^53: written with every digit.
              terminationGracePeriodSeconds: 'INT64',
              tolerations: [{ key: 'kwok.x-k8s.io/node', operator: 'Exists', effect: 'NoSchedule' }],
            },
          },
        },
      },
    ],
  ];
  // A DaemonSet's controller writes deprecated.daemonset.template.generation, an annotation its
  // internal type keeps as a field: its metadata-only form has not got it.
  objects.push([
    'daemonsets.apps',
    {
      metadata: { name: 'agent' },
      spec: {
        selector: { matchLabels: { app: 'agent' } },
        template: { metadata: { labels: { app: 'agent' } }, spec: { containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10' }], tolerations: [{ operator: 'Exists' }] } },
      },
    },
  ]);
  for (const [resource, body] of objects) {
    const r = await send('POST', `${env.server}${pathOf(resource, ns)}`, agent, env.tokens.admin, JSON.stringify(body).replace('"INT64"', '9007199254740993'));
    assert.equal(r.status, 201, r.body);
  }
  // The Deployment's pods run on simulated nodes: their status, conditions and container states
  // are written by the controllers and KWOK.
  await waitFor('the deployment is available', async () => {
    const d = JSON.parse((await get(`${env.server}${pathOf('deployments.apps', ns)}/web`, agent, env.tokens.admin)).body) as { status?: { availableReplicas?: number } };
    return d.status?.availableReplicas === 2;
  }, 60_000);
  levee = await startLevee({
    kubeconfig: env.kubeconfig,
    tls: env.leveeServing,
    extra: ['--cache', RESOURCES.join(','), '--consistent-reads', 'verify'],
  });
  await waitFor('levee is ready', async () => (await get(`${levee.url.origin}/readyz`, agent)).status === 200, 30_000);
});

after(async () => {
  await levee?.stop();
  await send('DELETE', `${env.server}/api/v1/namespaces/${ns}`, agent, env.tokens.admin);
  await agent?.close();
});

test('the protobuf layout is the one the Go types of this Kubernetes release write', () => {
  const module = path.resolve(import.meta.dirname, '../../testenv');
  const r = spawnSync('go', ['run', '-trimpath', './cmd/protoschema'], { cwd: module, encoding: 'utf8', maxBuffer: 64 << 20 });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, readFileSync(path.resolve(import.meta.dirname, '../../src/represent/protobuf/schema.json'), 'utf8'), 'schema.json is stale: regenerate it with `go run ./cmd/protoschema` in testenv/');
});

test('LISTs in protobuf from the cache equal the apiserver\'s at the same resourceVersion, byte for byte', async () => {
  const cachedBefore = await fromCache();
  const forwardedBefore = await forwardedForMedia();
  let lists = 0;
  for (const resource of RESOURCES) {
    for (const accept of [`${PROTOBUF}, */*`, METADATA_LIST]) {
      for (const namespace of resource === 'nodes' || resource === 'namespaces' ? [undefined] : [undefined, ns]) {
        const p = pathOf(resource, namespace);
        const cached = await fetchBytes(`${levee.url.origin}${p}?resourceVersion=0`, accept);
        assert.equal(cached.status, 200, `${p}: ${cached.body.toString('latin1').slice(0, 300)}`);
        assert.equal(cached.type, PROTOBUF);
        const rv = listResourceVersion(unwrap(cached.body).raw);
        const direct = await fetchBytes(`${env.server}${p}?resourceVersion=${rv}&resourceVersionMatch=Exact`, accept);
        assert.equal(direct.status, 200);
        assert.ok(cached.body.equals(direct.body), `${p} (${accept.split(',')[0]}) at resourceVersion ${rv}: ${cached.body.length} bytes from the cache, ${direct.body.length} from the apiserver`);
        lists++;
      }
    }
  }
  assert.equal((await fromCache()) - cachedBefore, lists, `every LIST was answered from the cache: ${(await metrics()).split('\n').filter((l) => l.startsWith('levee_read_forwarded_total')).join('; ')}`);
  assert.equal((await forwardedForMedia()) - forwardedBefore, 0);
});

test('GETs in protobuf from the cache equal the apiserver\'s, and so does a NotFound', async () => {
  const cachedBefore = await fromCache();
  let gets = 0;
  for (const resource of ['configmaps', 'secrets', 'services', 'deployments.apps', 'replicasets.apps', 'daemonsets.apps', 'pods']) {
    const list = JSON.parse((await get(`${env.server}${pathOf(resource, ns)}`, agent, env.tokens.admin)).body) as { items: Array<{ metadata: { name: string } }> };
    assert.ok(list.items.length > 0, resource);
    for (const { metadata } of list.items) {
      for (const accept of [PROTOBUF, METADATA]) {
        const p = `${pathOf(resource, ns)}/${metadata.name}`;
        // Until both read the same state: the cache follows the apiserver by a few milliseconds.
        let cached: Buffer | undefined;
        let direct: Buffer | undefined;
        for (let i = 0; i < 50 && !(cached && direct?.equals(cached)); i++) {
          if (i > 0) await new Promise((r) => setTimeout(r, 100));
          direct = (await fetchBytes(`${env.server}${p}`, accept)).body;
          const c = await fetchBytes(`${levee.url.origin}${p}?resourceVersion=0`, accept);
          assert.equal(c.status, 200);
          cached = c.body;
          gets++;
        }
        assert.ok(cached!.equals(direct!), `${p} (${accept.split(',')[0]})`);
      }
    }
  }
  assert.ok((await fromCache()) - cachedBefore >= gets);
  const missing = `${pathOf('configmaps', ns)}/missing`;
  const cached = await fetchBytes(`${levee.url.origin}${missing}?resourceVersion=0`, PROTOBUF);
  const direct = await fetchBytes(`${env.server}${missing}?resourceVersion=0`, PROTOBUF);
  assert.equal(cached.status, 404);
  assert.equal(cached.type, PROTOBUF);
  assert.deepEqual(unwrap(cached.body).kind, 'Status');
  assert.ok(cached.body.equals(direct.body), 'the NotFound Status is the apiserver\'s, in protobuf');
});

/** Reads length-prefixed frames of a protobuf watch until `done` says so or the time is up. */
async function watchFrames(url: string, accept: string, done: (frames: Buffer[]) => boolean, ms = 15_000): Promise<{ type: string; frames: Buffer[] }> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), ms);
  const r = await request(url, { dispatcher: agent, headers: { authorization: `Bearer ${env.tokens.admin}`, accept }, signal: controller.signal });
  const frames: Buffer[] = [];
  let pending = Buffer.alloc(0);
  try {
    for await (const chunk of r.body) {
      pending = Buffer.concat([pending, chunk as Buffer]);
      while (pending.length >= 4 && pending.length >= 4 + pending.readUInt32BE(0)) {
        frames.push(pending.subarray(0, 4 + pending.readUInt32BE(0)));
        pending = pending.subarray(4 + pending.readUInt32BE(0));
      }
      if (done(frames)) break;
    }
  } catch (e) {
    if (!controller.signal.aborted) throw e;
  } finally {
    clearTimeout(timer);
    controller.abort();
  }
  return { type: String(r.headers['content-type']), frames };
}

/** A watch frame's event type and the object's envelope. */
function event(frame: Buffer): { type: string; object: Envelope } {
  const r = new BinaryReader(frame.subarray(4));
  let type = '';
  let object: Envelope | undefined;
  while (r.pos < r.len) {
    const [num] = r.tag();
    if (num === 1) type = r.string();
    else {
      const raw = new BinaryReader(r.bytes());
      raw.tag();
      object = unwrap(raw.bytes());
    }
  }
  return { type, object: object! };
}

test('a protobuf WATCH from the cache sends the apiserver\'s frames, for objects and their metadata', async () => {
  const p = pathOf('configmaps', ns);
  const list = JSON.parse((await get(`${env.server}${p}`, agent, env.tokens.admin)).body) as { metadata: { resourceVersion: string } };
  const from = list.metadata.resourceVersion;
  const writes = (async () => {
    await new Promise((r) => setTimeout(r, 500));
    await send('POST', `${env.server}${p}`, agent, env.tokens.admin, { metadata: { name: 'w1' }, data: { a: '1' } });
    await send('PATCH', `${env.server}${p}/w1`, agent, env.tokens.admin, { data: { a: '2' } }, 'application/merge-patch+json');
    await send('DELETE', `${env.server}${p}/w1`, agent, env.tokens.admin);
  })();
  const four = (f: Buffer[]): boolean => f.length >= 3;
  const url = (origin: string) => `${origin}${p}?watch=true&resourceVersion=${from}`;
  const [cached, direct, cachedMeta, directMeta] = await Promise.all([
    watchFrames(url(levee.url.origin), PROTOBUF, four),
    watchFrames(url(env.server), PROTOBUF, four),
    watchFrames(url(levee.url.origin), METADATA, four),
    watchFrames(url(env.server), METADATA, four),
  ]);
  await writes;
  assert.equal(cached.type, `${PROTOBUF};stream=watch`);
  assert.deepEqual(cached.frames.map((f) => event(f).type), ['ADDED', 'MODIFIED', 'DELETED']);
  assert.deepEqual(cached.frames, direct.frames);
  assert.deepEqual(cachedMeta.frames.map((f) => event(f).object.kind), ['PartialObjectMetadata', 'PartialObjectMetadata', 'PartialObjectMetadata']);
  assert.deepEqual(cachedMeta.frames, directMeta.frames);
});

test('a protobuf watch-list from the cache begins with the apiserver\'s state and ends it with the bookmark', async () => {
  const p = pathOf('pods', ns);
  const url = (origin: string) => `${origin}${p}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true`;
  const untilBookmark = (f: Buffer[]): boolean => f.some((x) => event(x).type === 'BOOKMARK');
  for (let attempt = 0; ; attempt++) {
    const verified = async (): Promise<number> => sum(await metrics(), /^levee_consistent_reads_total\{resource="pods",result="verified"\} (\d+)$/gm);
    const before = await verified();
    const [cached, direct] = await Promise.all([watchFrames(url(levee.url.origin), PROTOBUF, untilBookmark), watchFrames(url(env.server), PROTOBUF, untilBookmark)]);
    const added = (w: { frames: Buffer[] }) => w.frames.filter((f) => event(f).type === 'ADDED');
    assert.ok((await verified()) > before, `the watch-list was not proven and answered from the cache: ${(await metrics()).split('\n').filter((l) => l.startsWith('levee_read_forwarded_total')).join('; ')}`);
    const end = event(cached.frames.at(-1)!);
    assert.equal(end.type, 'BOOKMARK', cached.frames.map((f) => event(f).type).join(','));
    assert.equal(end.object.kind, 'Pod');
    assert.ok(Buffer.from(end.object.raw).includes('k8s.io/initial-events-end'));
    assert.ok(added(cached).length >= 2);
    // Pods change on their own (status, conditions); both reads must see the same state.
    if (added(cached).every((f, i) => f.equals(added(direct)[i] ?? Buffer.alloc(0))) && added(cached).length === added(direct).length) break;
    assert.ok(attempt < 5, 'the initial events differ from the apiserver\'s');
  }
});

test('a client-go informer speaking protobuf starts from the cache and converges', async () => {
  const child = spawn(env.informer, ['--server', levee.url.origin, '--token', env.tokens.admin, '--ca', env.caFile, '--namespace', ns], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  const forwardedBefore = await forwardedForMedia();
  try {
    await waitFor('the informer synced', () => out.includes('synced\n') || child.exitCode !== null, 20_000);
    assert.match(out, /synced/, err);
    const cm = `${env.server}${pathOf('configmaps', ns)}`;
    for (let i = 0; i < 5; i++) await send('POST', cm, agent, env.tokens.admin, { metadata: { name: `go-${i}` } });
    const want = (JSON.parse((await get(cm, agent, env.tokens.admin)).body) as { items: Array<{ metadata: { name: string; resourceVersion: string } }> }).items
      .map((o) => `${o.metadata.name}@${o.metadata.resourceVersion}`)
      .sort()
      .join(' ');
    let have = '';
    for (let i = 0; i < 100 && have !== want; i++) {
      const before = out.length;
      child.stdin.write('dump\n');
      await waitFor('a dump', () => out.length > before && out.endsWith('\n'), 2000);
      have = out.slice(before).trim().split('\n').at(-1) ?? '';
      if (have !== want) await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(have, want);
    assert.equal((await forwardedForMedia()) - forwardedBefore, 0, 'nothing the informer asked was forwarded for its media type');
    assert.ok(sum(await metrics(), /^levee_watchers\{resource="configmaps"\} (\d+)$/gm) >= 1, 'the informer watches the cache');
  } finally {
    child.stdin.end();
    child.kill();
  }
});
