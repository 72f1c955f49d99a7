// Watch fan-out: N concurrent per-node pod watches, as a DaemonSet's agents open them, on the
// apiserver directly and through Levee (--cache pods), in one run, under a steady rate of pod
// updates. Measured for each target:
//   - delivery latency: the updater stamps each PATCH with its send time (an annotation), and a
//     watcher subtracts it from the arrival time of the event; updater and watchers are this one
//     process, so the clocks agree. One more watch, always on the apiserver directly, sees every
//     update in both phases: its arrival time splits each delivery into what the apiserver took
//     (the same for both targets) and what the path to the watcher added. A second one over
//     HTTP/1.1, as Levee watches its upstream, checks that the apiserver delivers to such a watch
//     no later than to the reference;
//   - memory per watcher: the serving process's RSS (and heap) with N idle watches minus without;
//   - CPU of Levee, the apiserver, etcd and the whole machine (from /proc) during the updates;
//   - upstream watches: apiserver_longrunning_requests{verb="WATCH",resource="pods"} sampled
//     before the run, with N direct watches, with Levee idle and with N watches through Levee.
//
// The targets run one after the other, not interleaved: first every watch on the apiserver (Levee
// not running), then Levee is started and every watch goes through it. CPU and memory can only be
// told apart while one target alone carries the watches, and on a small shared machine two fleets
// of watchers at once would slow each other's deliveries. The apiserver goes first so that
// Levee's cache sync and its upstream watch are not part of the apiserver's measurement.
//
// The watches are HTTP/2 streams, 100 per connection (what both servers allow), so 10,000 watches
// take 100 connections. The pods come from the generated cluster of bench/lib/pods.ts (realistic
// pods, ~11 KiB each): an existing generated cluster with enough nodes is reused as it is, else
// one of about five pods per watched node is generated. Brings the test environment up bare
// (bench/lib/env.ts).
//
//   npm run bench:watch                         # quick: 500 watchers, 50 nodes, 100 updates/s, 20 s
//   npm run bench:watch -- --full               # 10,000 watchers, 1,000 nodes, 100 updates/s, 60 s
//   npm run bench:watch -- --watchers 2000 --nodes 200 --rate 50 --seconds 30
//   npm run bench:watch -- --render             # redraw watch.md and watch.svg from watch.json
//   npm run bench:watch -- --cleanup            # delete the generated pods and nodes afterwards
//   npm run bench:watch -- --no-pin             # every process shares every CPU
//
// Pinned by default (taskset): the server under test has half the CPUs, the apiserver and etcd when
// watched directly, Levee when watched through it; this process (the watchers and the updater) has
// the other half to itself in both phases. During Levee's phase the apiserver and etcd share
// Levee's half under SCHED_IDLE, running whenever Levee does not: a gateway is deployed apart from
// the apiserver it relieves and from its clients, and two CPUs leave no third place for them. When
// they shared the client's half instead, the client waited for them (run-queue wait 416 ms per s,
// event-loop delay p99 21.4 ms against 12.6 ms in the direct phase) and the added p99 measured that
// wait: 25.5 ms, against 6.1 and 16.3 ms in two runs with them beside Levee (10,000 watchers; the
// client's event-loop delay p99 there 16.1 and 13.6 ms through Levee, 16.7 and 19.8 ms direct). On
// shared CPUs a delivery through Levee, one hop later than the reference's, waited for a CPU: at
// 10,000 watchers and 100 updates/s its threads spent 1.5–1.8 s of the 55 s runnable but not
// running (their schedstat), in stalls of 7–20 ms in which they used 0.2 s of CPU, behind the
// apiserver, this process, and its own collector's helper threads (docs/design.md §5). The direct
// phase is measured the same way: its watchers and the reference are the one apiserver's.
//
// npm runs this process with the heap flags Levee runs with (src/nodeflags.ts explains them),
// because its own collector stalled its timestamps. Without them V8 kept the old generation's
// limit just above the live heap and finished a full collection every 0.6–1 s of the phases
// (128 in one run, 22 with the flags), with incremental marking steps of up to 16–31 ms on this
// thread. A stall that began between the reference's event and Levee's deliveries of it was
// counted as Levee's: of the top 1 % of added latencies, 198 of 549 arose after Levee had
// already written the event without the flags, 53 with them (one run each). The client's
// event-loop delay p99 went from 9–16 ms in six runs to 6.0 ms in one (at a 5 ms resolution), and
// the direct phase's added p99 from 1.1–1.9 ms in four runs to 0.73 ms.
//
// The generated cluster stays in the test environment for the next run unless --cleanup is given.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { resolve } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { Agent, request } from 'undici';
import { quietEnv } from './lib/env.ts';
import { startLevee, type LeveeProcess } from '../test/support/levee.ts';
import { pinProcess, pinSelf, setIdlePolicy, splitCpus, unpinProcesses } from '../test/support/cpus.ts';
import { call, must } from './lib/client.ts';
import { CLUSTER_LABEL, clusterId, ensureCluster, removeCluster, type ClusterSize, type Generation, type Layout } from './lib/pods.ts';
import { metric, parseMetrics, type Sample } from './lib/prom.ts';
import type { Summary } from './lib/stats.ts';
import { WatchFanout } from './lib/watchclient.ts';
import { runLoad, type UpdatePod } from './lib/watchload.ts';
import { CpuWindow, cpuSeconds, machineCpuSeconds, openFiles, rssBytes, testenvPids } from './lib/watchproc.ts';
import { markdown, others, svg, table, TARGET_NAMES, type PhaseResult, type TargetKey, type WatchReport, type WatchResults } from './lib/watchreport.ts';

