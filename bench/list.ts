// LIST and GET from a watch cache: the apiserver directly against Levee answering from its cache,
// in one run, on a generated cluster of realistic pods (bench/lib/pods.ts).
//
// Three targets answer every query, requests alternated between them by the same client (undici,
// TLS, keep-alive, HTTP/1.1, JSON, no compression):
//   - the apiserver with resourceVersion=0, served from its watch cache;
//   - the apiserver with resourceVersion unset, a consistent read (for LIST also from the watch
//     cache once it has caught up with etcd's current revision; for GET from etcd);
//   - Levee with resourceVersion=0, started with --cache pods,nodes;
//   - for LIST by node and GET, also a bare TLS server replaying Levee's answer to each query
//     (held in memory beforehand): the ceiling, what any server could reach on this machine.
// Levee runs as its own process, so its memory is its own: its RSS once the cache has synced,
// less the RSS of a Levee started with `--cache ""` (no cache), divided by the JSON bytes it holds,
// is the memory it spends per cached byte. A Levee that does not know --cache forwards
// everything; it is measured all the same, and the run says so. Brings the test environment up
// bare (bench/lib/env.ts).
//
//   npm run bench:list                             # 50,000 pods on 1,000 nodes (generated once: ~8 min)
//   npm run bench:list -- --quick                  # 2,000 pods on 40 nodes
//   npm run bench:list -- --pods 10000 --nodes 200 --reps 100 --full-reps 5
//   npm run bench:list -- --quick --generate-only  # only make sure the cluster exists
//   npm run bench:list -- --cleanup                # delete the generated pods and nodes afterwards
//   npm run bench:list -- --render                 # redraw list.md and list.svg from list.json
//
// The generated cluster stays in the test environment for the next run unless --cleanup is given;
// other users of a shared environment pay for 50,000 pods too (every Levee they start caches them).
import { readFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { Agent, request } from 'undici';
import { quietEnv } from './lib/env.ts';
import { startLevee, type LeveeProcess } from '../test/support/levee.ts';
import { agentFor } from '../test/support/http.ts';
import { allCpus, pinProcess, pinSelf, splitCpus } from '../test/support/cpus.ts';
import { startReplay } from './lib/replay.ts';
import { testenvPids } from './lib/watchproc.ts';
import { must, scannedGet, timedGet, type Scanned, type Timing } from './lib/client.ts';
import { etcdSize } from './lib/etcd.ts';
import { ensureCluster, random, removeCluster, type ClusterSize } from './lib/pods.ts';
import { metric, parseMetrics, type Sample } from './lib/prom.ts';
import { markdown, mb, memoryLine, ms, svg, table, TARGET_NAMES, type Checked, type ListReport, type Memory, type Mismatch, type Result, type TargetKey, type TargetResult } from './lib/report.ts';
import { summarize, quantile } from './lib/stats.ts';

const { values: flags } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    pods: { type: 'string' },
    nodes: { type: 'string' },
    namespaces: { type: 'string', default: '50' },
    apps: { type: 'string', default: '200' },
    reps: { type: 'string', default: '300' },
    'full-reps': { type: 'string', default: '10' },
    concurrency: { type: 'string', default: '48' },
    'sync-timeout': { type: 'string', default: '900' },
    'generate-only': { type: 'boolean', default: false },
    cleanup: { type: 'boolean', default: false },
    render: { type: 'boolean', default: false },
    // The client on half the CPUs, the servers measured (Levee, the replay server, the apiserver
    // and etcd while timed) on the other half, so the client's own CPU does not decide.
    pin: { type: 'boolean', default: true },
  },
});

const RESULTS = resolve(import.meta.dirname, 'results');

function writeResults(report: ListReport): void {
  mkdirSync(RESULTS, { recursive: true });
  writeFileSync(resolve(RESULTS, 'list.json'), JSON.stringify(report, null, 2) + '\n');
  writeFileSync(resolve(RESULTS, 'list.md'), markdown(report));
  writeFileSync(resolve(RESULTS, 'list.svg'), svg(report));
  console.log(table(report));
  console.log(`\nMemory: ${memoryLine(report)}.`);
}

if (flags.render) {
  // Redraw list.md and list.svg from the recorded list.json, measuring nothing.
  writeResults(JSON.parse(readFileSync(resolve(RESULTS, 'list.json'), 'utf8')) as ListReport);
  process.exit(0);
}

