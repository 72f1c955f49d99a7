// What the watch benchmark records (bench/results/watch.json) and how it is shown (watch.md,
// watch.svg). The JSON keeps one report per mode (quick, full, or custom sizes), so a quick run
// does not erase the last full one; rendering reads only the recorded reports, so `--render`
// redraws the table and chart without measuring again.
import type { Summary } from './stats.ts';
import { barChart } from './svg.ts';
import type { FanoutCounters } from './watchclient.ts';

export type TargetKey = 'apiserver' | 'levee';
export const TARGETS: TargetKey[] = ['apiserver', 'levee'];
export const TARGET_NAMES: Record<TargetKey, string> = { apiserver: 'apiserver directly', levee: 'through Levee' };
const TARGET_COLORS: Record<TargetKey, string> = { apiserver: '#4e79a7', levee: '#f28e2b' };

export interface TimelineSecond {
  second: number;
  deliveries: number;
  p50Ms: number | null;
  p99Ms: number | null;
  referenceP99Ms: number | null;
  addedP99Ms: number | null;
  /** CPU seconds used in this second. */
  apiserverCores: number | null;
  leveeCores: number | null;
  etcdCores: number | null;
  /** Every process on the machine, and time stolen by the hypervisor. */
  machineCores: number | null;
  stealCores: number | null;
}

export interface PhaseResult {
  target: TargetKey;
  /** 1 unless the phase was repeated after the shared apiserver went away. */
  attempts: number;
  resourceVersion: string;
  sessions: number;
  /** From the first watch request to the last 200 head. */
  establishMs: number;
  /** Delivery latency of the events of updates sent after the warm-up; null when none arrived. */
  latency: Summary | null;
  /**
   * One more watch, always on the apiserver directly (all pods of the generated cluster), open in
   * both phases: its own latency shows how fast the apiserver was at that moment, and each
   * delivery's arrival minus the reference's arrival of the same update is what the path to the
   * watcher added (through Levee: Levee's hop), free of the drift of a shared apiserver between
   * phases.
   */
  reference: {
    latency: Summary | null;
    added: Summary | null;
    /**
     * A second watch of every pod on the apiserver directly, over HTTP/1.1 as Levee's upstream watch
     * is: its arrival minus the reference's, per update. How much later the apiserver delivers to
     * a watch like Levee's upstream one than to the reference, which Levee's added latency would
     * carry too. Absent in older runs.
     */
    secondOverFirst?: Summary | null;
  };
  /** Second by second of the update phase (updates by send time, warm-up included). */
  timeline: TimelineSecond[];
  deliveries: {
    /** Updates sent after the warm-up (and not failed). */
    updates: number;
    /** Sum over those updates of the watchers of the updated pod's node. */
    expected: number;
    received: number;
    missing: number;
  };
  watch: FanoutCounters;
  load: {
    sent: number;
    failed: number;
    skipped: number;
    achievedRate: number;
    patchP50Ms: number | null;
    patchP99Ms: number | null;
    firstErrors: string[];
  };
  memory: {
    process: string;
    rssNoneBytes: number | null;
    rssWatchersBytes: number | null;
    rssPerWatcherBytes: number | null;
    /**
     * Growth of the heap per watcher, from the process's own /metrics: for Levee V8 heap used +
     * external (garbage included), for the apiserver its live Go heap after a forced collection
     * plus goroutine stacks.
     */
    heapPerWatcherBytes: number | null;
    /** Open file descriptors of the serving process: before, right after the watches opened, after the idle wait. */
    openFiles: { none: number | null; opened: number | null; idle: number | null };
  };
  /**
   * Cores used on average during the update phase; `waiting`, run-queue wait per second of it, each
   * process's threads together (absent in runs before it was recorded).
   */
  cpu: { seconds: number; cores: Record<string, number | null>; waiting?: Record<string, number | null> };
  /** Cores used with the watches open and no updates yet: the background the update phase adds to. */
  idleCpu: { seconds: number; cores: Record<string, number | null> };
  /** The serving processes' runtimes during the update phase, from their own metrics. */
  runtime: {
    /** Levee's event-loop delay over the update phase (prom-client's histogram, reset at each scrape). */
    leveeEventLoopP99Ms: number | null;
    leveeEventLoopMaxMs: number | null;
    /** Seconds Levee spent in garbage collection, by kind. */
    leveeGcSeconds: Record<string, number> | null;
    /** The apiserver's stop-the-world GC pauses, summed, and its GC cycles. */
    apiserverGcPauseSeconds: number | null;
    apiserverGcCycles: number | null;
  };
  /** SelfSubjectAccessReviews the apiserver answered while the watches were being opened. */
  accessReviews: number | null;
  /** This client's event-loop delay during the update phase: above a few ms it inflates latency. */
  eventLoopDelayMs: { p50: number; p99: number; max: number };
  /**
   * apiserver_longrunning_requests{verb=WATCH,resource=pods}: before opening the watches, and with
   * them open less the reference watch.
   */
  podWatchGauge: { before: number | null; withWatchers: number | null };
  /** Levee only: its own gauge of open watches on pods, by where they are served from. */
  leveeWatches: { cache: number; upstream: number } | null;
}