const { values: flags } = parseArgs({
  options: {
    full: { type: 'boolean', default: false },
    quick: { type: 'boolean', default: false },
    watchers: { type: 'string' },
    nodes: { type: 'string' },
    rate: { type: 'string' },
    seconds: { type: 'string' },
    warmup: { type: 'string' },
    settle: { type: 'string' },
    'pods-per-node': { type: 'string', default: '5' },
    'streams-per-session': { type: 'string', default: '100' },
    'max-in-flight': { type: 'string', default: '64' },
    render: { type: 'boolean', default: false },
    cleanup: { type: 'boolean', default: false },
    pin: { type: 'boolean', default: true },
  },
  allowNegative: true,
});

const RESULTS = resolve(import.meta.dirname, 'results');
const RESULTS_JSON = resolve(RESULTS, 'watch.json');

function writeResults(all: WatchResults, latest?: WatchReport): void {
  mkdirSync(RESULTS, { recursive: true });
  writeFileSync(RESULTS_JSON, JSON.stringify(all, null, 2) + '\n');
  writeFileSync(resolve(RESULTS, 'watch.md'), markdown(all));
  writeFileSync(resolve(RESULTS, 'watch.svg'), svg(all));
  if (latest) console.log(table(latest));
}

function readResults(): WatchResults {
  if (!existsSync(RESULTS_JSON)) return { benchmark: 'watch', runs: {} };
  return JSON.parse(readFileSync(RESULTS_JSON, 'utf8')) as WatchResults;
}

if (flags.render) {
  writeResults(readResults());
  process.exit(0);
}
if (flags.full && flags.quick) throw new Error('--full and --quick exclude each other');

const FULL = flags.full;
const WATCHERS = Number(flags.watchers ?? (FULL ? 10_000 : 500));
const NODES = Number(flags.nodes ?? (FULL ? 1000 : 50));
const RATE = Number(flags.rate ?? 100);
const SECONDS = Number(flags.seconds ?? (FULL ? 60 : 20));
const WARMUP = Number(flags.warmup ?? (FULL ? 5 : 2));
const SETTLE = Number(flags.settle ?? (FULL ? 10 : 5));
const PODS_PER_NODE = Number(flags['pods-per-node']);
const STREAMS_PER_SESSION = Number(flags['streams-per-session']);
const MAX_IN_FLIGHT = Number(flags['max-in-flight']);
if (![WATCHERS, NODES, RATE, SECONDS, WARMUP, SETTLE, PODS_PER_NODE, STREAMS_PER_SESSION].every((x) => Number.isFinite(x) && x >= 0) || NODES < 1 || WATCHERS < 1) {
  throw new Error('--watchers, --nodes, --rate, --seconds, --warmup, --settle, --pods-per-node and --streams-per-session take positive numbers');
}
if (WARMUP >= SECONDS) throw new Error('--warmup must be shorter than --seconds');
const overridden = ['watchers', 'nodes', 'rate', 'seconds'].some((k) => flags[k as keyof typeof flags] !== undefined);
const PINNING = flags.pin ? splitCpus() : undefined;
const MODE = `${overridden ? `custom-w${WATCHERS}-n${NODES}-r${RATE}-s${SECONDS}` : FULL ? 'full' : 'quick'}${PINNING ? '' : '-shared'}`;

const log = (line: string): void => console.error(`bench:watch: ${line}`);
const env = await quietEnv();
const token = env.tokens.admin;
const ca = readFileSync(env.caFile);
const agent = new Agent({ connect: { ca }, allowH2: false });
// The updater's own pool: enough connections that a slow PATCH does not hold up the next ones.
const writer = new Agent({ connect: { ca }, allowH2: false, connections: 32 });

// ---------------------------------------------------------------- cluster

// bench/lib/pods.ts keeps one generated cluster and deletes the others when it generates one.
// A cluster left by another benchmark (bench:list's 50,000 pods) serves here as well when it has
// enough nodes, so it is reused rather than replaced: its markers (ConfigMaps in levee-bench,
// named by clusterId) say which sizes exist.
const MARKER_NAMESPACE = 'levee-bench';

async function chooseCluster(): Promise<{ layout: Layout; generation: Generation }> {
  const own: ClusterSize = { pods: NODES * PODS_PER_NODE, nodes: NODES, namespaces: 10, apps: 100 };
  const markers = await call(agent, token, 'GET', `${env.server}/api/v1/namespaces/${MARKER_NAMESPACE}/configmaps?labelSelector=${encodeURIComponent(CLUSTER_LABEL)}`);
  const existing: ClusterSize[] = [];
  if (markers.status === 200) {
    for (const item of (JSON.parse(markers.body) as { items: { metadata: { name: string } }[] }).items) {
      const m = /-p(\d+)-n(\d+)-ns(\d+)-a(\d+)$/.exec(item.metadata.name);
      if (!m) continue;
      const size: ClusterSize = { pods: Number(m[1]), nodes: Number(m[2]), namespaces: Number(m[3]), apps: Number(m[4]) };
      // Same layout version (the id would differ otherwise), enough nodes, at least a pod per node.
      if (clusterId(size) === item.metadata.name && size.nodes >= NODES && size.pods >= size.nodes) existing.push(size);
    }
  }
  existing.sort((a, b) => a.pods - b.pods);
  const size = existing[0] ?? own;
  return ensureCluster(generateOptions(size));
}

function generateOptions(size: ClusterSize): Parameters<typeof ensureCluster>[0] {
  return { server: env.server, dispatcher: writer, token, size, concurrency: 32, log, etcd: env.etcd };
}