const size: ClusterSize = {
  pods: Number(flags.pods ?? (flags.quick ? 2000 : 50_000)),
  nodes: Number(flags.nodes ?? (flags.quick ? 40 : 1000)),
  namespaces: Number(flags.namespaces),
  apps: Number(flags.apps),
};
const REPS = Number(flags.reps);
const FULL_REPS = Number(flags['full-reps']);

const log = (line: string): void => console.error(`bench:list: ${line}`);
const env = await quietEnv();
const pinning = flags.pin ? splitCpus() : undefined;
if (pinning) pinSelf(pinning.client);
const token = env.tokens.admin;
const agent: Agent = agentFor(env.caFile);
// Generation gets its own pool: dozens of connections, closed before anything is timed.
const writer = new Agent({ connect: { ca: readFileSync(env.caFile) }, allowH2: false, connections: 64 });

// ---------------------------------------------------------------- cluster

const apiserverVersion = (JSON.parse((await must([200], agent, token, 'GET', `${env.server}/version`)).body) as { gitVersion: string }).gitVersion;
const generateOptions = { server: env.server, dispatcher: writer, token, size, concurrency: Number(flags.concurrency), log, etcd: env.etcd };
const { layout: cluster, generation } = await ensureCluster(generateOptions);
await writer.close();
const etcdAfterGeneration = await etcdSize(env.etcd);
log(`etcd: ${mb(etcdAfterGeneration.dbBytes)} MB database, ${mb(etcdAfterGeneration.dbInUseBytes)} MB in use, ${etcdAfterGeneration.keys ?? '?'} keys`);
log(`cluster ${cluster.id}: ${generation.podItems} pods, ${mb(generation.podBytes)} MB of pod JSON (${(generation.podBytes / generation.podItems / 1024).toFixed(1)} KiB each), ${generation.nodeItems} nodes`);
if (flags['generate-only']) {
  await agent.close();
  process.exit(0);
}

// ---------------------------------------------------------------- Levee

async function waitReady(levee: LeveeProcess, timeoutS: number): Promise<number> {
  const started = performance.now();
  for (;;) {
    try {
      const res = await request(`${levee.url.origin}/readyz`, { dispatcher: agent });
      await res.body.dump();
      if (res.statusCode === 200) return (performance.now() - started) / 1000;
    } catch {
      // not accepting yet
    }
    if (performance.now() - started > timeoutS * 1000) throw new Error(`levee not ready after ${timeoutS} s:\n${levee.output().slice(-3000)}`);
    await sleep(100);
  }
}

async function leveeMetrics(levee: LeveeProcess): Promise<Sample[]> {
  const res = await request(`${levee.url.origin}/metrics`, { dispatcher: agent });
  return parseMetrics(await res.body.text());
}

/** Memory a moment after a step, so that the step's own short-lived garbage has had a chance to go. */
async function settledMemory(levee: LeveeProcess): Promise<Memory> {
  await sleep(3000);
  const status = readFileSync(`/proc/${levee.pid}/status`, 'utf8');
  const kb = (field: string): number => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)![1]) * 1024;
  const m = await leveeMetrics(levee);
  return {
    rssBytes: kb('VmRSS'),
    peakRssBytes: kb('VmHWM'),
    heapUsedBytes: metric(m, 'nodejs_heap_size_used_bytes') ?? null,
    externalBytes: metric(m, 'nodejs_external_memory_bytes') ?? null,
  };
}

/**
 * Starts Levee with `cache` as its --cache list. A Levee that does not know --cache yet forwards
 * everything; it is measured as it is, and the run says so.
 */
async function startWithCache(cache: string): Promise<{ levee: LeveeProcess; cacheFlag: boolean }> {
  try {
    return { levee: await startLevee({ kubeconfig: env.kubeconfig, tls: env.leveeServing, extra: ['--cache', cache], cpus: pinning?.server, outputToFile: true }), cacheFlag: true };
  } catch (err) {
    if (!/cache/.test(String(err))) throw err;
    return { levee: await startLevee({ kubeconfig: env.kubeconfig, tls: env.leveeServing, cpus: pinning?.server, outputToFile: true }), cacheFlag: false };
  }
}

// The baseline: the same Levee with no cache (--cache ""), ready, having served nothing.
const baseline = (await startWithCache('')).levee;
await waitReady(baseline, 60);
const memBaseline = await settledMemory(baseline);
await baseline.stop();