export interface WatchReport {
  benchmark: 'watch';
  mode: string;
  date: string;
  environment: {
    node: string;
    apiserver: string;
    cpus: number;
    cpuModel: string;
    memoryBytes: number;
    openFilesLimit: string;
    client: string;
  };
  config: {
    watchers: number;
    nodes: number;
    watchersPerNode: { min: number; max: number };
    rate: number;
    seconds: number;
    warmupSeconds: number;
    streamsPerSession: number;
    watchedNodesWithPods: number;
    podsOnWatchedNodes: number;
  };
  cluster: { id: string; pods: number; nodes: number; podItems: number; podBytesPerItem: number; reused: boolean; generationSeconds: number };
  levee: { flags: string; commit?: string | null; readySeconds: number; rssSyncedBytes: number; cachedPods: number | null };
  /**
   * taskset's CPUs for the benchmark client and for the server under test; absent or null: not
   * pinned. `upstreamWithLevee`: where the apiserver and etcd ran during Levee's phase, beside the
   * server under test under SCHED_IDLE, or (runs before that layout, where it is absent) beside
   * the client.
   */
  pinning?: { client: string; server: string; upstreamWithLevee?: 'server-idle' } | null;
  order: string;
  upstream: {
    method: string;
    /** The gauge with nothing of the benchmark's open (Levee not started). */
    baseline: number | null;
    /** With N watches on the apiserver directly: the gauge rises by about N if the method works. */
    directWatchers: number | null;
    /** Levee running and synced, no client watches. */
    leveeIdle: number | null;
    /** Levee running with N client watches open through it. */
    leveeWatchers: number | null;
    /** leveeIdle - baseline: the upstream pod watches Levee holds. */
    leveeUpstream: number | null;
    /** leveeWatchers - leveeIdle: upstream pod watches added by N client watches (0 expected). */
    addedByClientWatches: number | null;
    reflectorWatchRestarts: number | null;
  };
  phases: Record<TargetKey, PhaseResult>;
  /** apiserver ÷ Levee: above 1 means Levee is better (faster, smaller, cheaper). */
  ratios: {
    latencyP50: number | null;
    latencyP99: number | null;
    memoryPerWatcher: number | null;
    heapPerWatcher: number | null;
    /** The apiserver's CPU with N direct watchers over its CPU with Levee in front. */
    apiserverCpu: number | null;
    /** The apiserver's CPU with N direct watchers over apiserver + Levee with Levee in front. */
    apiserverVsApiserverPlusLevee: number | null;
  };
  interruptions: { phase: string; error: string }[];
  notes: string[];
}

export interface WatchResults {
  benchmark: 'watch';
  /** By mode: quick, full, or custom-<sizes>. */
  runs: Record<string, WatchReport>;
}

const ms = (x: number | null | undefined): string =>
  x === null || x === undefined ? '-' : Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(2);