const apiserverVersion = (JSON.parse((await must([200], agent, token, 'GET', `${env.server}/version`)).body) as { gitVersion: string }).gitVersion;
const { layout: cluster, generation } = await chooseCluster();
const watchedNodes = cluster.nodes.slice(0, NODES);
const podsByNode: UpdatePod[][] = watchedNodes.map(() => []);
for (const p of cluster.pods) if (p.node < NODES) podsByNode[p.node]!.push({ namespace: p.namespace, name: p.name, node: p.node });
const watcherNode = (w: number): number => w % NODES;
const watchersPerNode = watchedNodes.map((_, n) => Math.floor(WATCHERS / NODES) + (n < WATCHERS % NODES ? 1 : 0));
const nodesWithPods = podsByNode.filter((p) => p.length > 0).length;
log(
  `cluster ${cluster.id}${generation.reused ? ' (reused)' : ''}: ${generation.podItems} pods; ${WATCHERS} watchers on ${NODES} nodes, ` +
    `${nodesWithPods} of which have pods (${podsByNode.reduce((a, p) => a + p.length, 0)} pods)`,
);

// ---------------------------------------------------------------- pinning

// Pinned only now: generating the cluster is no part of the measurement. The apiserver and etcd
// are pinned at each phase (the server under test in the first, idle beside Levee in the second;
// a phase repeated after a restart meets a new apiserver) and given every CPU and their normal
// policy back when the benchmark ends, as the test environment outlives it.
function pinUpstream(target: TargetKey): void {
  if (!PINNING) return;
  for (const pid of Object.values(testenvPids())) {
    if (pid === null) continue;
    pinProcess(pid, PINNING.server);
    setIdlePolicy(pid, target !== 'apiserver');
  }
}
function releaseUpstream(): void {
  const pids = Object.values(testenvPids()).filter((p) => p !== null);
  unpinProcesses(pids);
  for (const pid of pids) {
    try {
      setIdlePolicy(pid, false);
    } catch {
      // gone
    }
  }
}
if (PINNING) {
  pinSelf(PINNING.client);
  process.once('exit', releaseUpstream);
  // 'exit' does not run on a signal by default: stopped with ^C, the environment is given back too.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));
  log(`pinned: the server under test on CPU ${PINNING.server} (the apiserver and etcd, then Levee, with them idle beside it); the watchers and the updater on CPU ${PINNING.client}`);
}

// ---------------------------------------------------------------- measurements

async function scrape(url: string, auth: boolean): Promise<Sample[]> {
  const res = await request(url, { dispatcher: agent, headers: auth ? { authorization: `Bearer ${token}` } : {} });
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`GET ${url}: HTTP ${res.statusCode}`);
  return parseMetrics(text);
}

/**
 * Pod watches open on the apiserver now, by its own gauge. Other users of the shared environment
 * open and close watches too, so this is the median of three samples a moment apart.
 */
async function podWatchGauge(): Promise<number | null> {
  const xs: number[] = [];
  for (let i = 0; i < 3; i++) {
    try {
      const v = metric(await scrape(`${env.server}/metrics`, true), 'apiserver_longrunning_requests', { verb: 'WATCH', group: '', resource: 'pods' });
      if (v !== undefined) xs.push(v);
    } catch {
      // counted as missing
    }
    if (i < 2) await sleep(300);
  }
  xs.sort((a, b) => a - b);
  return xs.length === 0 ? null : xs[Math.floor(xs.length / 2)]!;
}

/** Waits (up to 15 s) for the gauge to fall back to `target` once the direct watches are closed. */
async function podWatchGaugeBackTo(target: number | null): Promise<number | null> {
  const deadline = performance.now() + 15_000;
  for (;;) {
    const v = await podWatchGauge();
    if (v === null || target === null || v <= target || performance.now() > deadline) return v;
    await sleep(500);
  }
}

/** SelfSubjectAccessReviews the apiserver has answered so far (Levee authorizes cache reads with them). */
async function accessReviews(): Promise<number | null> {
  try {
    return metric(await scrape(`${env.server}/metrics`, true), 'apiserver_request_total', { verb: 'POST', resource: 'selfsubjectaccessreviews' }) ?? 0;
  } catch {
    return null;
  }
}

async function leveeMetrics(levee: LeveeProcess): Promise<Sample[]> {
  return scrape(`${levee.url.origin}/metrics`, false);
}

/**
 * The serving process's heap by its own metrics. Levee: V8 heap used + external (garbage included:
 * a Node process cannot be made to collect from outside). The apiserver: its live Go heap right
 * after a collection, which its profiling endpoint forces (/debug/pprof/heap?gc=1, on by default,
 * admin only), plus goroutine stacks; without that the heap numbers of a busy Go process move by
 * hundreds of MB with its garbage.
 */
async function heapBytes(t: Target): Promise<number | null> {
  try {
    if (t.levee) {
      const m = await leveeMetrics(t.levee);
      const used = metric(m, 'nodejs_heap_size_used_bytes');
      return used === undefined ? null : used + (metric(m, 'nodejs_external_memory_bytes') ?? 0);
    }
    const gc = await request(`${env.server}/debug/pprof/heap?gc=1`, { dispatcher: agent, headers: { authorization: `Bearer ${token}` } });
    await gc.body.dump({ limit: Infinity });
    if (gc.statusCode !== 200) return null;
    const m = await scrape(`${env.server}/metrics`, true);
    const heap = metric(m, 'go_memstats_heap_alloc_bytes');
    return heap === undefined ? null : heap + (metric(m, 'go_memstats_stack_inuse_bytes') ?? 0);
  } catch {
    return null;
  }
}

interface RuntimeSample {
  levee: Sample[] | null;
  apiserver: Sample[] | null;
}

/** The metrics of the serving processes' runtimes (garbage collection, event loop) at one moment. */
async function runtimeSample(t: Target): Promise<RuntimeSample> {
  const get = async (f: () => Promise<Sample[]>): Promise<Sample[] | null> => {
    try {
      return await f();
    } catch {
      return null;
    }
  };
  return {
    levee: t.levee ? await get(() => leveeMetrics(t.levee!)) : null,
    apiserver: await get(() => scrape(`${env.server}/metrics`, true)),
  };
}