const { levee, cacheFlag } = await startWithCache('pods,nodes');
if (!cacheFlag) log('this Levee does not accept --cache; measuring it as a forwarding gateway');
const rssAtStart = levee.rss();
const syncSeconds = await waitReady(levee, Number(flags['sync-timeout']));
const memSynced = await settledMemory(levee);
const rssBaseline = memBaseline.rssBytes;
const rssSynced = memSynced.rssBytes;
const synced = await leveeMetrics(levee);
const cacheObjects = { pods: metric(synced, 'levee_cache_objects', { resource: 'pods' }), nodes: metric(synced, 'levee_cache_objects', { resource: 'nodes' }) };
const cacheBytes = { pods: metric(synced, 'levee_cache_bytes', { resource: 'pods' }), nodes: metric(synced, 'levee_cache_bytes', { resource: 'nodes' }) };
const heldBytes = (cacheBytes.pods ?? 0) + (cacheBytes.nodes ?? 0);
log(`levee ${cacheFlag ? 'with --cache pods,nodes' : 'forwarding'}: ready after ${syncSeconds.toFixed(1)} s, RSS ${mb(rssSynced)} MB (baseline ${mb(rssBaseline)} MB), cache ${cacheObjects.pods ?? '-'} pods / ${mb(cacheBytes.pods)} MB`);

// ---------------------------------------------------------------- scenarios

interface Target {
  key: TargetKey;
  name: string;
  origin: string;
  rv0: boolean;
}
const targets: Target[] = [
  { key: 'apiserverRv0', name: TARGET_NAMES.apiserverRv0, origin: env.server, rv0: true },
  { key: 'apiserverConsistent', name: TARGET_NAMES.apiserverConsistent, origin: env.server, rv0: false },
  { key: 'leveeRv0', name: TARGET_NAMES.leveeRv0, origin: levee.url.origin, rv0: true },
];
const url = (t: Target, path: string): string => `${t.origin}${path}${t.rv0 ? `${path.includes('?') ? '&' : '?'}resourceVersion=0` : ''}`;

interface Query {
  path: string;
  /** What the generated layout says the answer holds, where the cluster cannot add to it. */
  expected?: number;
}
interface Scenario {
  key: string;
  name: string;
  reps: number;
  warmup: number;
  /** Also time a bare TLS server replaying Levee's answers (the answers are held in memory). */
  replay?: boolean;
  /** A GET of one object rather than a list. */
  single: boolean;
  /** Queries to check for equal answers. */
  checks: number;
  pick: () => Query;
}

/** Resolves once the apiserver answers /readyz with 200. */
async function apiserverReady(timeoutS = 180): Promise<void> {
  const started = performance.now();
  for (;;) {
    try {
      const res = await request(`${env.server}/readyz`, { dispatcher: agent, headers: { authorization: `Bearer ${token}` } });
      await res.body.dump();
      if (res.statusCode === 200) return;
    } catch {
      // restarting
    }
    if (performance.now() - started > timeoutS * 1000) throw new Error(`apiserver not ready after ${timeoutS} s`);
    await sleep(250);
  }
}

// The test environment is shared, and some tests stop and restart the apiserver. A round of
// requests that fails is dropped and done again once both servers are ready, a bounded number of
// times; the count is reported, since a restarted apiserver also starts with a cold watch cache.
const interruptions: { phase: string; error: string }[] = [];
async function survive<T>(phase: string, round: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await round();
    } catch (err) {
      interruptions.push({ phase, error: String(err).split('\n')[0]! });
      log(`${phase}: ${String(err).split('\n')[0]}; waiting for the apiserver and Levee, then repeating the round`);
      if (interruptions.length > 20) throw new Error('too many interrupted rounds', { cause: err });
      await apiserverReady();
      await waitReady(levee, Number(flags['sync-timeout']));
      await sleep(1000);
    }
  }
}

