// Scale by simulation: a KWOK cluster of thousands of simulated nodes and a hundred thousand pods on
// this machine, with Levee in front of it, measured in one run:
//
// 1. Building it: the test environment with N KWOK nodes (`up({ nodes })`, its control plane
//    running: controller manager, scheduler, KWOK), then P pods created with spec.nodeName already
//    set, spread evenly over the nodes, through many concurrent POSTs (as a controller would, no
//    scheduling needed); KWOK's fake kubelets take them to Running. Time to build, and the RSS of
//    kube-apiserver, etcd and KWOK.
// 2. Cold start: the apiserver restarted (time to /readyz, and until its watch cache serves pods and
//    nodes: a watch from resourceVersion=0 is answered 200 rather than 429), and a fresh Levee
//    started in front of it (time to /readyz, and per resource until its initial list completed),
//    with the RSS of each once synced.
// 3. A rolling restart of a per-node agent DaemonSet (one agent per node; each a pod of the same
//    ServiceAccount with its own token, as DaemonSet pods get; each watching the pods on its node,
//    fieldSelector spec.nodeName=NODE, and its own Node, as kube-proxy or a CNI agent does; as
//    client-go's reflectors: watch-list by default, or LIST resourceVersion=0 then WATCH with
//    --informers list; bench/lib/agent.ts). All agents run, then are restarted in waves of
//    --max-unavailable (10%) as a DaemonSet rolling update replaces its pods: a wave's agents
//    stop (their connections close), start again, and the next wave begins once all of them are
//    synced. Time per wave and in all, requests that reached the apiserver, CPU seconds of the
//    apiserver, etcd and Levee. First directly against the apiserver, then through Levee.
//
// The cluster is kept (`npm run testenv -- down` removes it): a later run with the same size finds
// the pods and the record of how long building them took (a ConfigMap), and measures 2 and 3 again.
//
//   npm run bench:scale                                  # 5,000 nodes, 100,000 pods
//   npm run bench:scale -- --nodes 200 --pods 4000       # small, to try it
//   npm run bench:scale -- --informers list --max-unavailable 20
//   npm run bench:scale -- --nodes 2000 --pods 40000 --running-timeout 0 --settle-max 0
//       # measure without waiting for KWOK to take every pod Running, or for the cluster to settle
//
// A run stopped while building resumes where it was (existing pods are not created again); the
// report then says so, and the creation time covers only the pods it created.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Agent, request } from 'undici';
import { loadEnv, startApiserver, stopApiserver, up, type TestEnv } from '../test/env/testenv.ts';
import { startLevee, writeKubeconfig } from '../test/support/levee.ts';
import { call, must, pool } from './lib/client.ts';
import { etcdSize } from './lib/etcd.ts';
import { cpuSeconds, machineCpuSeconds, rssBytes, testenvPids } from './lib/watchproc.ts';
import { metric, parseMetrics, type Sample } from './lib/prom.ts';
import { quantile } from './lib/stats.ts';
import { closeFleet, newFleet, runAgent, type AgentResult, type Fleet } from './lib/agent.ts';
import { AGENTS_NS, grantAgents } from './lib/restart.ts';

const { values } = parseArgs({
  options: {
    nodes: { type: 'string', default: '5000' },
    pods: { type: 'string', default: '100000' },
    informers: { type: 'string', default: 'watch-list,list' },
    'max-unavailable': { type: 'string', default: '10' },
    concurrency: { type: 'string', default: '64' },
    'running-timeout': { type: 'string', default: '3600' },
    'settle-max': { type: 'string', default: '900' },
    out: { type: 'string', default: 'scale' },
  },
});
const N = Number(values.nodes);
const P = Number(values.pods);
type Informers = 'watch-list' | 'list';
const MODES = values.informers.split(',') as Informers[];
if (MODES.length === 0 || MODES.some((m) => m !== 'watch-list' && m !== 'list')) throw new Error('--informers is watch-list, list, or both: watch-list,list');
const MAX_UNAVAILABLE = Number(values['max-unavailable']);
const WAVE = Math.max(1, Math.ceil((N * MAX_UNAVAILABLE) / 100));
const CONCURRENCY = Number(values.concurrency);
/** Seconds to wait for every pod to be Running before measuring the rest anyway (the report says how many were). */
const RUNNING_TIMEOUT = Number(values['running-timeout']);
/** Seconds to wait at most for the cluster to settle before each step. */
const SETTLE_MAX = Number(values['settle-max']);
const log = (line: string): void => void process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const seconds = (since: number): number => (performance.now() - since) / 1000;
const mbOf = (b: number | null | undefined): number | null => (b === null || b === undefined ? null : Math.round(b / 1e5) / 10);

const NS = 'levee-scale';
const MARKER = 'scale-build';
const nodeName = (n: number): string => `kwok-node-${n}`;

// ---------------------------------------------------------------- processes

const ROOT = resolve(import.meta.dirname, '..');
/** The control plane's processes (their supervisors record the real pids in .testenv/run). */
function controlPlanePids(): Record<string, number | null> {
  const out: Record<string, number | null> = {};
  for (const name of ['kwok', 'kube-controller-manager', 'kube-scheduler', 'levee']) {
    try {
      out[name] = (JSON.parse(readFileSync(resolve(ROOT, '.testenv/run', `${name}.json`), 'utf8')) as { pid: number }).pid;
    } catch {
      out[name] = null;
    }
  }
  out['control plane Levee'] = out['levee']!;
  delete out['levee'];
  return out;
}