function runtimeDelta(before: RuntimeSample, after: RuntimeSample): PhaseResult['runtime'] {
  const delta = (name: string, which: 'levee' | 'apiserver', match: Record<string, string> = {}): number | null => {
    const a = before[which];
    const b = after[which];
    if (!a || !b) return null;
    const x = metric(a, name, match);
    const y = metric(b, name, match);
    return x === undefined || y === undefined ? null : y - x;
  };
  const gauge = (name: string): number | null => (after.levee ? (metric(after.levee, name) ?? null) : null);
  const leveeGc: Record<string, number> = {};
  for (const kind of ['major', 'minor', 'incremental', 'weakcb']) {
    const d = delta('nodejs_gc_duration_seconds_sum', 'levee', { kind });
    if (d !== null) leveeGc[kind] = d;
  }
  const lagP99 = gauge('nodejs_eventloop_lag_p99_seconds');
  const lagMax = gauge('nodejs_eventloop_lag_max_seconds');
  return {
    leveeEventLoopP99Ms: lagP99 === null ? null : lagP99 * 1000,
    leveeEventLoopMaxMs: lagMax === null ? null : lagMax * 1000,
    leveeGcSeconds: after.levee ? leveeGc : null,
    apiserverGcPauseSeconds: delta('go_gc_duration_seconds_sum', 'apiserver'),
    apiserverGcCycles: delta('go_gc_duration_seconds_count', 'apiserver'),
  };
}

/** The commit Levee ran from, marked when src/ had uncommitted changes: the code under test moves. */
function leveeCommit(): string | null {
  try {
    const git = (...args: string[]): string => execFileSync('git', args, { cwd: resolve(import.meta.dirname, '..'), encoding: 'utf8' }).trim();
    return `${git('rev-parse', '--short', 'HEAD')}${git('status', '--porcelain', '--', 'src') === '' ? '' : ' with uncommitted changes in src/'}`;
  } catch {
    return null;
  }
}