const rand = random(42);
const pickIndex = (n: number): number => Math.floor(rand() * n);
const scenarios: Scenario[] = [
  { key: 'list-all-pods', name: 'LIST all pods', reps: FULL_REPS, warmup: 2, single: false, checks: 2, pick: () => ({ path: '/api/v1/pods' }) },
  {
    key: 'list-pods-node',
    name: 'LIST pods of one node (fieldSelector)',
    reps: REPS,
    warmup: 30,
    replay: true,
    single: false,
    checks: 20,
    pick: () => {
      const n = pickIndex(cluster.nodes.length);
      return { path: `/api/v1/pods?fieldSelector=${encodeURIComponent(`spec.nodeName=${cluster.nodes[n]}`)}`, expected: cluster.podsPerNode[n]! };
    },
  },
  {
    key: 'list-pods-app',
    name: 'LIST pods of one app (labelSelector)',
    reps: REPS,
    warmup: 30,
    single: false,
    checks: 20,
    pick: () => {
      const a = cluster.apps[pickIndex(cluster.apps.length)]!;
      return { path: `/api/v1/pods?labelSelector=${encodeURIComponent(`app=${a.name}`)}`, expected: a.pods };
    },
  },
  {
    key: 'get-pod',
    name: 'GET one pod (random)',
    reps: REPS,
    warmup: 30,
    replay: true,
    single: true,
    checks: 20,
    pick: () => {
      const p = cluster.pods[pickIndex(cluster.pods.length)]!;
      return { path: `/api/v1/namespaces/${p.namespace}/pods/${p.name}`, expected: 1 };
    },
  },
  {
    // The same pod every time: what reading one object from the cache costs once Levee has
    // authorized this exact request (its access decisions are cached per object name, so a GET of
    // a new pod name also pays one access review upstream).
    key: 'get-same-pod',
    name: 'GET one pod (the same each time)',
    reps: REPS,
    warmup: 30,
    single: true,
    checks: 1,
    pick: () => {
      const p = cluster.pods[0]!;
      return { path: `/api/v1/namespaces/${p.namespace}/pods/${p.name}`, expected: 1 };
    },
  },
  { key: 'list-all-nodes', name: 'LIST all nodes', reps: Math.max(FULL_REPS, Math.round(REPS / 10)), warmup: 5, single: false, checks: 2, pick: () => ({ path: '/api/v1/nodes' }) },
];

// ---------------------------------------------------------------- equal answers

const mismatches: Mismatch[] = [];
const warnings: string[] = [];
const verification: Checked[] = [];

async function answers(s: Scenario, q: Query): Promise<Record<TargetKey, Scanned>> {
  const out = {} as Record<TargetKey, Scanned>;
  for (const t of targets) out[t.key] = await scannedGet(url(t, q.path), agent, token, s.single);
  return out;
}
const same = (a: Record<TargetKey, Scanned>): boolean =>
  targets.every((t) => a[t.key].items === a.apiserverRv0.items && a[t.key].status === a.apiserverRv0.status);

log('checking that every target gives the same answers');
for (const s of scenarios) {
  let bad = 0;
  let last: Record<TargetKey, Scanned> | undefined;
  for (let i = 0; i < s.checks; i++) {
    const q = s.pick();
    let a = await survive(`check ${s.name}`, () => answers(s, q));
    // Other tests may be writing pods into the shared cluster: ask once more before calling a
    // difference a mismatch.
    if (!same(a)) {
      await sleep(500);
      a = await survive(`check ${s.name}`, () => answers(s, q));
    }
    last = a;
    if (!same(a)) {
      bad++;
      const m: Mismatch = { scenario: s.name, path: q.path, items: pick(a, 'items'), status: pick(a, 'status') };
      if (q.expected !== undefined) m.expected = q.expected;
      mismatches.push(m);
      console.error(`MISMATCH ${s.name} ${q.path}: ${JSON.stringify(m.items)} (HTTP ${JSON.stringify(m.status)})`);
    } else if (q.expected !== undefined && a.apiserverRv0.items !== q.expected) {
      warnings.push(`${s.name} ${q.path}: all targets answered ${a.apiserverRv0.items}, the layout says ${q.expected}`);
    }
  }
  verification.push({ scenario: s.name, checked: s.checks, mismatches: bad, items: pick(last!, 'items'), bodyBytes: pick(last!, 'bytes') });
}
for (const w of warnings) log(`warning: ${w}`);

function pick<K extends keyof Scanned>(a: Record<TargetKey, Scanned>, k: K): Record<TargetKey, Scanned[K]> {
  return Object.fromEntries(targets.map((t) => [t.key, a[t.key][k]])) as Record<TargetKey, Scanned[K]>;
}

// ---------------------------------------------------------------- timing

