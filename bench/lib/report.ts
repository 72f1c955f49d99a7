// What the LIST benchmark records (bench/results/list.json) and how it is shown (list.md, list.svg).
// Rendering reads only the recorded report, so `--render` can redraw the table and chart of an
// earlier run without measuring again.
import type { EtcdSize } from './etcd.ts';
import type { Summary } from './stats.ts';
import { barChart } from './svg.ts';

export type TargetKey = 'apiserverRv0' | 'apiserverConsistent' | 'leveeRv0';

export const TARGET_NAMES: Record<TargetKey, string> = {
  apiserverRv0: 'apiserver rv=0',
  apiserverConsistent: 'apiserver rv unset',
  leveeRv0: 'Levee rv=0',
};
const TARGET_COLORS: Record<TargetKey, string> = { apiserverRv0: '#4e79a7', apiserverConsistent: '#a0cbe8', leveeRv0: '#f28e2b' };
const KEYS = Object.keys(TARGET_NAMES) as TargetKey[];

export interface TargetResult extends Summary {
  ttfbP50Ms: number;
  meanBytes: number;
}

export interface Result {
  scenario: string;
  key: string;
  requests: number;
  targets: Record<TargetKey, TargetResult>;
  /** apiserver p50 / Levee p50: above 1 means Levee is faster. */
  ratioP50: { apiserverRv0: number; apiserverConsistent: number };
  /**
   * A bare TLS server replaying Levee's answer to each query, bytes and all, timed in the same
   * rounds: what the machine's TLS and the client cost with no work at all behind them. The
   * apiserver's p50 over this one is the largest speed-up any server could show here.
   */
  replay?: (Summary & { ceilingP50: number; leveeOverReplayP50?: number }) | undefined;
}

export interface Memory {
  rssBytes: number;
  /** Highest RSS so far (VmHWM): the sync's transient peak shows here. */
  peakRssBytes: number;
  heapUsedBytes: number | null;
  externalBytes: number | null;
}

export interface Mismatch {
  scenario: string;
  path: string;
  expected?: number;
  items: Record<TargetKey, number>;
  status: Record<TargetKey, number>;
}

export interface Checked {
  scenario: string;
  checked: number;
  mismatches: number;
  /** Items and body bytes of each target's answer to the last query checked. */
  items: Record<TargetKey, number>;
  bodyBytes: Record<TargetKey, number>;
}

export interface ListReport {
  benchmark: 'list';
  date: string;
  environment: {
    node: string;
    apiserver: string;
    cpus: number;
    cpuModel: string;
    memoryBytes: number;
    apiserverRssBytes: number | null;
    etcd: EtcdSize;
    client: string;
    /** CPUs of the client and of the servers measured (taskset), when pinned. */
    pinning?: { client: string; server: string } | null;
  };
  cluster: {
    id: string;
    pods: number;
    nodes: number;
    namespaces: number;
    apps: number;
    reused: boolean;
    generationSeconds: number;
    podItems: number;
    podBytes: number;
    podBytesPerItem: number;
    nodeItems: number;
    nodeBytes: number;
    etcdAfterGeneration: EtcdSize;
  };
  levee: {
    cacheFlag: boolean;
    mode: string;
    readySeconds: number;
    rssBaselineBytes: number;
    rssAtStartBytes: number;
    rssSyncedBytes: number;
    rssAfterBytes: number;
    memoryBaseline: Memory;
    memorySynced: Memory;
    cacheObjects: { pods: number | undefined; nodes: number | undefined };
    cacheBytes: { pods: number | undefined; nodes: number | undefined };
    rssPerCachedByte: number | null;
    heapPerCachedByte: number | null;
    answersDuringMeasurement: { cache: number; upstream: number };
    forwardedDuringMeasurement: Record<string, number>;
  };
  interruptions: { phase: string; error: string }[];
  verification: { mismatches: Mismatch[]; warnings: string[]; perScenario: Checked[] };
  results: Result[];
}

export function mb(bytes: number | null | undefined): string {
  return bytes === undefined || bytes === null ? '-' : (bytes / 1e6).toFixed(1);
}

export function ms(x: number): string {
  return x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2);
}

export function table(r: ListReport): string {
  return [
    '| scenario | n | apiserver rv=0 p50 / p99 ms | apiserver rv unset p50 / p99 ms | Levee rv=0 p50 / p99 ms | rv=0 ÷ Levee (p50) | rv unset ÷ Levee (p50) | MB per answer |',
    '|---|---:|---:|---:|---:|---:|---:|---:|',
    ...r.results.map((x) => {
      const c = (k: TargetKey): string => `${ms(x.targets[k].p50Ms)} / ${ms(x.targets[k].p99Ms)}`;
      return `| ${x.scenario} | ${x.requests} | ${c('apiserverRv0')} | ${c('apiserverConsistent')} | ${c('leveeRv0')} | ${x.ratioP50.apiserverRv0.toFixed(2)}× | ${x.ratioP50.apiserverConsistent.toFixed(2)}× | ${(x.targets.leveeRv0.meanBytes / 1e6).toFixed(3)} |`;
    }),
  ].join('\n');
}