const num = (x: number | null | undefined, digits = 2): string => (x === null || x === undefined ? '-' : x.toFixed(digits));
const kib = (x: number | null | undefined): string => (x === null || x === undefined ? '-' : (x / 1024).toFixed(1));
const mb = (x: number | null | undefined): string => (x === null || x === undefined ? '-' : (x / 1e6).toFixed(1));
const ratio = (x: number | null): string => (x === null || !Number.isFinite(x) ? '-' : `${x.toFixed(2)}×`);
const pct = (x: number | null | undefined): string => (x === null || x === undefined ? '-' : `${(x * 100).toFixed(0)} %`);

/** CPU of processes the benchmark does not measure: other users of a shared machine, the kernel. */
export function others(p: PhaseResult): number | null {
  const c = p.cpu.cores;
  if (c['machine'] === null || c['machine'] === undefined) return null;
  // Never below 0: per-process and machine-wide ticks are counted apart and differ by rounding.
  return Math.max(0, c['machine'] - ['apiserver', 'levee', 'etcd', 'client'].reduce((a, k) => a + (c[k] ?? 0), 0));
}

export function table(r: WatchReport): string {
  const a = r.phases.apiserver;
  const l = r.phases.levee;
  const row = (label: string, f: (p: PhaseResult) => string, q = '-'): string => `| ${label} | ${f(a)} | ${f(l)} | ${q} |`;
  const cpu = (p: PhaseResult, k: string): number | null => p.cpu.cores[k] ?? null;
  const both = (p: PhaseResult): number | null => (cpu(p, 'apiserver') === null ? null : cpu(p, 'apiserver')! + (cpu(p, 'levee') ?? 0));
  return [
    `| ${r.config.watchers.toLocaleString('en')} watchers, ${r.config.rate} updates/s | ${TARGET_NAMES.apiserver} | ${TARGET_NAMES.levee} | apiserver ÷ Levee |`,
    '|---|---:|---:|---:|',
    row('delivery latency p50, ms', (p) => ms(p.latency?.p50Ms), ratio(r.ratios.latencyP50)),
    row('delivery latency p99, ms', (p) => ms(p.latency?.p99Ms), ratio(r.ratios.latencyP99)),
    row('delivery latency max, ms', (p) => ms(p.latency?.maxMs)),
    row('reference watch on the apiserver, same updates: p50 / p99, ms', (p) => `${ms(p.reference.latency?.p50Ms)} / ${ms(p.reference.latency?.p99Ms)}`),
    row('added over the reference watch: p50 / p99, ms', (p) => `${ms(p.reference.added?.p50Ms)} / ${ms(p.reference.added?.p99Ms)}`),
    row('an HTTP/1.1 watch like Levee\'s upstream one, over the reference: p50 / p99, ms', (p) => (p.reference.secondOverFirst ? `${ms(p.reference.secondOverFirst.p50Ms)} / ${ms(p.reference.secondOverFirst.p99Ms)}` : '-')),
    row('events received / expected', (p) => `${p.deliveries.received.toLocaleString('en')} / ${p.deliveries.expected.toLocaleString('en')}`),
    row(`all watches established, ms`, (p) => ms(p.establishMs)),
    row('access reviews while opening them', (p) => (p.accessReviews === null ? '-' : p.accessReviews.toLocaleString('en'))),
    row('RSS per idle watcher, KiB', (p) => `${kib(p.memory.rssPerWatcherBytes)} (${p.memory.process})`, ratio(r.ratios.memoryPerWatcher)),
    row('heap per idle watcher, KiB', (p) => kib(p.memory.heapPerWatcherBytes), ratio(r.ratios.heapPerWatcher)),
    row('open files of the serving process: before → watches opened → idle', (p) => `${p.memory.openFiles.none ?? '-'} → ${p.memory.openFiles.opened ?? '-'} → ${p.memory.openFiles.idle ?? '-'}`),
    row('apiserver CPU during updates', (p) => pct(cpu(p, 'apiserver')), ratio(r.ratios.apiserverCpu)),
    row('Levee CPU during updates', (p) => (p.target === 'levee' ? pct(cpu(p, 'levee')) : 'not running')),
    row('apiserver + Levee CPU', (p) => pct(both(p)), ratio(r.ratios.apiserverVsApiserverPlusLevee)),
    row('etcd CPU', (p) => pct(cpu(p, 'etcd'))),
    row('apiserver / Levee CPU with idle watchers, before updates', (p) => `${pct(p.idleCpu.cores['apiserver'])} / ${p.target === 'levee' ? pct(p.idleCpu.cores['levee']) : '-'}`),
    row('benchmark client CPU', (p) => pct(cpu(p, 'client'))),
    row(`whole machine CPU (of ${r.environment.cpus} cores) / stolen`, (p) => `${pct(cpu(p, 'machine'))} / ${pct(cpu(p, 'steal'))}`),
    row('other processes on the machine (machine less the above)', (p) => pct(others(p))),
    row('run-queue wait during updates, ms per s: apiserver / Levee / client', (p) => {
      const at = (k: string): string => {
        const w = p.cpu.waiting?.[k];
        return typeof w === 'number' ? (w * 1000).toFixed(1) : '-';
      };
      return `${at('apiserver')} / ${p.target === 'levee' ? at('levee') : '-'} / ${at('client')}`;
    }),
    row('client event-loop delay p99, ms', (p) => ms(p.eventLoopDelayMs.p99)),
    row('Levee event-loop delay p99 / max, ms', (p) => (p.target === 'levee' && p.runtime ? `${ms(p.runtime.leveeEventLoopP99Ms)} / ${ms(p.runtime.leveeEventLoopMaxMs)}` : '-')),
    row('Levee GC during updates (major / all), s', (p) => {
      const gc = p.runtime?.leveeGcSeconds;
      return p.target === 'levee' && gc ? `${num(gc['major'])} / ${num(Object.values(gc).reduce((a, b) => a + b, 0))}` : '-';
    }),
    row('apiserver GC cycles / pauses, s', (p) => (p.runtime ? `${p.runtime.apiserverGcCycles ?? '-'} / ${num(p.runtime.apiserverGcPauseSeconds, 3)}` : '-')),
    row('pod watches on the apiserver (gauge, before → with watchers)', (p) => `${p.podWatchGauge.before ?? '-'} → ${p.podWatchGauge.withWatchers ?? '-'}`),
    row('PATCH p50 / p99, ms', (p) => `${ms(p.load.patchP50Ms)} / ${ms(p.load.patchP99Ms)}`),
  ].join('\n');
}