// The replay server (bench/lib/replay.ts): its own process, Levee's serving certificate, HTTP/1.1
// as the client speaks it, and for each path the bytes Levee answered, sent with one write.
// Nothing is looked up, authorized or encoded.
const replay = await startReplay(env.leveeServing, pinning?.server);
const replayOrigin = replay.origin;
const replayed = new Set<string>();

// While timed, the apiserver and etcd run on the server's CPUs too: every server measured gets the
// same cores. They are given the whole machine back afterwards (and if this run is interrupted).
const upstreamPids = pinning ? Object.values(testenvPids()).filter((p) => p !== null) : [];
const unpinUpstream = (): void => {
  for (const pid of upstreamPids) {
    try {
      pinProcess(pid, allCpus());
    } catch {
      // gone
    }
  }
};
if (pinning) {
  for (const pid of upstreamPids) pinProcess(pid, pinning.server);
  process.once('exit', unpinUpstream);
  log(`pinned: client on CPU ${pinning.client}; Levee, the replay server, the apiserver and etcd on CPU ${pinning.server}`);
}

/** Every order of n targets (n! of them; n is at most 4 here). */
function orders(n: number): number[][] {
  const all: number[][] = [];
  const permute = (prefix: number[], rest: number[]): void => {
    if (rest.length === 0) all.push(prefix);
    for (const x of rest) permute([...prefix, x], rest.filter((y) => y !== x));
  };
  permute([], Array.from({ length: n }, (_, k) => k));
  return all;
}

/** The path and query Levee is asked for `q`; the replay server answers the same. */
const leveePath = (q: Query): string => url(targets.find((t) => t.key === 'leveeRv0')!, q.path).slice(levee.url.origin.length);

async function bodyOf(u: string): Promise<Buffer> {
  const res = await request(u, { dispatcher: agent, headers: { authorization: `Bearer ${token}`, accept: 'application/json' } });
  const chunks: Buffer[] = [];
  for await (const c of res.body) chunks.push(c as Buffer);
  if (res.statusCode !== 200) throw new Error(`GET ${u}: HTTP ${res.statusCode}`);
  return Buffer.concat(chunks);
}

const before = await leveeMetrics(levee);
const results: Result[] = [];
for (const s of scenarios) {
  const samples: Record<TargetKey, Timing[]> = { apiserverRv0: [], apiserverConsistent: [], leveeRv0: [] };
  const replayedTimings: Timing[] = [];
  const started = performance.now();
  // The queries are drawn first (in the order the rounds would draw them), so that the replay
  // server holds Levee's answer to each before any is timed.
  const queries = Array.from({ length: s.warmup + s.reps }, () => s.pick());
  if (s.replay) {
    await replay.clear();
    replayed.clear();
    for (const q of queries) {
      const path = leveePath(q);
      if (replayed.has(path)) continue;
      await replay.store(path, await survive(s.name, () => bodyOf(levee.url.origin + path)));
      replayed.add(path);
    }
  }
  const order = orders(targets.length + (s.replay ? 1 : 0));
  for (let i = 0; i < s.warmup + s.reps; i++) {
    const q = queries[i]!;
    // Each round in another order, every order in turn: none always meets caches the others just
    // warmed, and none always follows the same target. A rotation kept each target's predecessor
    // fixed (Levee always right after the apiserver's consistent read, whose etcd and Go runtime
    // work still ran on the shared CPU, and the replay server always right after Levee).
    const round = await survive(s.name, async () => {
      const got: [TargetKey | 'replay', Timing][] = [];
      for (const j of order[i % order.length]!) {
        if (j === targets.length) {
          got.push(['replay', await timedGet(replayOrigin + leveePath(q), agent, token)]);
          continue;
        }
        const t = targets[j]!;
        got.push([t.key, await timedGet(url(t, q.path), agent, token)]);
      }
      return got;
    });
    if (i >= s.warmup) for (const [key, r] of round) (key === 'replay' ? replayedTimings : samples[key]).push(r);
  }
  const per = Object.fromEntries(
    targets.map((t) => {
      const xs = samples[t.key];
      return [t.key, { ...summarize(xs.map((x) => x.ms)), ttfbP50Ms: quantile(xs.map((x) => x.ttfbMs), 0.5), meanBytes: xs.reduce((a, x) => a + x.bytes, 0) / xs.length }];
    }),
  ) as Record<TargetKey, TargetResult>;
  const r: Result = {
    scenario: s.name,
    key: s.key,
    requests: s.reps,
    targets: per,
    ratioP50: { apiserverRv0: per.apiserverRv0.p50Ms / per.leveeRv0.p50Ms, apiserverConsistent: per.apiserverConsistent.p50Ms / per.leveeRv0.p50Ms },
  };
  if (s.replay) {
    const sum = summarize(replayedTimings.map((x) => x.ms));
    r.replay = { ...sum, ceilingP50: per.apiserverRv0.p50Ms / sum.p50Ms, leveeOverReplayP50: per.leveeRv0.p50Ms / sum.p50Ms };
  }
  results.push(r);
  log(`${s.name}: p50 ${targets.map((t) => `${t.name} ${ms(per[t.key].p50Ms)}`).join(', ')}${r.replay ? `, replay ${ms(r.replay.p50Ms)}` : ''} ms (${((performance.now() - started) / 1000).toFixed(0)} s)`);
}
await replay.stop();
unpinUpstream();
const after = await leveeMetrics(levee);
const answered = (source: string): number =>
  (metric(after, 'levee_request_total', { source }) ?? 0) - (metric(before, 'levee_request_total', { source }) ?? 0);