/** RSS in MB of the test environment's processes, now. */
function rssNow(): Record<string, number | null> {
  const pids = { 'kube-apiserver': testenvPids().apiserver, etcd: testenvPids().etcd, ...controlPlanePids() };
  return Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, pid ? mbOf(rssBytes(pid)) : null]));
}

/** Highest RSS seen of each process while it runs (sampled every 500 ms). */
function rssPeaks(pids: () => Record<string, number | null>): { stop(): Record<string, number | null> } {
  const peak: Record<string, number> = {};
  const sample = (): void => {
    for (const [k, pid] of Object.entries(pids())) {
      const b = pid ? rssBytes(pid) : null;
      if (b !== null) peak[k] = Math.max(peak[k] ?? 0, b);
    }
  };
  sample();
  const timer = setInterval(sample, 500);
  return {
    stop: () => {
      clearInterval(timer);
      sample();
      return Object.fromEntries(Object.entries(peak).map(([k, v]) => [k, mbOf(v)]));
    },
  };
}

// ---------------------------------------------------------------- 1. the cluster

const build0 = performance.now();
/**
 * An environment already up with these nodes is used as it is: `up` would first wait for every
 * lease and both leaders to be fresh, which a saturated machine may not give it for minutes.
 */
async function runningEnv(): Promise<TestEnv | null> {
  let found: TestEnv;
  try {
    found = loadEnv();
  } catch {
    return null;
  }
  if (!found.controlPlane || found.nodes.length !== N) return null;
  const a = new Agent({ connect: { ca: readFileSync(found.caFile) } });
  try {
    const r = await request(`${found.server}/readyz`, { dispatcher: a, headersTimeout: 10_000 });
    await r.body.text();
    return r.statusCode === 200 ? found : null;
  } catch {
    return null;
  } finally {
    await a.close();
  }
}
const existing = await runningEnv();
if (existing) log(`the test environment is up with ${N} KWOK nodes: using it`);
else log(`bringing the test environment up with ${N} KWOK nodes`);
const env = existing ?? (await up({ nodes: N }));
const upSeconds = seconds(build0);
if (!env.controlPlane) throw new Error('the environment is bare: KWOK nodes need its control plane');
log(`up with ${env.nodes.length} nodes Ready in ${upSeconds.toFixed(0)} s`);
const ca = readFileSync(env.caFile);
const admin = new Agent({ connect: { ca }, allowH2: false, connections: 32, headersTimeout: 120_000, bodyTimeout: 600_000 });
const token = env.tokens.admin;
const api = env.server;

interface BuildRecord {
  nodes: number;
  pods: number;
  /** `up` with the nodes: processes started (or found) and every node Ready with its lease. */
  upSeconds: number;
  /** From the first POST to the last pod's answer. */
  createSeconds: number;
  /** From the first POST until every pod was Running (KWOK's status updates); null when not all were within --running-timeout. */
  runningSeconds: number | null;
  /** Pods Running when the build ended. */
  podsRunning: number;
  /** Seconds waited for Running. */
  waitedSeconds: number;
  /** Pods found from an earlier, interrupted run (not created, so not in createSeconds). */
  resumed?: { existingPods: number; existingRunning: number } | undefined;
  createdPerSecond: number;
  createErrors: Record<string, number>;
  rssAfterBuildMb: Record<string, number | null>;
  rssPeakDuringBuildMb: Record<string, number | null>;
  etcdAfterBuild: Awaited<ReturnType<typeof etcdSize>>;
  date: string;
}

async function readMarker(): Promise<BuildRecord | null> {
  const r = await call(admin, token, 'GET', `${api}/api/v1/namespaces/${NS}/configmaps/${MARKER}`);
  if (r.status !== 200) return null;
  const record = JSON.parse((JSON.parse(r.body) as { data: { record: string } }).data.record) as BuildRecord;
  return record.nodes === N && record.pods === P ? record : null;
}

/** Counts pods of the namespace that are Running, from a watch (names and phases read with regular expressions, not parsed). */
function runningWatch(fromRv: string, initial: string[]): { running: () => number; stop: () => void } {
  const running = new Set<string>(initial);
  let rv = fromRv;
  let stopped = false;
  const controller = new AbortController();
  const NAME = /"metadata":\{"name":"([^"]+)"/;
  const RV = /"resourceVersion":"(\d+)"/;
  void (async () => {
    while (!stopped) {
      try {
        const res = await request(`${api}/api/v1/namespaces/${NS}/pods?watch=true&allowWatchBookmarks=true&resourceVersion=${rv}&timeoutSeconds=3600`, {
          dispatcher: admin,
          headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
          signal: controller.signal,
        });
        if (res.statusCode !== 200) {
          await res.body.text();
          await sleep(1000);
          continue;
        }
        let tail = '';
        for await (const chunk of res.body) {
          const lines = (tail + (chunk as Buffer).toString()).split('\n');
          tail = lines.pop()!;
          for (const line of lines) {
            const r = RV.exec(line);
            if (r) rv = r[1]!;
            if (line.startsWith('{"type":"BOOKMARK"')) continue;
            const m = NAME.exec(line);
            if (!m) continue;
            if (line.startsWith('{"type":"DELETED"') || !line.includes('"phase":"Running"')) running.delete(m[1]!);
            else running.add(m[1]!);
          }
        }
      } catch {
        if (!stopped) await sleep(1000);
      }
    }
  })();
  return {
    running: () => running.size,
    stop: () => {
      stopped = true;
      controller.abort();
    },
  };
}