function replayTable(r: ListReport): string {
  const rows = r.results.filter((x) => x.replay);
  if (rows.length === 0) return '';
  return [
    'The ceiling on this machine: a bare Node TLS server in its own process (same certificate, same client, same CPUs as the',
    'servers measured) replaying Levee\'s own answer to each query, in the same rounds. Its p50 is what TLS, the kernel and the',
    'client cost with nothing behind them; the apiserver\'s p50 over it is the largest speed-up any server could show here, and',
    'Levee\'s over it is what Levee\'s own work adds.',
    '',
    '| scenario | replay p50 / p99 ms | Levee rv=0 p50 ms | Levee ÷ replay | apiserver rv=0 ÷ replay (ceiling) | rv=0 ÷ Levee |',
    '|---|---:|---:|---:|---:|---:|',
    ...rows.map(
      (x) =>
        `| ${x.scenario} | ${ms(x.replay!.p50Ms)} / ${ms(x.replay!.p99Ms)} | ${ms(x.targets.leveeRv0.p50Ms)} | ${(x.targets.leveeRv0.p50Ms / x.replay!.p50Ms).toFixed(2)}× | ${x.replay!.ceilingP50.toFixed(2)}× | ${x.ratioP50.apiserverRv0.toFixed(2)}× |`,
    ),
    '',
    '',
  ].join('\n');
}

function firstByteTable(r: ListReport): string {
  return [
    `| scenario | ${KEYS.map((k) => `${TARGET_NAMES[k]} first byte p50 ms`).join(' | ')} |`,
    `|---|${KEYS.map(() => '---:').join('|')}|`,
    ...r.results.map((x) => `| ${x.scenario} | ${KEYS.map((k) => ms(x.targets[k].ttfbP50Ms)).join(' | ')} |`),
  ].join('\n');
}

export function memoryLine(r: ListReport): string {
  const l = r.levee;
  const held = (l.cacheBytes.pods ?? 0) + (l.cacheBytes.nodes ?? 0);
  if (l.rssPerCachedByte === null) {
    return (
      `no cache metrics (levee_cache_bytes) were exported, so memory per cached byte is not known; ` +
      `RSS ${mb(l.rssBaselineBytes)} MB without a cache, ${mb(l.rssSyncedBytes)} MB for the measured Levee when ready, ${mb(l.rssAfterBytes)} MB after the run`
    );
  }
  return (
    `RSS ${mb(l.rssBaselineBytes)} MB without a cache, ${mb(l.rssSyncedBytes)} MB with ${mb(held)} MB of JSON cached ` +
    `(${l.cacheObjects.pods ?? 0} pods, ${l.cacheObjects.nodes ?? 0} nodes): ${l.rssPerCachedByte.toFixed(2)} bytes of RSS per cached byte` +
    (l.heapPerCachedByte === null ? '' : ` (V8 heap used + external: ${l.heapPerCachedByte.toFixed(2)})`) +
    `; peak RSS while syncing ${mb(l.memorySynced.peakRssBytes)} MB; ${mb(l.rssAfterBytes)} MB after the run`
  );
}

export function markdown(r: ListReport): string {
  const c = r.cluster;
  const e = r.environment;
  const full = r.verification.perScenario[0];
  const checked = r.verification.perScenario.reduce((a, v) => a + v.checked, 0);
  const mismatches = r.verification.mismatches.length;
  const fullReps = r.results[0]?.requests ?? 0;
  return `# LIST and GET from a watch cache

${r.date}. ${c.pods.toLocaleString('en')} pods on ${c.nodes.toLocaleString('en')} nodes in ${c.namespaces} namespaces (${c.apps} apps),
${mb(c.podBytes)} MB of pod JSON (${(c.podBytesPerItem / 1024).toFixed(1)} KiB per pod)${c.reused ? '' : `, generated in ${c.generationSeconds.toFixed(0)} s`};
etcd ${mb(c.etcdAfterGeneration.dbBytes)} MB on disk (${mb(c.etcdAfterGeneration.dbInUseBytes)} MB in use) after generation.
Kubernetes ${e.apiserver} (apiserver RSS ${mb(e.apiserverRssBytes)} MB at the end), Node ${e.node}, ${e.cpus} CPUs (${e.cpuModel});
${e.pinning ? `The client ran on CPU ${e.pinning.client}; Levee, the replay server, the apiserver and etcd on CPU ${e.pinning.server} while timed (taskset).` : 'Client, etcd, apiserver and Levee share them.'}
Levee: ${r.levee.mode}, ready after ${r.levee.readySeconds.toFixed(1)} s. During measurement it answered ${r.levee.answersDuringMeasurement.cache}
requests from its cache and ${r.levee.answersDuringMeasurement.upstream} from upstream.

Same client for every target (${e.client}), requests alternated between targets, warm-up first.
Latency is to the last byte of the body; p99 is nearest-rank (of ${fullReps} samples for a full LIST: the slowest).
Ratios above 1× mean Levee answered faster.${full ? ` A full LIST of pods held ${full.items.apiserverRv0.toLocaleString('en')} pods
(${c.podItems.toLocaleString('en')} generated, the rest from other users of the same test cluster).` : ''}

${table(r)}

${replayTable(r)}Time to the first byte (response headers), p50:

${firstByteTable(r)}

Memory: ${memoryLine(r)}.

${r.interruptions.length ? `Rounds repeated after the shared apiserver went away: ${r.interruptions.length}.\n\n` : ''}Answers checked for equal item counts on ${checked} queries: ${mismatches === 0 ? 'all equal' : `${mismatches} mismatches (see list.json)`}.

![p50 latency](list.svg)
`;
}

export function svg(r: ListReport): string {
  const c = r.cluster;
  return barChart({
    title: 'p50 latency: apiserver against Levee',
    subtitle: `${c.pods.toLocaleString('en')} pods, ${c.nodes.toLocaleString('en')} nodes, ${mb(c.podBytes)} MB of pods; Levee ${r.levee.cacheFlag ? 'from cache' : 'forwarding'}; Kubernetes ${r.environment.apiserver}`,
    unit: 'ms',
    series: KEYS.map((k) => ({ name: TARGET_NAMES[k], color: TARGET_COLORS[k] })),
    groups: r.results.map((x) => ({ label: x.scenario, values: KEYS.map((k) => x.targets[k].p50Ms) })),
  });
}