const leveeAnswers = { cache: answered('cache'), upstream: answered('upstream') };
const forwardedReasons = Object.fromEntries(
  [...new Set(after.filter((x) => x.name === 'levee_read_forwarded_total').map((x) => x.labels['reason'] ?? ''))].map((reason) => [
    reason,
    (metric(after, 'levee_read_forwarded_total', { reason }) ?? 0) - (metric(before, 'levee_read_forwarded_total', { reason }) ?? 0),
  ]),
);
const rssAfter = levee.rss();
await levee.stop();

// ---------------------------------------------------------------- environment

function apiserverRss(): number | null {
  try {
    const state = JSON.parse(readFileSync(resolve(import.meta.dirname, '../.testenv/state.json'), 'utf8')) as { apiserver: { pid: number } };
    return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${state.apiserver.pid}/status`, 'utf8'))![1]) * 1024;
  } catch {
    return null;
  }
}

const report: ListReport = {
  benchmark: 'list',
  date: new Date().toISOString(),
  environment: {
    node: process.version,
    apiserver: apiserverVersion,
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    memoryBytes: totalmem(),
    apiserverRssBytes: apiserverRss(),
    etcd: await etcdSize(env.etcd),
    client: 'undici, one keep-alive connection per server, TLS, HTTP/1.1, JSON, uncompressed, one request at a time',
    pinning: pinning ?? null,
  },
  cluster: {
    id: cluster.id,
    ...size,
    reused: generation.reused,
    generationSeconds: generation.seconds,
    podItems: generation.podItems,
    podBytes: generation.podBytes,
    podBytesPerItem: generation.podBytes / generation.podItems,
    nodeItems: generation.nodeItems,
    nodeBytes: generation.nodeBytes,
    etcdAfterGeneration,
  },
  levee: {
    cacheFlag,
    mode: cacheFlag ? '--cache pods,nodes' : 'forwarding (no --cache in this build)',
    readySeconds: syncSeconds,
    rssBaselineBytes: rssBaseline,
    rssAtStartBytes: rssAtStart,
    rssSyncedBytes: rssSynced,
    rssAfterBytes: rssAfter,
    memoryBaseline: memBaseline,
    memorySynced: memSynced,
    cacheObjects,
    cacheBytes,
    rssPerCachedByte: heldBytes > 0 ? (rssSynced - rssBaseline) / heldBytes : null,
    heapPerCachedByte:
      heldBytes > 0 && memSynced.heapUsedBytes !== null && memBaseline.heapUsedBytes !== null
        ? (memSynced.heapUsedBytes + (memSynced.externalBytes ?? 0) - memBaseline.heapUsedBytes - (memBaseline.externalBytes ?? 0)) / heldBytes
        : null,
    answersDuringMeasurement: leveeAnswers,
    forwardedDuringMeasurement: forwardedReasons,
  },
  interruptions,
  verification: { mismatches, warnings, perScenario: verification },
  results,
};

// ---------------------------------------------------------------- output

writeResults(report);

if (flags.cleanup) {
  log(`deleting generated cluster ${cluster.id}`);
  await removeCluster({ ...generateOptions, dispatcher: agent });
}
await agent.close();
if (mismatches.length > 0) {
  log(`${mismatches.length} queries got different answers from the apiserver and Levee`);
  process.exitCode = 1;
}