async function currentResourceVersion(origin: string): Promise<string> {
  // What an informer does before it watches: a LIST, whose resourceVersion the watch starts from.
  const a = await must([200], agent, token, 'GET', `${origin}/api/v1/pods?limit=1`);
  return (JSON.parse(a.body) as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
}

async function waitUntil(what: string, url: string, auth: boolean, timeoutS: number): Promise<number> {
  const started = performance.now();
  for (;;) {
    try {
      const res = await request(url, { dispatcher: agent, headers: auth ? { authorization: `Bearer ${token}` } : {} });
      await res.body.dump();
      if (res.statusCode === 200) return (performance.now() - started) / 1000;
    } catch {
      // not accepting yet
    }
    if (performance.now() - started > timeoutS * 1000) throw new Error(`${what} not ready after ${timeoutS} s`);
    await sleep(200);
  }
}

/** Nearest-rank summary like bench/lib/stats.ts, on a typed array: full runs have 100,000s of samples. */
function latencySummary(xs: Float64Array): Summary | null {
  if (xs.length === 0) return null;
  const s = Float64Array.from(xs).sort();
  const q = (p: number): number => s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
  return { n: s.length, p50Ms: q(0.5), p99Ms: q(0.99), meanMs: s.reduce((a, b) => a + b, 0) / s.length, minMs: s[0]!, maxMs: s[s.length - 1]! };
}

function quantileOf(xs: number[], q: number): number {
  const s = Float64Array.from(xs).sort();
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
}

// ---------------------------------------------------------------- one target

/** The watches the benchmark keeps on the apiserver directly in each phase (runPhase). */
const REFERENCE_WATCHES = 2;

/** Sequence numbers stay unique over the run, so a late event of one phase cannot count in another. */
let nextSeq = 0;

interface Target {
  key: TargetKey;
  origin: string;
  /** The process whose memory per watcher is measured. */
  servingPid: () => number | null;
  servingName: string;
  levee?: LeveeProcess;
}

class Disturbed extends Error {}

async function runPhase(t: Target, attempts: number): Promise<PhaseResult> {
  pinUpstream(t.key);
  const rv = await currentResourceVersion(t.origin);
  const path = (node: string): string =>
    `/api/v1/pods?watch=true&fieldSelector=${encodeURIComponent(`spec.nodeName=${node}`)}&resourceVersion=${rv}&allowWatchBookmarks=true`;

  // Sampled before the reference watch opens; the sample with the watchers open leaves it out.
  const gaugeBefore = await podWatchGauge();
  // The reference: a watch on the apiserver directly, the same in both phases. A second one over
  // HTTP/1.1, as Levee's reflector watches, shows whether the apiserver delivers an event to such a
  // watch later than to the reference: if it did, Levee's upstream watch would be late by as much,
  // and that would be counted as Levee's. Both watch every pod of the cluster, as Levee's upstream
  // watch does, so the apiserver's cacher dispatches all three alike.
  const reference = new Map<number, number>();
  const secondReference = new Map<number, number>();
  const referencePath = `/api/v1/pods?watch=true&labelSelector=${encodeURIComponent(`${CLUSTER_LABEL}=${cluster.id}`)}&resourceVersion=${rv}&allowWatchBookmarks=true`;
  const referenceFanout = await WatchFanout.open({
    origin: env.server,
    ca,
    token,
    paths: [referencePath],
    streamsPerSession: 1,
    onEvent: (seq, _sentMs, receivedMs) => {
      if (!reference.has(seq)) reference.set(seq, receivedMs);
    },
  });
  const secondFanout = await WatchFanout.open({
    origin: env.server,
    ca,
    token,
    paths: [referencePath],
    streamsPerSession: 1,
    http1: true,
    onEvent: (seq, _sentMs, receivedMs) => {
      if (!secondReference.has(seq)) secondReference.set(seq, receivedMs);
    },
  });
  try {
    return await fleet(t, attempts, rv, path, reference, secondReference, referenceFanout, gaugeBefore);
  } finally {
    await referenceFanout.close();
    await secondFanout.close();
  }
}

async function fleet(
  t: Target,
  attempts: number,
  rv: string,
  path: (node: string) => string,
  reference: Map<number, number>,
  secondReference: Map<number, number>,
  referenceFanout: WatchFanout,
  gaugeBefore: number | null,
): Promise<PhaseResult> {
  const apiserverAtStart = testenvPids().apiserver;
  // What each update is, and what arrived of it.
  const sent = new Map<number, { node: number; sentMs: number }>();
  const received = new Map<number, number>();
  const latencies: number[] = [];
  const latencySeqs: number[] = [];
  let foreign = 0;
  const onEvent = (seq: number, sentMs: number, receivedMs: number): void => {
    if (!sent.has(seq)) {
      foreign++;
      return;
    }
    received.set(seq, (received.get(seq) ?? 0) + 1);
    latencies.push(receivedMs - sentMs);
    latencySeqs.push(seq);
  };

  const pidNone = t.servingPid();
  const rssNone = pidNone === null ? null : rssBytes(pidNone);
  const heapNone = await heapBytes(t);
  const filesNone = pidNone === null ? null : openFiles(pidNone);

  log(`${TARGET_NAMES[t.key]}: opening ${WATCHERS} watches from resourceVersion ${rv}`);
  const reviewsBefore = await accessReviews();
  const fanout = await WatchFanout.open({
    origin: t.origin,
    ca,
    token,
    paths: Array.from({ length: WATCHERS }, (_, w) => path(watchedNodes[watcherNode(w)]!)),
    streamsPerSession: STREAMS_PER_SESSION,
    onEvent: (seq, sentMs, receivedMs) => onEvent(seq, sentMs, receivedMs),
    timeoutMs: Math.max(120_000, WATCHERS * 30),
  });
  try {
    const filesOpened = pidNone === null ? null : openFiles(pidNone);
    const reviewsAfter = await accessReviews();
    log(`${TARGET_NAMES[t.key]}: ${WATCHERS} watches on ${fanout.sessions} HTTP/2 connections in ${(fanout.establishMs / 1000).toFixed(2)} s; idle for ${SETTLE} s`);
    // Idle CPU over the second half only: the first carries the aftermath of opening (Levee's
    // upstream connections for access reviews time out and close then).
    await sleep((SETTLE * 1000) / 2);
    const idlePids = testenvPids();
    const idleWindow = new CpuWindow({ apiserver: idlePids.apiserver, etcd: idlePids.etcd, levee: t.levee?.pid ?? null });
    await sleep((SETTLE * 1000) / 2);
    const idleCpu = idleWindow.stop();
    const pidIdle = t.servingPid();
    const rssWatchers = pidIdle === null ? null : rssBytes(pidIdle);
    const heapWatchers = await heapBytes(t);
    const filesIdle = pidIdle === null ? null : openFiles(pidIdle);
    const gaugeOpen = await podWatchGauge();
    const gaugeWith = gaugeOpen === null ? null : gaugeOpen - REFERENCE_WATCHES;
    let leveeWatches: PhaseResult['leveeWatches'] = null;
    if (t.levee) {
      const m = await leveeMetrics(t.levee);
      // Long-running requests on pods without a subresource are watches (logs, exec and the like have one).
      const open = (source: string): number => metric(m, 'levee_longrunning_requests', { group: '', resource: 'pods', subresource: '', source }) ?? 0;
      leveeWatches = { cache: open('cache'), upstream: open('upstream') };
    }

    log(`${TARGET_NAMES[t.key]}: ${RATE} updates/s for ${SECONDS} s`);
    // Levee's event-loop histogram restarts at each scrape, so this scrape starts it for the phase.
    const runtimeBefore = await runtimeSample(t);
    const pids = testenvPids();
    const eventLoop = monitorEventLoopDelay({ resolution: 5 });
    eventLoop.enable();
    const window = new CpuWindow({ apiserver: pids.apiserver, etcd: pids.etcd, levee: t.levee?.pid ?? null });
    // CPU second by second as well, to tell a stall of one process from a slow phase.
    type Tick = Record<'apiserver' | 'levee' | 'etcd' | 'machine' | 'steal', number | null>;
    const cpuTicks: Tick[] = [];
    const tick = (): void => {
      const m = machineCpuSeconds();
      cpuTicks.push({
        apiserver: pids.apiserver === null ? null : cpuSeconds(pids.apiserver),
        levee: t.levee ? cpuSeconds(t.levee.pid) : null,
        etcd: pids.etcd === null ? null : cpuSeconds(pids.etcd),
        machine: m.busy,
        steal: m.steal,
      });
    };
    tick();
    const ticker = setInterval(tick, 1000);
    const loadStartMs = performance.timeOrigin + performance.now();
    const load = await runLoad({
      server: env.server,
      dispatcher: writer,
      token,
      podsByNode,
      rate: RATE,
      seconds: SECONDS,
      firstSeq: nextSeq,
      maxInFlight: MAX_IN_FLIGHT,
      onSent: (seq, node, sentMs) => sent.set(seq, { node, sentMs }),
    });
    const cpu = window.stop();
    clearInterval(ticker);
    tick();
    const runtimeAfter = await runtimeSample(t);
    eventLoop.disable();
    nextSeq = load.nextSeq;

    // Updates counted: those sent after the warm-up whose PATCH succeeded.
    const failed = new Set(load.failedSeqs);
    const measured = new Map<number, number>();
    for (const [seq, s] of sent) if (!failed.has(seq) && s.sentMs >= loadStartMs + WARMUP * 1000) measured.set(seq, watchersPerNode[s.node]!);
    const expected = [...measured.values()].reduce((a, b) => a + b, 0);
    const receivedNow = (): number => [...measured.keys()].reduce((a, seq) => a + Math.min(received.get(seq) ?? 0, measured.get(seq)!), 0);
    // The last events are still on their way: wait for them, a bounded time.
    const drainUntil = performance.now() + 10_000;
    while (receivedNow() < expected && performance.now() < drainUntil) await sleep(200);
    const got = receivedNow();

    const ends = fanout.counters.unexpectedEnds + referenceFanout.counters.unexpectedEnds;
    if (ends > 0 || testenvPids().apiserver !== apiserverAtStart) {
      throw new Disturbed(`${ends} watches ended during the phase${testenvPids().apiserver !== apiserverAtStart ? ', the apiserver was restarted' : ''}: ${fanout.counters.endReasons.join('; ')}`);
    }

    const kept: number[] = [];
    const added: number[] = [];
    for (let i = 0; i < latencies.length; i++) {
      const seq = latencySeqs[i]!;
      if (!measured.has(seq)) continue;
      kept.push(latencies[i]!);
      const ref = reference.get(seq);
      if (ref !== undefined) added.push(sent.get(seq)!.sentMs + latencies[i]! - ref);
    }
    const referenceLatency: number[] = [];
    const secondOverFirst: number[] = [];
    for (const seq of measured.keys()) {
      const ref = reference.get(seq);
      if (ref !== undefined) referenceLatency.push(ref - sent.get(seq)!.sentMs);
      const second = secondReference.get(seq);
      if (ref !== undefined && second !== undefined) secondOverFirst.push(second - ref);
    }

    // The same, per second of the update phase by send time, with every update (warm-up included).
    const buckets = Array.from({ length: Math.ceil(SECONDS) }, () => ({ latency: [] as number[], reference: [] as number[], added: [] as number[] }));
    const bucketOf = (seq: number): (typeof buckets)[number] | undefined => buckets[Math.floor((sent.get(seq)!.sentMs - loadStartMs) / 1000)];
    for (let i = 0; i < latencies.length; i++) {
      const seq = latencySeqs[i]!;
      const b = bucketOf(seq);
      if (!b || failed.has(seq)) continue;
      b.latency.push(latencies[i]!);
      const ref = reference.get(seq);
      if (ref !== undefined) b.added.push(sent.get(seq)!.sentMs + latencies[i]! - ref);
    }
    for (const [seq, ref] of reference) if (sent.has(seq) && !failed.has(seq)) bucketOf(seq)?.reference.push(ref - sent.get(seq)!.sentMs);
    const p = (xs: number[], q: number): number | null => (xs.length === 0 ? null : quantileOf(xs, q));
    const perCore = (k: keyof Tick, i: number): number | null => {
      const x = cpuTicks[i]?.[k];
      const y = cpuTicks[i + 1]?.[k];
      return x === null || x === undefined || y === null || y === undefined ? null : y - x;
    };
    const timeline = buckets.map((b, i) => ({
      second: i,
      deliveries: b.latency.length,
      p50Ms: p(b.latency, 0.5),
      p99Ms: p(b.latency, 0.99),
      referenceP99Ms: p(b.reference, 0.99),
      addedP99Ms: p(b.added, 0.99),
      apiserverCores: perCore('apiserver', i),
      leveeCores: perCore('levee', i),
      etcdCores: perCore('etcd', i),
      machineCores: perCore('machine', i),
      stealCores: perCore('steal', i),
    }));
    const patch = Float64Array.from(load.patchMs).sort();
    const quantile = (xs: Float64Array, p: number): number | null => (xs.length === 0 ? null : xs[Math.min(xs.length - 1, Math.floor(p * xs.length))]!);
    const rssPerWatcher = rssNone === null || rssWatchers === null || pidNone !== pidIdle ? null : (rssWatchers - rssNone) / WATCHERS;
    const result: PhaseResult = {
      target: t.key,
      attempts,
      resourceVersion: rv,
      sessions: fanout.sessions,
      establishMs: fanout.establishMs,
      latency: latencySummary(Float64Array.from(kept)),
      reference: {
        latency: latencySummary(Float64Array.from(referenceLatency)),
        added: latencySummary(Float64Array.from(added)),
        secondOverFirst: latencySummary(Float64Array.from(secondOverFirst)),
      },
      timeline,
      deliveries: { updates: measured.size, expected, received: got, missing: expected - got },
      watch: { ...fanout.counters, otherEvents: fanout.counters.otherEvents + foreign },
      load: {
        sent: load.sent,
        failed: load.failed,
        skipped: load.skipped,
        achievedRate: load.achievedRate,
        patchP50Ms: quantile(patch, 0.5),
        patchP99Ms: quantile(patch, 0.99),
        firstErrors: load.firstErrors,
      },
      memory: {
        process: t.servingName,
        rssNoneBytes: rssNone,
        rssWatchersBytes: rssWatchers,
        rssPerWatcherBytes: rssPerWatcher,
        heapPerWatcherBytes: heapNone === null || heapWatchers === null ? null : (heapWatchers - heapNone) / WATCHERS,
        openFiles: { none: filesNone, opened: filesOpened, idle: filesIdle },
      },
      cpu,
      idleCpu,
      runtime: runtimeDelta(runtimeBefore, runtimeAfter),
      accessReviews: reviewsBefore === null || reviewsAfter === null ? null : reviewsAfter - reviewsBefore,
      eventLoopDelayMs: { p50: eventLoop.percentile(50) / 1e6, p99: eventLoop.percentile(99) / 1e6, max: eventLoop.max / 1e6 },
      podWatchGauge: { before: gaugeBefore, withWatchers: gaugeWith },
      leveeWatches,
    };
    const l = result.latency;
    log(
      `${TARGET_NAMES[t.key]}: ${got}/${expected} events, latency p50 ${l?.p50Ms.toFixed(2) ?? '-'} ms, p99 ${l?.p99Ms.toFixed(2) ?? '-'} ms ` +
        `(reference p50 ${result.reference.latency?.p50Ms.toFixed(2) ?? '-'} ms, added p50 ${result.reference.added?.p50Ms.toFixed(2) ?? '-'} ms); ` +
        `${load.sent} updates (${load.achievedRate.toFixed(1)}/s, ${load.failed} failed, ${load.skipped} skipped); ` +
        `CPU ${Object.entries(cpu.cores).map(([k, v]) => `${k} ${v === null ? '-' : (v * 100).toFixed(0)}%`).join(', ')}; ` +
        `${t.servingName} RSS +${rssPerWatcher === null ? '-' : (rssPerWatcher / 1024).toFixed(1)} KiB per watcher`,
    );
    return result;
  } finally {
    await fanout.close();
  }
}

// The shared environment's apiserver is sometimes restarted by other tests; that breaks every
// watch. Such a phase is done again, a bounded number of times, and the run says so.
const interruptions: { phase: string; error: string }[] = [];
async function measure(t: Target, ready: () => Promise<unknown>): Promise<PhaseResult> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await runPhase(t, attempt);
    } catch (err) {
      if (attempt >= 3) throw err;
      const error = String(err).split('\n')[0]!;
      interruptions.push({ phase: TARGET_NAMES[t.key], error });
      log(`${TARGET_NAMES[t.key]}: ${error}; waiting for the servers, then repeating the phase`);
      await waitUntil('apiserver', `${env.server}/readyz`, true, 180);
      await ready();
      await sleep(2000);
    }
  }
}