function podObject(i: number): object {
  const node = i % N;
  const app = i % 100;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: `app-${app}-${node}-${Math.floor(i / N)}`,
      namespace: NS,
      labels: { app: `app-${app}`, 'bench.levee.dev/scale': 'true' },
    },
    spec: {
      nodeName: nodeName(node),
      containers: [
        {
          name: 'app',
          image: `registry.example/app-${app}:v1.${app % 7}.0`,
          ports: [{ name: 'http', containerPort: 8080 }],
          env: [
            { name: 'APP', value: `app-${app}` },
            { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
          ],
          resources: { requests: { cpu: '10m', memory: '32Mi' }, limits: { memory: '64Mi' } },
          readinessProbe: { httpGet: { path: '/healthz', port: 8080 }, periodSeconds: 10 },
        },
      ],
      // As DaemonSet pods: stay bound whatever the node's condition, so a node whose lease
      // lapses while the machine is busy (or the apiserver restarts) does not evict them.
      tolerations: [
        { key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute' },
        { key: 'node.kubernetes.io/unreachable', operator: 'Exists', effect: 'NoExecute' },
      ],
      terminationGracePeriodSeconds: 5,
    },
  };
}

async function build(): Promise<BuildRecord> {
  const found = await readMarker();
  if (found) {
    log(`reusing the cluster built ${found.date}: ${found.pods} pods on ${found.nodes} nodes`);
    return found;
  }
  await must([201, 409], admin, token, 'POST', `${api}/api/v1/namespaces`, { metadata: { name: NS } });
  // The ServiceAccount admission plugin admits pods once the namespace's "default" account exists.
  for (let i = 0; (await call(admin, token, 'GET', `${api}/api/v1/namespaces/${NS}/serviceaccounts/default`)).status !== 200; i++) {
    if (i > 600) throw new Error(`no ServiceAccount ${NS}/default after 60 s`);
    await sleep(100);
  }
  // Pods from an earlier, interrupted run are kept: names only (metadata), and which are Running.
  const names = async (query: string): Promise<{ rv: string; names: string[] }> => {
    const res = await request(`${api}/api/v1/namespaces/${NS}/pods?${query}`, {
      dispatcher: admin,
      headers: { authorization: `Bearer ${token}`, accept: 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1' },
    });
    if (res.statusCode !== 200) throw new Error(`listing pods: ${res.statusCode} ${await res.body.text()}`);
    const list = (await res.body.json()) as { metadata: { resourceVersion: string }; items: Array<{ metadata: { name: string } }> };
    return { rv: list.metadata.resourceVersion, names: list.items.map((o) => o.metadata.name) };
  };
  const existing = new Set((await names('')).names);
  const runningNow = await names(`fieldSelector=${encodeURIComponent('status.phase=Running')}`);
  if (existing.size > 0) log(`resuming: ${existing.size} pods exist, ${runningNow.names.length} Running`);
  const watch = runningWatch(runningNow.rv, runningNow.names);
  const todo = Array.from({ length: P }, (_, i) => i).filter((i) => !existing.has((podObject(i) as { metadata: { name: string } }).metadata.name));
  const peaks = rssPeaks(() => ({ 'kube-apiserver': testenvPids().apiserver, etcd: testenvPids().etcd, ...controlPlanePids() }));
  const t0 = performance.now();
  let created = P - todo.length;
  const errors: Record<string, number> = {};
  const progress = setInterval(() => log(`pods: ${created}/${P} created, ${watch.running()} Running after ${seconds(t0).toFixed(0)} s; RSS MB ${JSON.stringify(rssNow())}`), 10_000);
  await pool(todo.length, CONCURRENCY, async (k) => {
    const i = todo[k]!;
    const r = await call(admin, token, 'POST', `${api}/api/v1/namespaces/${NS}/pods`, podObject(i));
    if (r.status !== 201) errors[String(r.status)] = (errors[String(r.status)] ?? 0) + 1;
    if (r.status !== 201 && r.status !== 409) throw new Error(`creating pod ${i}: ${r.status} ${r.body.slice(0, 300)}`);
    created++;
  });
  const createSeconds = seconds(t0);
  log(`${todo.length} pods created in ${createSeconds.toFixed(0)} s (${(todo.length / createSeconds).toFixed(0)}/s); waiting for Running`);
  const w0 = performance.now();
  while (watch.running() < P && seconds(w0) < RUNNING_TIMEOUT) await sleep(500);
  const runningSeconds = watch.running() >= P ? seconds(t0) : null;
  const podsRunning = watch.running();
  clearInterval(progress);
  watch.stop();
  const rssPeakDuringBuildMb = peaks.stop();
  log(runningSeconds === null ? `${podsRunning} of ${P} pods Running after waiting ${seconds(w0).toFixed(0)} s: measuring the rest anyway` : `all ${P} pods Running ${runningSeconds.toFixed(0)} s after the first POST`);
  const record: BuildRecord = {
    nodes: N,
    pods: P,
    upSeconds,
    createSeconds,
    runningSeconds,
    podsRunning,
    waitedSeconds: seconds(w0),
    resumed: existing.size > 0 ? { existingPods: existing.size, existingRunning: runningNow.names.length } : undefined,
    createdPerSecond: todo.length / createSeconds,
    createErrors: errors,
    rssAfterBuildMb: rssNow(),
    rssPeakDuringBuildMb,
    etcdAfterBuild: await etcdSize(env.etcd),
    date: new Date().toISOString(),
  };
  await must([201], admin, token, 'POST', `${api}/api/v1/namespaces/${NS}/configmaps`, { metadata: { name: MARKER }, data: { record: JSON.stringify(record) } });
  return record;
}

const built = await build();

// ---------------------------------------------------------------- 2. cold start

/**
 * Waits until the cluster has settled: fewer than 5 pod writes a second reach the apiserver over
 * 10 s (after an apiserver restart the node lifecycle controller may mark the pods of nodes whose
 * leases lapsed not ready, and KWOK marks them ready again), for at most 15 minutes.
 */
const settled: Record<string, number> = {};
async function waitQuiet(what: string): Promise<void> {
  const t0 = performance.now();
  let prev = await apiserverMetrics();
  for (;;) {
    await sleep(10_000);
    const now = await apiserverMetrics();
    const a = arrivals(prev, now);
    prev = now;
    const podWrites = Object.entries(a).filter(([k]) => /^(POST|PUT|PATCH|APPLY|DELETE) pods/.test(k)).reduce((n, [, v]) => n + v, 0) / 10;
    if (podWrites < 5 || seconds(t0) > SETTLE_MAX) {
      settled[what] = seconds(t0);
      log(`settled before ${what} after ${seconds(t0).toFixed(0)} s (${podWrites.toFixed(1)} pod writes/s)`);
      return;
    }
    log(`waiting for the cluster to settle before ${what}: ${podWrites.toFixed(0)} pod writes/s`);
  }
}

async function probeStatus(url: string, timeoutMs = 30_000): Promise<number> {
  try {
    const res = await request(url, { dispatcher: admin, headers: { authorization: `Bearer ${token}`, accept: 'application/json' }, headersTimeout: timeoutMs, signal: AbortSignal.timeout(timeoutMs) });
    res.body.on('error', () => undefined);
    res.body.destroy();
    return res.statusCode;
  } catch {
    return 0;
  }
}

/**
 * A watch from resourceVersion=0 is served by the watch cache only: while it initializes the
 * apiserver answers 429 (or holds the request), and 200 once it has listed etcd.
 */
const cacheProbe = (resource: string): string =>
  `${api}/api/v1/${resource}?watch=true&resourceVersion=0&fieldSelector=${encodeURIComponent('metadata.name=levee-scale-none')}&timeoutSeconds=1`;

async function restartApiserver(): Promise<Record<string, unknown>> {
  await waitQuiet('the apiserver restart');
  log('restarting kube-apiserver');
  const rssBeforeMb = rssNow()['kube-apiserver'];
  await stopApiserver();
  const t0 = performance.now();
  let readyzAt = 0;
  const readyz = (async () => {
    while ((await probeStatus(`${api}/readyz`, 5000)) !== 200) await sleep(100);
    readyzAt = seconds(t0);
  })();
  const started = startApiserver().then(async () => {
    await readyz;
    return readyzAt;
  });
  const cacheReady: Record<string, number> = {};
  const watchCaches = Promise.all(
    ['pods', 'nodes'].map(async (resource) => {
      for (;;) {
        if ((await probeStatus(cacheProbe(resource), 10_000)) === 200) {
          cacheReady[resource] = seconds(t0);
          return;
        }
        await sleep(200);
      }
    }),
  );
  let peak = 0;
  const sampler = setInterval(() => (peak = Math.max(peak, rssBytes(testenvPids().apiserver ?? 0) ?? 0)), 200);
  const readyzSeconds = await started;
  await watchCaches;
  const readySeconds = seconds(t0);
  log(`apiserver: /readyz after ${readyzSeconds.toFixed(1)} s, watch caches of pods and nodes serving after ${readySeconds.toFixed(1)} s`);
  const rssReadyMb = mbOf(rssBytes(testenvPids().apiserver!));
  // Settled: the control plane's clients have reconnected and the first garbage collections ran.
  await sleep(30_000);
  clearInterval(sampler);
  return {
    readyzSeconds,
    watchCacheServingSeconds: cacheReady,
    readyWithWatchCacheSeconds: readySeconds,
    rssBeforeRestartMb: rssBeforeMb,
    rssWhenReadyMb: rssReadyMb,
    rssPeakMb: mbOf(peak),
    rssSettledMb: mbOf(rssBytes(testenvPids().apiserver!)),
    cpuSecondsSinceStart: cpuSeconds(testenvPids().apiserver!),
  };
}

const apiserverRestart = await restartApiserver();

async function tokenFor(namespace: string, name: string, ttl = 7200): Promise<string> {
  const r = await must([201], admin, token, 'POST', `${api}/api/v1/namespaces/${namespace}/serviceaccounts/${name}/token`, {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: { expirationSeconds: ttl },
  });
  return (JSON.parse(r.body) as { status: { token: string } }).status.token;
}

const LEVEE_FLAGS = ['--authorization-local-rbac', '--authentication-local-serviceaccount-tokens'];
await waitQuiet('Levee\'s start');
log('starting Levee');
const leveeT0 = performance.now();
const levee = await startLevee({ kubeconfig: writeKubeconfig(api, env.caFile, await tokenFor('levee', 'levee')), tls: env.leveeServing, extra: LEVEE_FLAGS });
const leveeMetrics = async (): Promise<Sample[]> => parseMetrics((await call(admin, token, 'GET', `${levee.url.origin}/metrics`)).body);
const listedAt: Record<string, number> = {};
let leveeReadySeconds: number;
{
  const deadline = performance.now() + 1_800_000;
  for (let last = 0; ; ) {
    if (performance.now() > deadline) throw new Error(`Levee not ready after 30 minutes:\n${levee.output().slice(-2000)}`);
    const ready = (await probeStatus(`${levee.url.origin}/readyz`)) === 200;
    if (ready || performance.now() - last > 250) {
      last = performance.now();
      for (const s of await leveeMetrics()) {
        if (s.name === 'levee_reflector_list_duration_seconds_count' && s.value >= 1 && listedAt[s.labels.resource!] === undefined) listedAt[s.labels.resource!] = seconds(leveeT0);
      }
    }
    if (ready) break;
    await sleep(100);
  }
  leveeReadySeconds = seconds(leveeT0);
}
const leveeRssReady = levee.rss();
log(`Levee ready after ${leveeReadySeconds.toFixed(1)} s (${JSON.stringify(listedAt)}), RSS ${mbOf(leveeRssReady)} MB`);
await sleep(30_000);
const syncedMetrics = await leveeMetrics();
const byResource = (name: string): Record<string, number> =>
  Object.fromEntries(syncedMetrics.filter((s) => s.name === name).map((s) => [s.labels.resource!, s.value]));
const leveeHwm = Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${levee.pid}/status`, 'utf8'))![1]) * 1024;
const leveeSync = {
  flags: LEVEE_FLAGS,
  readySeconds: leveeReadySeconds,
  /** Seconds from the process start until the resource's initial list completed (sampled every 250 ms). */
  listedSeconds: listedAt,
  /** The initial list's own duration, as Levee measured it. */
  listDurationSeconds: byResource('levee_reflector_list_duration_seconds_sum'),
  cacheObjects: byResource('levee_cache_objects'),
  cacheBytes: byResource('levee_cache_bytes'),
  rssWhenReadyMb: mbOf(leveeRssReady),
  rssSettledMb: mbOf(levee.rss()),
  rssPeakMb: mbOf(leveeHwm),
  cpuSecondsToSettled: cpuSeconds(levee.pid),
};
const rssAfterColdStart = { ...rssNow(), Levee: mbOf(levee.rss()) };

// ---------------------------------------------------------------- 3. rolling restart

await grantAgents(api, admin, token);
await must([201, 409], admin, token, 'POST', `${api}/api/v1/namespaces/${AGENTS_NS}/serviceaccounts`, { metadata: { name: 'agent' } });
// One ServiceAccount, a token per agent: what the pods of one DaemonSet are given.
const tokens: string[] = [];
const tokens0 = performance.now();
await pool(N, 32, async (i) => void (tokens[i] = await tokenFor(AGENTS_NS, 'agent')));
log(`${N} agent tokens in ${seconds(tokens0).toFixed(0)} s`);

async function apiserverMetrics(): Promise<Sample[]> {
  return parseMetrics((await must([200], admin, token, 'GET', `${api}/metrics`)).body);
}

/**
 * Requests that arrived at the apiserver, by verb and resource. A watch is counted in
 * apiserver_request_total only when it ends, and is in apiserver_longrunning_requests while open:
 * watches that arrived between two scrapes = those that ended + the change in those open.
 */
function counts(samples: Sample[]): { ended: Map<string, number>; open: Map<string, number> } {
  const ended = new Map<string, number>();
  const open = new Map<string, number>();
  for (const s of samples) {
    const resource = `${s.labels.group ? `${s.labels.resource}.${s.labels.group}` : s.labels.resource || '(non-resource)'}${s.labels.subresource ? `/${s.labels.subresource}` : ''}`;
    const key = `${s.labels.verb} ${resource}`;
    if (s.name === 'apiserver_longrunning_requests' && s.labels.verb === 'WATCH') open.set(key, (open.get(key) ?? 0) + s.value);
    if (s.name === 'apiserver_request_total') ended.set(key, (ended.get(key) ?? 0) + s.value);
  }
  return { ended, open };
}

function arrivals(before: Sample[], after: Sample[]): Record<string, number> {
  const a = counts(before);
  const b = counts(after);
  const out: Record<string, number> = {};
  for (const key of new Set([...a.ended.keys(), ...b.ended.keys(), ...a.open.keys(), ...b.open.keys()])) {
    const d = (b.ended.get(key) ?? 0) - (a.ended.get(key) ?? 0) + (b.open.get(key) ?? 0) - (a.open.get(key) ?? 0);
    if (d > 0) out[key] = d;
  }
  return out;
}

/** What the agents ask for: reads of pods and nodes (the control plane's writes, leases, ... are not theirs). */
const AGENT_KINDS = ['LIST pods', 'WATCH pods', 'GET pods', 'LIST nodes', 'WATCH nodes', 'GET nodes'];
const agentShaped = (by: Record<string, number>): number => AGENT_KINDS.reduce((n, k) => n + (by[k] ?? 0), 0);

interface Wave {
  wave: number;
  agents: number;
  seconds: number;
  syncP50Ms: number;
  syncP99Ms: number;
  requests: number;
  throttled: number;
}

interface Rollout {
  target: string;
  informers: Informers;
  agents: number;
  waveSize: number;
  /** All agents started from nothing (200 at a time) before the rollout, as when the DaemonSet was created. */
  initialStartSeconds: number;
  background: { seconds: number; cores: Record<string, number | null>; requestsPerSecond: number; agentShapedPerSecond: number };
  totalSeconds: number;
  waves: Wave[];
  requests: number;
  throttled: number;
  errors: Record<string, number>;
  requestP99Ms: number;
  upstreamRequests: number;
  upstreamAgentShaped: number;
  upstreamByKind: Record<string, number>;
  cpuSeconds: Record<string, number | null>;
  /** CPU seconds less what the same process used at its background rate for as long. */
  cpuSecondsAboveBackground: Record<string, number | null>;
  rssPeakMb: Record<string, number | null>;
}

function cpuNow(withLevee: boolean): Record<string, number | null> {
  const pids = testenvPids();
  const cp = controlPlanePids();
  const out: Record<string, number | null> = {
    'kube-apiserver': pids.apiserver ? cpuSeconds(pids.apiserver) : null,
    etcd: pids.etcd ? cpuSeconds(pids.etcd) : null,
    kwok: cp['kwok'] ? cpuSeconds(cp['kwok']) : null,
    'control plane Levee': cp['control plane Levee'] ? cpuSeconds(cp['control plane Levee']) : null,
  };
  if (withLevee) out['Levee'] = cpuSeconds(levee.pid);
  const u = process.cpuUsage();
  out['agents (this process)'] = (u.user + u.system) / 1e6;
  out['machine'] = machineCpuSeconds().busy;
  return out;
}
const diff = (a: Record<string, number | null>, b: Record<string, number | null>): Record<string, number | null> =>
  Object.fromEntries(Object.keys(b).map((k) => [k, a[k] === null || b[k] === null || a[k] === undefined ? null : Math.round((b[k]! - a[k]) * 10) / 10]));

async function rollout(target: string, origin: string, viaLevee: boolean, informers: Informers): Promise<Rollout> {
  const fleets: Fleet[] = Array.from({ length: N }, () => newFleet());
  const start = (i: number, t0: number): Promise<AgentResult> =>
    runAgent({ origin, token: tokens[i]!, node: nodeName(i), watchList: informers === 'watch-list', index: i }, t0, fleets[i]!);
  await waitQuiet(target);
  // The DaemonSet as it runs before the update: every agent synced, its watches open.
  const s0 = performance.now();
  let running = 0;
  const progress0 = setInterval(() => log(`${target}: ${running}/${N} agents started`), 10_000);
  await pool(N, 200, async (i) => {
    await start(i, s0);
    running++;
  });
  clearInterval(progress0);
  const initialStartSeconds = seconds(s0);
  log(`${target}: ${N} agents running after ${initialStartSeconds.toFixed(0)} s; measuring the background for 20 s`);
  await sleep(10_000);
  // The background: what the cluster costs with every agent idle (KWOK's leases, the controllers).
  const bgMetrics = await apiserverMetrics();
  const bgCpu = cpuNow(viaLevee);
  const bg0 = performance.now();
  await sleep(20_000);
  const bgSeconds = seconds(bg0);
  const bgCpu1 = cpuNow(viaLevee);
  const bgArrivals = arrivals(bgMetrics, await apiserverMetrics());
  const bgCores = Object.fromEntries(Object.entries(diff(bgCpu, bgCpu1)).map(([k, v]) => [k, v === null ? null : Math.round((v / bgSeconds) * 1000) / 1000]));

  const before = await apiserverMetrics();
  const cpu0 = cpuNow(viaLevee);
  const peaks = rssPeaks(() => ({ 'kube-apiserver': testenvPids().apiserver, etcd: testenvPids().etcd, ...(viaLevee ? { Levee: levee.pid } : {}) }));
  const t0 = performance.now();
  const waves: Wave[] = [];
  const results: AgentResult[] = [];
  for (let w = 0; w * WAVE < N; w++) {
    const members = Array.from({ length: Math.min(WAVE, N - w * WAVE) }, (_, k) => w * WAVE + k);
    // The old pods go: their watches and connections close.
    for (const i of members) closeFleet(fleets[i]!);
    const tw = performance.now();
    const r = await Promise.all(members.map((i) => start(i, tw)));
    results.push(...r);
    const syncs = r.map((x) => x.syncedMs);
    waves.push({
      wave: w + 1,
      agents: members.length,
      seconds: seconds(tw),
      syncP50Ms: quantile(syncs, 0.5),
      syncP99Ms: quantile(syncs, 0.99),
      requests: r.reduce((n, x) => n + x.requests, 0),
      throttled: r.reduce((n, x) => n + x.throttled, 0),
    });
    log(`${target}: wave ${w + 1} (${members.length} agents) synced in ${seconds(tw).toFixed(1)} s`);
  }
  const totalSeconds = seconds(t0);
  const cpu1 = cpuNow(viaLevee);
  const rssPeakMb = peaks.stop();
  const byKind = arrivals(before, await apiserverMetrics());
  // The benchmark's own scrape of /metrics is not the agents'.
  if (byKind['get (non-resource)']) byKind['get (non-resource)']--;
  for (const f of fleets) closeFleet(f);
  const cpu = diff(cpu0, cpu1);
  const errors: Record<string, number> = {};
  for (const r of results) for (const [k, v] of Object.entries(r.errors)) errors[k] = (errors[k] ?? 0) + v;
  const bgTotal = Object.values(bgArrivals).reduce((a, b) => a + b, 0);
  return {
    target,
    informers,
    agents: N,
    waveSize: WAVE,
    initialStartSeconds,
    background: { seconds: bgSeconds, cores: bgCores, requestsPerSecond: bgTotal / bgSeconds, agentShapedPerSecond: agentShaped(bgArrivals) / bgSeconds },
    totalSeconds,
    waves,
    requests: results.reduce((n, r) => n + r.requests, 0),
    throttled: results.reduce((n, r) => n + r.throttled, 0),
    errors,
    requestP99Ms: quantile(results.flatMap((r) => r.latenciesMs), 0.99),
    upstreamRequests: Object.values(byKind).reduce((a, b) => a + b, 0),
    upstreamAgentShaped: agentShaped(byKind),
    upstreamByKind: byKind,
    cpuSeconds: cpu,
    cpuSecondsAboveBackground: Object.fromEntries(Object.entries(cpu).map(([k, v]) => [k, v === null || bgCores[k] === null || bgCores[k] === undefined ? null : Math.round((v - bgCores[k] * totalSeconds) * 10) / 10])),
    rssPeakMb,
  };
}

const rollouts: Rollout[] = [];
for (const informers of MODES) {
  for (const [target, origin, viaLevee] of [['apiserver directly', api, false], ['through Levee', levee.url.origin, true]] as const) {
    const r = await rollout(`${target} (${informers})`, origin, viaLevee, informers);
    log(`${r.target}: all ${N} agents restarted in ${r.totalSeconds.toFixed(0)} s`);
    rollouts.push(r);
    await sleep(10_000);
  }
}
const leveeAfter = await leveeMetrics();
const rssAtEnd = { ...rssNow(), Levee: mbOf(levee.rss()) };
await levee.stop();
const podsNow = (await etcdSize(env.etcd)).keys;
await admin.close();

// ---------------------------------------------------------------- report

const report = {
  benchmark: 'scale',
  date: new Date().toISOString(),
  environment: { node: process.version, apiserver: env.version, cpus: cpus().length, cpuModel: cpus()[0]?.model ?? '', memoryBytes: totalmem() },
  informers: values.informers,
  maxUnavailablePercent: MAX_UNAVAILABLE,
  nodes: N,
  pods: P,
  build: built,
  apiserverRestart,
  leveeSync,
  rssAfterColdStartMb: rssAfterColdStart,
  rollouts,
  rssAtEndMb: rssAtEnd,
  /** Seconds waited for the cluster to settle (pod writes below 5/s) before each step. */
  settledSeconds: settled,
  etcdKeysAtEnd: podsNow,
  leveeSinceStart: {
    tokenReviews: metric(leveeAfter, 'levee_token_reviews_total') ?? 0,
    subjectAccessReviews: metric(leveeAfter, 'levee_subject_access_reviews_total') ?? 0,
    serviceAccountTokensVerifiedLocally: metric(leveeAfter, 'levee_serviceaccount_tokens_verified_locally_total') ?? 0,
    watchRestarts: metric(leveeAfter, 'levee_reflector_watch_restarts_total') ?? 0,
    relists: metric(leveeAfter, 'levee_reflector_lists_total') ?? 0,
    readsForwarded: Object.fromEntries(leveeAfter.filter((s) => s.name === 'levee_read_forwarded_total').map((s) => [s.labels.reason!, s.value])),
  },
};
const outDir = resolve(import.meta.dirname, 'results');
mkdirSync(outDir, { recursive: true });
writeFileSync(resolve(outDir, `${values.out}.json`), JSON.stringify(report, null, 2) + '\n');

const f0 = (x: number | null | undefined): string => (x === null || x === undefined ? '-' : x.toFixed(0));
const f1 = (x: number | null | undefined): string => (x === null || x === undefined ? '-' : x.toFixed(1));
const n = (x: number): string => x.toLocaleString('en');
const errs = (e: Record<string, number>): string => Object.entries(e).map(([k, v]) => `${k}×${v}`).join(' ') || 'none';
const kinds = (r: Rollout): string => Object.entries(r.upstreamByKind).sort((a, b) => b[1] - a[1]).slice(0, 8).map(([k, v]) => `${k} ${v}`).join(', ');
const b = built;
const ar = apiserverRestart as { readyzSeconds: number; watchCacheServingSeconds: Record<string, number>; readyWithWatchCacheSeconds: number; rssBeforeRestartMb: number; rssWhenReadyMb: number; rssPeakMb: number; rssSettledMb: number };
const rows = (f: (r: Rollout) => string): string => rollouts.map(f).join(' | ');
const md = `# Scale: ${n(N)} KWOK nodes, ${n(P)} pods, a rolling restart of ${n(N)} agents

${report.date}, Kubernetes ${env.version}, Node ${process.version}, ${report.environment.cpus} CPUs (${report.environment.cpuModel}), ${(report.environment.memoryBytes / 2 ** 30).toFixed(0)} GiB;
everything (etcd, kube-apiserver, controller manager, scheduler, KWOK and the control plane's Levee, the Levee under test, the simulated agents) shares them.

## Building the cluster

| | |
|---|---:|
| test environment up, ${n(N)} KWOK nodes Ready with leases, s | ${f0(b.upSeconds)} |
| ${n(P)} pods created (spec.nodeName set, ${CONCURRENCY} concurrent POSTs), s | ${f0(b.createSeconds)} (${f0(b.createdPerSecond)}/s) |
| all pods Running (KWOK), s after the first POST | ${b.runningSeconds === null ? `not reached: ${n(b.podsRunning)} of ${n(P)} Running after waiting ${f0(b.waitedSeconds)} s` : f0(b.runningSeconds)} |${b.resumed ? `\n| resumed from an interrupted run | ${n(b.resumed.existingPods)} pods existed, ${n(b.resumed.existingRunning)} Running |` : ''}
| RSS after building, MB | ${Object.entries(b.rssAfterBuildMb).map(([k, v]) => `${k} ${f0(v)}`).join(', ')} |
| RSS peak while building, MB | ${Object.entries(b.rssPeakDuringBuildMb).map(([k, v]) => `${k} ${f0(v)}`).join(', ')} |
| etcd database, MB | ${f0((b.etcdAfterBuild.dbBytes ?? 0) / 1e6)} (${f0((b.etcdAfterBuild.dbInUseBytes ?? 0) / 1e6)} in use, ${b.etcdAfterBuild.keys ?? '-'} keys) |

## Cold start: the apiserver restarted, and a fresh Levee, on the same cluster

| | kube-apiserver (restarted) | Levee (fresh, default caches) |
|---|---:|---:|
| /readyz, s | ${f1(ar.readyzSeconds)} | ${f1(leveeSync.readySeconds)} |
| pods served from its cache, s | ${f1(ar.watchCacheServingSeconds['pods'])} | ${f1(leveeSync.listedSeconds['pods'])} (list took ${f1(leveeSync.listDurationSeconds['pods'])}) |
| nodes served from its cache, s | ${f1(ar.watchCacheServingSeconds['nodes'])} | ${f1(leveeSync.listedSeconds['nodes'])} (list took ${f1(leveeSync.listDurationSeconds['nodes'])}) |
| ready with its caches filled, s | ${f1(ar.readyWithWatchCacheSeconds)} | ${f1(leveeSync.readySeconds)} |
| RSS when ready / 30 s later / peak, MB | ${f0(ar.rssWhenReadyMb)} / ${f0(ar.rssSettledMb)} / ${f0(ar.rssPeakMb)} | ${f0(leveeSync.rssWhenReadyMb)} / ${f0(leveeSync.rssSettledMb)} / ${f0(leveeSync.rssPeakMb)} |

The apiserver's "served from its cache": a watch from resourceVersion=0 answered 200 (429 while its watch cache initializes);
it caches every resource, Levee ${Object.keys(leveeSync.cacheObjects).join(', ')} (${Object.entries(leveeSync.cacheObjects).map(([k, v]) => `${k} ${n(v)}`).join(', ')};
${f0(Object.values(leveeSync.cacheBytes).reduce((a, c) => a + c, 0) / 1e6)} MB of JSON). Levee per resource, seconds from its start until the initial list completed: ${Object.entries(leveeSync.listedSeconds).map(([k, v]) => `${k} ${f1(v)}`).join(', ')}.
Apiserver RSS before the restart: ${f0(ar.rssBeforeRestartMb)} MB.

## Rolling restart of a ${n(N)}-agent DaemonSet, ${MAX_UNAVAILABLE}% (${WAVE} agents) at a time

Each agent watches the pods on its node (fieldSelector spec.nodeName) and its Node, as client-go's reflectors start (${MODES.join(' and ')}):
watch-list = a consistent watch-list (client-go 1.35+, the default), synced at both initial-events-end bookmarks; list = LIST resourceVersion=0, then WATCH, synced once both watches are open;
its own HTTP/2 connection and token (one ServiceAccount). A wave's agents close their connections, start again, and the next wave
starts once all are synced. Background = the same processes over 20 s with every agent idle (KWOK's ${n(N)} leases, the controllers).

| | ${rollouts.map((r) => r.target).join(' | ')} |
|---|${rollouts.map(() => '---:').join('|')}|
| all agents restarted, s | ${rows((r) => f1(r.totalSeconds))} |
| wave time p50 / max, s | ${rows((r) => `${f1(quantile(r.waves.map((w) => w.seconds), 0.5))} / ${f1(Math.max(...r.waves.map((w) => w.seconds)))}`)} |
| agent sync p50 / p99 within a wave, ms | ${rows((r) => `${f0(quantile(r.waves.map((w) => w.syncP50Ms), 0.5))} / ${f0(Math.max(...r.waves.map((w) => w.syncP99Ms)))}`)} |
| request latency p99, ms | ${rows((r) => f0(r.requestP99Ms))} |
| requests sent by agents (429s retried) | ${rows((r) => `${n(r.requests)} (${r.throttled} × 429)`)} |
| errors other than 429 | ${rows((r) => errs(r.errors))} |
| pod and node reads that reached the apiserver | ${rows((r) => n(r.upstreamAgentShaped))} |
| all requests that reached the apiserver (control plane included) | ${rows((r) => n(r.upstreamRequests))} |
| background requests/s at the apiserver | ${rows((r) => f0(r.background.requestsPerSecond))} |
| kube-apiserver CPU, s (above background) | ${rows((r) => `${f1(r.cpuSeconds['kube-apiserver'])} (${f1(r.cpuSecondsAboveBackground['kube-apiserver'])})`)} |
| etcd CPU, s (above background) | ${rows((r) => `${f1(r.cpuSeconds['etcd'])} (${f1(r.cpuSecondsAboveBackground['etcd'])})`)} |
| Levee CPU, s (above background) | ${rows((r) => (r.cpuSeconds['Levee'] === undefined ? '-' : `${f1(r.cpuSeconds['Levee'])} (${f1(r.cpuSecondsAboveBackground['Levee'])})`))} |
| agents' CPU (this process), s | ${rows((r) => f1(r.cpuSeconds['agents (this process)']))} |
| whole machine busy, CPU s | ${rows((r) => f1(r.cpuSeconds['machine']))} |
| RSS peak, MB | ${rows((r) => Object.entries(r.rssPeakMb).map(([k, v]) => `${k} ${f0(v)}`).join(', '))} |
| all agents started from nothing (200 at a time) before, s | ${rows((r) => f0(r.initialStartSeconds))} |

Waves, seconds each:
${rollouts.map((r) => `- ${r.target}: ${r.waves.map((w) => f1(w.seconds)).join(', ')}`).join('\n')}

What reached the apiserver during the rollout, by verb and resource (watches counted when they arrived):
${rollouts.map((r) => `- ${r.target}: ${kinds(r)}`).join('\n')}

RSS at the end, MB: ${Object.entries(rssAtEnd).map(([k, v]) => `${k} ${f0(v)}`).join(', ')}.
Levee since its start: ${report.leveeSinceStart.tokenReviews} TokenReviews, ${report.leveeSinceStart.subjectAccessReviews} SubjectAccessReviews,
${report.leveeSinceStart.serviceAccountTokensVerifiedLocally} tokens verified locally, ${report.leveeSinceStart.relists} lists, ${report.leveeSinceStart.watchRestarts} watch restarts upstream.
`;
writeFileSync(resolve(outDir, `${values.out}.md`), md);
console.log(md);