function upstreamLine(r: WatchReport): string {
  const u = r.upstream;
  return (
    `Upstream pod watches (apiserver_longrunning_requests{verb="WATCH",resource="pods"}): ${u.baseline ?? '?'} before the run; ` +
    `${u.directWatchers ?? '?'} with ${r.config.watchers.toLocaleString('en')} watches on the apiserver directly; ` +
    `${u.leveeIdle ?? '?'} with Levee synced and no client watches; ${u.leveeWatchers ?? '?'} with ${r.config.watchers.toLocaleString('en')} watches through Levee. ` +
    `Levee holds ${u.leveeUpstream ?? '?'} upstream pod watch(es), and its client watches added ${u.addedByClientWatches ?? '?'}` +
    (u.reflectorWatchRestarts === null ? '' : `; its reflector restarted its watch ${u.reflectorWatchRestarts} times`) +
    '.'
  );
}

/** The worst seconds of a phase by delivery p99, with what the reference and the processes did then. */
function slowestLine(p: PhaseResult): string {
  const worst = [...(p.timeline ?? [])].filter((s) => s.p99Ms !== null).sort((x, y) => y.p99Ms! - x.p99Ms!).slice(0, 3);
  if (worst.length === 0) return '';
  const slow = (p.timeline ?? []).filter((s) => s.p99Ms !== null && s.p99Ms > 100).length;
  const cores = (x: number | null): string => (x === null ? '-' : `${(x * 100).toFixed(0)} %`);
  return (
    `- ${TARGET_NAMES[p.target]}: ${slow} of ${(p.timeline ?? []).length} seconds had a delivery p99 over 100 ms; the worst: ` +
    worst
      .map(
        (s) =>
          `second ${s.second} p99 ${ms(s.p99Ms)} ms (reference ${ms(s.referenceP99Ms)}, added ${ms(s.addedP99Ms)}; CPU apiserver ${cores(s.apiserverCores)}` +
          `${p.target === 'levee' ? `, Levee ${cores(s.leveeCores)}` : ''}, machine ${cores(s.machineCores ?? null)})`,
      )
      .join('; ')
  );
}