// ---------------------------------------------------------------- run

const notes: string[] = [];
const baselineGauge = await podWatchGauge();
const apiserverResult = await measure(
  { key: 'apiserver', origin: env.server, servingPid: () => testenvPids().apiserver, servingName: 'kube-apiserver' },
  () => Promise.resolve(),
);
// The direct watches are gone once the gauge is back where it was.
const gaugeBeforeLevee = await podWatchGaugeBackTo(apiserverResult.podWatchGauge.before);

const commit = leveeCommit();
// Pinned, Levee takes its default --workers: the CPUs it may use.
const levee = await startLevee({ kubeconfig: env.kubeconfig, tls: env.leveeServing, extra: ['--cache', 'pods'], cpus: PINNING?.server });
let report: WatchReport;
try {
  const readySeconds = await waitUntil('levee', `${levee.url.origin}/readyz`, false, 600);
  await sleep(2000);
  const rssSynced = levee.rss();
  const synced = await leveeMetrics(levee);
  const cachedPods = metric(synced, 'levee_cache_objects', { resource: 'pods' }) ?? null;
  log(`levee ready after ${readySeconds.toFixed(1)} s, ${cachedPods ?? '?'} pods cached, RSS ${(rssSynced / 1e6).toFixed(0)} MB`);

  const leveeResult = await measure(
    { key: 'levee', origin: levee.url.origin, servingPid: () => levee.pid, servingName: 'Levee', levee },
    () => waitUntil('levee', `${levee.url.origin}/readyz`, false, 600),
  );
  const restarts = metric(await leveeMetrics(levee), 'levee_reflector_watch_restarts_total', { resource: 'pods' }) ?? 0;

  const a = apiserverResult;
  const l = leveeResult;
  const div = (x: number | null | undefined, y: number | null | undefined): number | null => (x === null || x === undefined || y === null || y === undefined || y === 0 ? null : x / y);
  const divPositive = (x: number | null, y: number | null): number | null => (x === null || y === null || x <= 0 || y <= 0 ? null : x / y);
  const leveeIdle = l.podWatchGauge.before;
  const leveeWatchers = l.podWatchGauge.withWatchers;
  if (l.latency === null || a.latency === null) notes.push('A target delivered no measured events: see deliveries in watch.json.');
  for (const p of [a, l]) {
    if (p.deliveries.missing > 0) notes.push(`${TARGET_NAMES[p.target]}: ${p.deliveries.missing} of ${p.deliveries.expected} expected events had not arrived 10 s after the last update.`);
    if (p.load.failed > 0 || p.load.skipped > 0) notes.push(`${TARGET_NAMES[p.target]}: ${p.load.failed} PATCHes failed and ${p.load.skipped} were skipped (over ${MAX_IN_FLIGHT} in flight).`);
    if (p.eventLoopDelayMs.p99 > 20) notes.push(`${TARGET_NAMES[p.target]}: the client's event loop was delayed ${p.eventLoopDelayMs.p99.toFixed(0)} ms at p99, which is part of the measured latency.`);
  }
  const aRss = a.memory.rssPerWatcherBytes;
  const aHeap = a.memory.heapPerWatcherBytes;
  if (aRss !== null && aHeap !== null && aHeap > 0 && aRss < aHeap / 4) {
    notes.push(
      `The apiserver's RSS changed by ${(aRss / 1024).toFixed(1)} KiB per watcher against ${(aHeap / 1024).toFixed(1)} KiB of Go heap and stacks: ` +
        `a long-running Go process reuses memory it already holds (RSS ${((a.memory.rssNoneBytes ?? 0) / 1e6).toFixed(0)} MB before), so its RSS difference understates the cost; compare heaps.`,
    );
  }
  const lFiles = l.memory.openFiles;
  if (lFiles.none !== null && lFiles.opened !== null && lFiles.opened - lFiles.none > WATCHERS / 2) {
    notes.push(
      `Levee's open files went ${lFiles.none} → ${lFiles.opened} → ${lFiles.idle ?? '?'} while its watches opened and idled: one upstream connection per concurrent ` +
        `access review (${l.accessReviews ?? '?'} reviews for ${WATCHERS} identical watches), closed again once idle; their memory stays in its RSS.`,
    );
  }
  for (const p of [a, l]) {
    const o = others(p);
    if (o !== null && o > 0.25) {
      notes.push(`${TARGET_NAMES[p.target]}: other processes used ${(o * 100).toFixed(0)} % of a core during the update phase (a shared machine), which slows every process measured.`);
    }
  }
  if (l.leveeWatches && l.leveeWatches.upstream > 0) notes.push(`${l.leveeWatches.upstream} watches through Levee were forwarded to the apiserver rather than served from the cache.`);

  report = {
    benchmark: 'watch',
    mode: MODE,
    date: new Date().toISOString(),
    environment: {
      node: process.version,
      apiserver: apiserverVersion,
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model ?? 'unknown',
      memoryBytes: totalmem(),
      openFilesLimit: /Max open files\s+(\S+)/.exec(readFileSync('/proc/self/limits', 'utf8'))?.[1] ?? 'unknown',
      client:
        `node:http2, ${STREAMS_PER_SESSION} watch streams per TLS connection (${Math.ceil(WATCHERS / STREAMS_PER_SESSION)} connections per target), JSON, ` +
        `event lines scanned for the annotations without parsing; updates by undici over HTTP/1.1 (merge-patch of two annotations), open loop, to the apiserver in both phases; ` +
        `Node flags ${process.execArgv.join(' ') || 'none'}`,
    },
    config: {
      watchers: WATCHERS,
      nodes: NODES,
      watchersPerNode: { min: Math.min(...watchersPerNode), max: Math.max(...watchersPerNode) },
      rate: RATE,
      seconds: SECONDS,
      warmupSeconds: WARMUP,
      streamsPerSession: STREAMS_PER_SESSION,
      watchedNodesWithPods: nodesWithPods,
      podsOnWatchedNodes: podsByNode.reduce((x, p) => x + p.length, 0),
    },
    cluster: {
      id: cluster.id,
      pods: cluster.size.pods,
      nodes: cluster.size.nodes,
      podItems: generation.podItems,
      podBytesPerItem: generation.podBytes / Math.max(1, generation.podItems),
      reused: generation.reused,
      generationSeconds: generation.seconds,
    },
    levee: { flags: '--cache pods', commit, readySeconds, rssSyncedBytes: rssSynced, cachedPods },
    pinning: PINNING ? { ...PINNING, upstreamWithLevee: 'server-idle' } : null,
    order:
      'Order: sequential. First all watches on the apiserver directly, with Levee not running; then Levee is started and all watches go ' +
      'through it; the same pods, rate and duration each time. Not interleaved, because CPU and memory can be attributed to a target ' +
      'only while it alone carries the watches, and on shared cores two fleets of watchers at once would slow each other. ' +
      "The apiserver goes first so that Levee's cache sync and upstream watch are no part of its measurement.",
    upstream: {
      method:
        'apiserver_longrunning_requests{verb="WATCH",group="",resource="pods"} (summed over scopes) from the apiserver\'s /metrics with the admin token, ' +
        'median of three samples: before the run; with the direct watches open (it must rise by about N, which shows the method sees them); ' +
        'after they closed; with Levee synced and no client watches; with N client watches through Levee (the two reference watches the ' +
        'benchmark keeps on the apiserver during each phase are left out). ' +
        "Levee's own levee_longrunning_requests says whether its client watches were served from the cache or forwarded.",
      baseline: gaugeBeforeLevee,
      directWatchers: a.podWatchGauge.withWatchers,
      leveeIdle,
      leveeWatchers,
      leveeUpstream: leveeIdle === null || gaugeBeforeLevee === null ? null : leveeIdle - gaugeBeforeLevee,
      addedByClientWatches: leveeIdle === null || leveeWatchers === null ? null : leveeWatchers - leveeIdle,
      reflectorWatchRestarts: restarts,
    },
    phases: { apiserver: a, levee: l },
    ratios: {
      latencyP50: div(a.latency?.p50Ms, l.latency?.p50Ms),
      latencyP99: div(a.latency?.p99Ms, l.latency?.p99Ms),
      // A memory difference at or below zero is noise (memory returned meanwhile), not a cost to compare.
      memoryPerWatcher: divPositive(a.memory.rssPerWatcherBytes, l.memory.rssPerWatcherBytes),
      heapPerWatcher: divPositive(a.memory.heapPerWatcherBytes, l.memory.heapPerWatcherBytes),
      apiserverCpu: div(a.cpu.cores['apiserver'], l.cpu.cores['apiserver']),
      apiserverVsApiserverPlusLevee: div(a.cpu.cores['apiserver'], (l.cpu.cores['apiserver'] ?? 0) + (l.cpu.cores['levee'] ?? 0)),
    },
    interruptions,
    notes,
  };
  if (baselineGauge !== null && a.podWatchGauge.before !== null && baselineGauge !== a.podWatchGauge.before) {
    notes.push(`The pod watch gauge moved from ${baselineGauge} to ${a.podWatchGauge.before} before the first phase: other users of the environment.`);
  }
} finally {
  await levee.stop();
}

const all = readResults();
all.runs[MODE] = report;
writeResults(all, report);
log(`wrote bench/results/watch.json, watch.md and watch.svg (${MODE})`);

if (flags.cleanup) {
  log(`deleting generated cluster ${cluster.id}`);
  await removeCluster(generateOptions(cluster.size));
}
await agent.close();
await writer.close();