function leveeWatchesLine(r: WatchReport): string {
  const w = r.phases.levee.leveeWatches;
  if (w === null) return '';
  return `Levee's own gauge (levee_longrunning_requests) with the watches open: ${w.cache} pod watches served from its cache, ${w.upstream} forwarded.`;
}

export function markdownRun(r: WatchReport): string {
  const c = r.config;
  const e = r.environment;
  const l = r.phases.levee;
  return `## ${r.mode}: ${c.watchers.toLocaleString('en')} watchers on ${c.nodes.toLocaleString('en')} nodes, ${c.rate} updates/s for ${c.seconds} s

${r.date}. Kubernetes ${e.apiserver}, Node ${e.node}, ${e.cpus} CPUs (${e.cpuModel}), ${(e.memoryBytes / 2 ** 30).toFixed(0)} GiB;
${
    r.pinning?.upstreamWithLevee === 'server-idle'
      ? `Pinned (taskset): the server under test on CPU ${r.pinning.server} (the apiserver and etcd in the first phase, Levee with its default --workers, the CPUs it may use, in the second, with the apiserver and etcd beside it under SCHED_IDLE); the benchmark client on CPU ${r.pinning.client}, alone in both phases.`
      : r.pinning
      ? `Pinned (taskset): the server under test on CPU ${r.pinning.server} (the apiserver and etcd in the first phase, Levee with its default --workers, the CPUs it may use, in the second); the benchmark client on CPU ${r.pinning.client}, with the apiserver and etcd during Levee's phase.`
      : 'Not pinned: client, etcd, apiserver and Levee share the CPUs.'
  } Cluster ${r.cluster.id}: ${r.cluster.podItems.toLocaleString('en')} pods
(${(r.cluster.podBytesPerItem / 1024).toFixed(1)} KiB each), ${c.podsOnWatchedNodes.toLocaleString('en')} of them on the ${c.watchedNodesWithPods} watched nodes that have pods;
${c.watchersPerNode.min === c.watchersPerNode.max ? c.watchersPerNode.min : `${c.watchersPerNode.min}–${c.watchersPerNode.max}`} watchers per node.
Levee ${r.levee.commit ? `at ${r.levee.commit}, ` : ''}${r.levee.flags}, ready after ${r.levee.readySeconds.toFixed(1)} s with ${r.levee.cachedPods ?? '?'} pods cached (RSS ${mb(r.levee.rssSyncedBytes)} MB).
Client: ${e.client}.

${r.order}

${table(r)}

Latency is from the update's send time (embedded in the object) to the arrival of the event at the watcher, over the
events of updates sent after a ${r.config.warmupSeconds} s warm-up; p99 is nearest-rank over ${(r.phases.apiserver.latency?.n ?? 0).toLocaleString('en')} and
${(l.latency?.n ?? 0).toLocaleString('en')} deliveries. It includes the PATCH itself (etcd write, watch cache), which both targets share; the
reference watch (one more watch on the apiserver directly, open in both phases) separates that from what the path to
the watcher added: each delivery's arrival minus the reference's arrival of the same update.${
    l.reference.secondOverFirst === undefined
      ? ''
      : ` A second watch of every pod on the apiserver
directly, over HTTP/1.1 as Levee's own upstream watch is, shows whether the apiserver delivers to such a watch later than to the
reference; Levee's added latency would carry that delay too.`
  }
CPU is in cores (100 % = one core), over the update phase of each target.
RSS per watcher is the serving process's RSS with the watches open and idle minus its RSS before, divided by the watchers;
heap per watcher is the same difference of the process's own heap metrics (Levee: V8 heap used + external, garbage
included; apiserver: live Go heap right after a collection forced through /debug/pprof/heap?gc=1, plus goroutine stacks).
A long-running Go process reuses and returns memory on its own schedule, so the apiserver's RSS difference is noise
unless N is large; its heap is the better measure.

${upstreamLine(r)}
${leveeWatchesLine(r)}

Second by second (watch.json has the whole timeline):

${TARGETS.map((k) => slowestLine(r.phases[k])).join('\n')}
${r.interruptions.length ? `\nPhases repeated after the shared apiserver went away: ${r.interruptions.map((i) => `${i.phase} (${i.error})`).join('; ')}.\n` : ''}${r.notes.length ? `\n${r.notes.map((n) => `- ${n}`).join('\n')}\n` : ''}`;
}

export function markdown(all: WatchResults): string {
  const runs = orderedRuns(all);
  return `# Watch fan-out: per-node pod watches on the apiserver and through Levee

N concurrent watches of \`/api/v1/pods?watch=true&fieldSelector=spec.nodeName=<node>&resourceVersion=<rv>&allowWatchBookmarks=true\`,
first on the apiserver directly, then through Levee (\`--cache pods\`), under a steady rate of PATCHes that stamp the send
time into an annotation of pods on the watched nodes. \`npm run bench:watch\` (quick) or \`npm run bench:watch -- --full\`.

${runs.map(markdownRun).join('\n')}
![delivery latency, memory and CPU](watch.svg)
`;
}

/** Full first, then quick, then custom runs. */
function orderedRuns(all: WatchResults): WatchReport[] {
  const rank = (m: string): number => (m === 'full' ? 0 : m === 'quick' ? 1 : 2);
  return Object.values(all.runs).sort((x, y) => rank(x.mode) - rank(y.mode) || x.mode.localeCompare(y.mode));
}

export function svg(all: WatchResults): string {
  // The chart shows the largest recorded run; the others are in the table.
  const r = orderedRuns(all)[0]!;
  const values = (f: (p: PhaseResult) => number | null | undefined): (number | null)[] => TARGETS.map((k) => f(r.phases[k]) ?? null);
  return barChart({
    title: `Watch fan-out: ${r.config.watchers.toLocaleString('en')} per-node pod watches, ${r.config.rate} updates/s`,
    subtitle: `${r.mode} run, ${r.date.slice(0, 10)}; ${r.config.nodes.toLocaleString('en')} nodes; Kubernetes ${r.environment.apiserver}; lower is better`,
    unit: 'ms, KiB or % of a core',
    series: TARGETS.map((k) => ({ name: TARGET_NAMES[k], color: TARGET_COLORS[k] })),
    groups: [
      { label: 'delivery latency p50 (ms)', values: values((p) => p.latency?.p50Ms) },
      { label: 'delivery latency p99 (ms)', values: values((p) => p.latency?.p99Ms) },
      { label: 'RSS per idle watcher (KiB)', values: values((p) => (p.memory.rssPerWatcherBytes === null ? null : p.memory.rssPerWatcherBytes / 1024)) },
      { label: 'heap per idle watcher (KiB)', values: values((p) => (p.memory.heapPerWatcherBytes === null ? null : p.memory.heapPerWatcherBytes / 1024)) },
      { label: 'apiserver CPU (% of a core)', values: values((p) => (p.cpu.cores['apiserver'] ?? null) === null ? null : p.cpu.cores['apiserver']! * 100) },
      { label: 'Levee CPU (% of a core)', values: values((p) => (p.target === 'levee' && p.cpu.cores['levee'] != null ? p.cpu.cores['levee'] * 100 : null)) },
    ],
  });
}
