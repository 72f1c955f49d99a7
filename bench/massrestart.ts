// A mass restart of DaemonSet agents: K agents, each with its own service-account token and its own
// HTTP/2 connection, start at the same instant. Each does what a node agent's informers do, for the
// pods on its node and its Node. As client-go 1.35+ informers start (--informers watch-list, the
// default): a consistent watch-list, without resourceVersion, synced at its initial-events-end
// bookmark, the stream going on as the watch. As older ones (--informers list): LIST with
// resourceVersion=0, then WATCH from the list's resourceVersion, synced once the watch is open.
// 429s are retried after their Retry-After, other failures with client-go's backoff; both counted.
//
// Measured in one run, directly against the apiserver and through Levee (started and synced
// beforehand, as a gateway is when the agents' nodes restart): the time until every agent is
// synced, sync and request latency, requests that reached the apiserver (its own
// apiserver_request_total), its CPU and memory, and errors. For JSON watch-lists also the
// machine's ceiling: a bare HTTP/2 server replaying Levee's answers (bench/lib/watchreplay.ts).
// Each target first sees the agents' first start (a server that never served them, Levee's code
// not yet optimized by V8 nor its heap grown), then their restarts, which are the measurement
// (the agents were running, as a DaemonSet's are when its nodes or pods restart): each time all of
// them at once, after every connection of the round before has closed. The targets take turns,
// --restarts times each (3 by default), and each figure is the median over a target's restarts.
//
//   npm run bench:massrestart                 # 2,000 agents over the 1,000 nodes of the generated cluster
//   npm run bench:massrestart -- --agents 500
//   npm run bench:massrestart -- --informers list   # LIST resourceVersion=0, then WATCH
//   npm run bench:massrestart -- --encoding protobuf  # watch-lists in protobuf, as typed clients ask
//   npm run bench:massrestart -- --profile DIR  # Levee writes a V8 CPU profile into DIR when it stops
//   npm run bench:massrestart -- --no-pin       # agents and servers share every CPU
//   npm run bench:massrestart -- --restarts 5   # more restarts per target (the medians' sample)
//
// Pinned by default (taskset): the agents on half the CPUs, the server under test on the other half
// (the apiserver and etcd when measured directly; Levee, the apiserver and etcd through Levee), so
// that the agents' own CPU does not decide how soon they sync. The CPU each phase costs is the
// server side's: apiserver and etcd directly, and Levee with its apiserver and etcd through Levee.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { connect } from 'node:http2';
import { createSecureContext } from 'node:tls';
import { Agent } from 'undici';
import { quietEnv } from './lib/env.ts';
import { pinProcess, pinSelf, splitCpus, unpinProcesses } from '../test/support/cpus.ts';
import { startLevee, writeKubeconfig, type LeveeProcess } from '../test/support/levee.ts';
import { kubectl } from '../test/support/kubectl.ts';
import { call, must, pool } from './lib/client.ts';
import { ensureCluster } from './lib/pods.ts';
import { cpuSeconds, rssBytes, testenvPids } from './lib/watchproc.ts';
import { metric, parseMetrics, type Sample } from './lib/prom.ts';
import { quantile } from './lib/stats.ts';
import { agentPaths, captureWatchList, closeFleet, newFleet, runAgent, WATCH_LIST_QUERY } from './lib/agent.ts';
import { agentIdentities, RESTART_CLUSTER } from './lib/restart.ts';
import { startWatchReplay } from './lib/watchreplay.ts';

const { values } = parseArgs({
  options: { agents: { type: 'string', default: '2000' }, profile: { type: 'string' }, informers: { type: 'string', default: 'watch-list' }, encoding: { type: 'string', default: 'json' }, pin: { type: 'boolean', default: true }, restarts: { type: 'string', default: '3' } },
  allowNegative: true,
});
const K = Number(values.agents);
const RESTARTS = Number(values.restarts);
if (!Number.isInteger(RESTARTS) || RESTARTS < 1) throw new Error('--restarts is a whole number of at least 1');
const WATCH_LIST = values.informers === 'watch-list';
if (!WATCH_LIST && values.informers !== 'list') throw new Error('--informers is watch-list or list');
if (values.encoding !== 'json' && values.encoding !== 'protobuf') throw new Error('--encoding is json or protobuf');
const ENCODING: 'json' | 'protobuf' = values.encoding;
if (ENCODING === 'protobuf' && !WATCH_LIST) throw new Error('--encoding protobuf is for watch-lists (--informers watch-list)');
const env = await quietEnv();
const pinning = values.pin ? splitCpus() : undefined;
const ca = readFileSync(env.caFile);
// The connections that capture Levee's answers for the replay share one TLS context (the agents
// have their own, bench/lib/agent.ts).
const secureContext = createSecureContext({ ca });
const admin = new Agent({ connect: { ca }, allowH2: false, connections: 32 });
const token = env.tokens.admin;
const log = (line: string): void => void process.stderr.write(`${line}\n`);
// Between the agents' first start and their restart: their connections are closed, the servers
// have seen them go.
const RESTART_PAUSE_MS = 5000;

// The cluster of the watch benchmark: 5,000 realistic pods on 1,000 nodes (reused when present).
const { layout } = await ensureCluster({ server: env.server, dispatcher: admin, token, size: RESTART_CLUSTER, concurrency: 32, log, etcd: env.etcd });
const nodeOf = (i: number): string => layout.nodes[i % layout.nodes.length]!;

// K identities: a service account each, with a token (bench/lib/restart.ts).
const { tokens, tokenFor } = await agentIdentities(env.server, admin, token, K);
log(`${K} agent identities ready, over ${layout.nodes.length} nodes`);

// ---------------------------------------------------------------- one phase

async function apiserverMetrics(): Promise<Sample[]> {
  return parseMetrics((await must([200], admin, token, 'GET', `${env.server}/metrics`)).body);
}

/** apiserver_request_total summed by verb and resource, the apiserver's own count of what it served. */
function requestCounts(samples: Sample[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const s of samples) {
    // A watch is counted in apiserver_request_total only when it ends; open ones are in this gauge.
    if (s.name === 'apiserver_longrunning_requests' && s.labels.verb === 'WATCH') {
      const key = `WATCH ${s.labels.group ? `${s.labels.resource}.${s.labels.group}` : s.labels.resource} (open)`;
      out.set(key, (out.get(key) ?? 0) + s.value);
      continue;
    }
    if (s.name !== 'apiserver_request_total') continue;
    const key = `${s.labels.verb} ${s.labels.group ? `${s.labels.resource}.${s.labels.group}` : s.labels.resource || '(non-resource)'}${s.labels.subresource ? `/${s.labels.subresource}` : ''}`;
    out.set(key, (out.get(key) ?? 0) + s.value);
  }
  return out;
}

interface Phase {
  target: string;
  agents: number;
  allSyncedMs: number;
  syncP50Ms: number;
  syncP99Ms: number;
  requestP99Ms: number;
  requests: number;
  throttled: number;
  errors: Record<string, number>;
  upstreamRequests: number;
  upstreamByKind: Record<string, number>;
  apiserverCpuSeconds: number;
  etcdCpuSeconds: number;
  apiserverRssPeakMb: number;
  apiserverRssBeforeMb: number;
  /** The process in front of the apiserver: Levee, or the bare replay of its answers. */
  leveeCpuSeconds?: number | undefined;
  leveeRssPeakMb?: number | undefined;
  /** This process, the agents' side: it shares the machine's cores with what it measures. */
  clientCpuSeconds: number;
}

async function round(target: string, origin: string, levee?: Pick<LeveeProcess, 'pid' | 'rss'>): Promise<Phase> {
  const pids = testenvPids();
  const before = requestCounts(await apiserverMetrics());
  const cpu0 = { api: cpuSeconds(pids.apiserver!) ?? 0, etcd: cpuSeconds(pids.etcd!) ?? 0, levee: levee ? cpuSeconds(levee.pid) ?? 0 : 0 };
  const rssBefore = rssBytes(pids.apiserver!) ?? 0;
  let rssPeak = rssBefore;
  let leveePeak = levee ? levee.rss() : 0;
  const sampler = setInterval(() => {
    rssPeak = Math.max(rssPeak, rssBytes(pids.apiserver!) ?? 0);
    if (levee) leveePeak = Math.max(leveePeak, levee.rss());
  }, 100);
  // The agents' process starts each round with its heap collected (npm run gives --expose-gc):
  // otherwise the round collects what the one before left, 2,000 closed connections, on the core
  // the agents share, and each target inherits a different amount of it.
  (globalThis as { gc?: () => void }).gc?.();
  const fleet = newFleet();
  const client0 = process.cpuUsage();
  const t0 = performance.now();
  const progress = setInterval(() => log(`${target}: ${fleet.synced}/${K} synced after ${((performance.now() - t0) / 1000).toFixed(0)} s`), 5000);
  const results = await Promise.all(Array.from({ length: K }, (_, i) => runAgent({ origin, token: tokens[i]!, node: nodeOf(i), watchList: WATCH_LIST, index: i, encoding: ENCODING }, t0, fleet)));
  const allSynced = performance.now() - t0;
  const client = process.cpuUsage(client0);
  clearInterval(sampler);
  clearInterval(progress);
  const cpu1 = { api: cpuSeconds(pids.apiserver!) ?? 0, etcd: cpuSeconds(pids.etcd!) ?? 0, levee: levee ? cpuSeconds(levee.pid) ?? 0 : 0 };
  const after = requestCounts(await apiserverMetrics());
  closeFleet(fleet);
  const byKind: Record<string, number> = {};
  let upstream = 0;
  for (const [k, v] of after) {
    const d = v - (before.get(k) ?? 0);
    // The benchmark's own two scrapes of /metrics are not the agents'.
    const own = k === 'get (non-resource)' ? 1 : 0;
    if (d - own > 0) {
      byKind[k] = d - own;
      upstream += d - own;
    }
  }
  const errors: Record<string, number> = {};
  for (const r of results) for (const [k, v] of Object.entries(r.errors)) errors[k] = (errors[k] ?? 0) + v;
  const syncs = results.map((r) => r.syncedMs);
  return {
    target,
    agents: K,
    allSyncedMs: allSynced,
    syncP50Ms: quantile(syncs, 0.5),
    syncP99Ms: quantile(syncs, 0.99),
    requestP99Ms: quantile(results.flatMap((r) => r.latenciesMs), 0.99),
    requests: results.reduce((n, r) => n + r.requests, 0),
    throttled: results.reduce((n, r) => n + r.throttled, 0),
    errors,
    upstreamRequests: upstream,
    upstreamByKind: byKind,
    apiserverCpuSeconds: cpu1.api - cpu0.api,
    etcdCpuSeconds: cpu1.etcd - cpu0.etcd,
    apiserverRssPeakMb: rssPeak / 1e6,
    apiserverRssBeforeMb: rssBefore / 1e6,
    leveeCpuSeconds: levee ? cpu1.levee - cpu0.levee : undefined,
    leveeRssPeakMb: levee ? leveePeak / 1e6 : undefined,
    clientCpuSeconds: (client.user + client.system) / 1e6,
  };
}

/**
 * A target's restarts as one: each figure the median over them (the middle one: there is an odd
 * number by default), errors summed, and what reached the apiserver as in the restart whose
 * all-synced time is the median.
 */
function typical(ps: Phase[]): Phase {
  const median = (f: (p: Phase) => number): number => quantile(ps.map(f), 0.5);
  const middle = [...ps].sort((a, b) => a.allSyncedMs - b.allSyncedMs)[Math.floor((ps.length - 1) / 2)]!;
  const errors: Record<string, number> = {};
  for (const p of ps) for (const [k, v] of Object.entries(p.errors)) errors[k] = (errors[k] ?? 0) + v;
  const optional = (f: (p: Phase) => number | undefined): number | undefined => (f(ps[0]!) === undefined ? undefined : median((p) => f(p) ?? 0));
  return {
    target: ps[0]!.target.replace(/, restart \d+$/, `, median of ${ps.length} restarts`),
    agents: K,
    allSyncedMs: median((p) => p.allSyncedMs),
    syncP50Ms: median((p) => p.syncP50Ms),
    syncP99Ms: median((p) => p.syncP99Ms),
    requestP99Ms: median((p) => p.requestP99Ms),
    requests: median((p) => p.requests),
    throttled: median((p) => p.throttled),
    errors,
    upstreamRequests: middle.upstreamRequests,
    upstreamByKind: middle.upstreamByKind,
    apiserverCpuSeconds: median((p) => p.apiserverCpuSeconds),
    etcdCpuSeconds: median((p) => p.etcdCpuSeconds),
    apiserverRssPeakMb: median((p) => p.apiserverRssPeakMb),
    apiserverRssBeforeMb: median((p) => p.apiserverRssBeforeMb),
    leveeCpuSeconds: optional((p) => p.leveeCpuSeconds),
    leveeRssPeakMb: optional((p) => p.leveeRssPeakMb),
    clientCpuSeconds: median((p) => p.clientCpuSeconds),
  };
}

// ---------------------------------------------------------------- run

// Pinned only now: generating the cluster and the identities is no part of the measurement.
const upstreamPids = Object.values(testenvPids()).filter((p) => p !== null);
const unpin = (): void => unpinProcesses(upstreamPids);
if (pinning) {
  pinSelf(pinning.client);
  for (const pid of upstreamPids) pinProcess(pid, pinning.server);
  process.once('exit', unpin);
  log(`pinned: agents on CPU ${pinning.client}; the apiserver, etcd and Levee on CPU ${pinning.server}`);
}

const pause = (): Promise<void> => new Promise((r) => setTimeout(r, RESTART_PAUSE_MS));
const firstDirect = await round('apiserver directly, first start', env.server);
log(`apiserver directly, first start: all ${K} synced in ${firstDirect.allSyncedMs.toFixed(0)} ms`);
await pause();

const applied = await kubectl(env.kubectl, env.kubeconfig, ['apply', '-f', resolve(import.meta.dirname, '../deploy/rbac.yaml')]);
if (applied.code !== 0) throw new Error(applied.stderr);
const levee = await startLevee({
  kubeconfig: writeKubeconfig(env.server, env.caFile, await tokenFor('levee', 'levee')),
  tls: env.leveeServing,
  extra: ['--cache', 'pods,nodes', '--authorization-local-rbac', '--authentication-local-serviceaccount-tokens'],
  nodeFlags: values.profile ? ['--cpu-prof', `--cpu-prof-dir=${resolve(values.profile)}`] : [],
  cpus: pinning?.server,
});
for (let i = 0; ; i++) {
  const ready = await call(admin, token, 'GET', `${levee.url.origin}/readyz`);
  if (ready.status === 200) break;
  if (i > 600) throw new Error('levee never became ready');
  await new Promise((r) => setTimeout(r, 100));
}
const firstVia = await round('through Levee, first start', levee.url.origin, levee);
log(`through Levee, first start: all ${K} synced in ${firstVia.allSyncedMs.toFixed(0)} ms`);

// The ceiling (JSON watch-lists): a bare server replaying Levee's own answers, each agent's node's.
const REPLAY = WATCH_LIST && ENCODING === 'json';
let replay: Awaited<ReturnType<typeof startWatchReplay>> | undefined;
if (REPLAY) {
  const answers = new Map<string, Buffer>();
  const nodes = layout.nodes.slice(0, Math.min(K, layout.nodes.length));
  await pool(nodes.length, 16, async (n) => {
    // A connection per node, as its agent has: each capture ends by cancelling its watch, and a
    // server takes a burst of cancellations on one connection for a rapid-reset attack.
    const session = connect(levee.url.origin, { secureContext });
    session.on('error', () => undefined);
    for (const path of agentPaths(nodes[n]!)) answers.set(path, await captureWatchList(session, `${path}${WATCH_LIST_QUERY}`, tokens[n]!));
    session.close();
  });
  replay = await startWatchReplay(env.leveeServing, pinning?.server);
  for (const [path, body] of answers) await replay.store(`${path}${WATCH_LIST_QUERY}`, body);
}
const replayProcess = replay && { pid: replay.pid, rss: () => rssBytes(replay.pid) ?? 0 };
let firstCeiling: Phase | undefined;
if (replay) {
  await pause();
  firstCeiling = await round('bare replay, first start', replay.origin, replayProcess);
  log(`bare replay, first start: all ${K} synced in ${firstCeiling.allSyncedMs.toFixed(0)} ms`);
}

// The restarts, the measurement: the agents were running and all start again at once. Each target
// in turn, RESTARTS times, so that what drifts over the run (the apiserver's heap, the machine)
// falls on all of them alike; each figure reported is the median over a target's restarts. Levee
// and the replay server stay up through the others' rounds, idle.
const restarts: { direct: Phase[]; via: Phase[]; ceiling: Phase[] } = { direct: [], via: [], ceiling: [] };
const targets: Array<[keyof typeof restarts, string, string, Pick<LeveeProcess, 'pid' | 'rss'> | undefined]> = [
  ['direct', 'apiserver directly', env.server, undefined],
  ['via', 'through Levee', levee.url.origin, levee],
];
if (replay) targets.push(['ceiling', 'bare replay', replay.origin, replayProcess]);
for (let i = 1; i <= RESTARTS; i++) {
  for (const [key, name, origin, server] of targets) {
    await pause();
    const p = await round(`${name}, restart ${i}`, origin, server);
    restarts[key].push(p);
    log(`${name}, restart ${i} of ${RESTARTS}: all ${K} synced in ${p.allSyncedMs.toFixed(0)} ms`);
  }
}
const leveeMetrics = parseMetrics((await call(admin, token, 'GET', `${levee.url.origin}/metrics`)).body);
await levee.stop();
await replay?.stop();
const direct = typical(restarts.direct);
const via = typical(restarts.via);
const ceiling = replay ? typical(restarts.ceiling) : undefined;
await admin.close();
unpin();

const reviews = {
  tokenReviews: metric(leveeMetrics, 'levee_token_reviews_total') ?? 0,
  subjectAccessReviews: metric(leveeMetrics, 'levee_subject_access_reviews_total') ?? 0,
  serviceAccountTokensVerifiedLocally: metric(leveeMetrics, 'levee_serviceaccount_tokens_verified_locally_total') ?? 0,
  serviceAccountTokenSignaturesChecked: metric(leveeMetrics, 'levee_serviceaccount_token_signatures_checked_total') ?? 0,
};
// Each agent's two watch-lists (its pods, its Node) are consistent reads: proven fresh and answered
// from the cache, or forwarded, whose reasons Levee counts.
const consistentOf = (resource: string): { verified: number; forwarded: number; failed: number; meanWaitMs: number | null } => {
  const waits = metric(leveeMetrics, 'levee_consistent_read_wait_seconds_count', { resource }) ?? 0;
  return {
    verified: metric(leveeMetrics, 'levee_consistent_reads_total', { resource, result: 'verified' }) ?? 0,
    forwarded: metric(leveeMetrics, 'levee_consistent_reads_total', { resource, result: 'forwarded' }) ?? 0,
    // A watch-list whose initial events went out and whose proof then did not come: ended with a
    // 504, which the agent counts as a stream that ended before its initial state, and retries.
    failed: metric(leveeMetrics, 'levee_consistent_reads_total', { resource, result: 'failed' }) ?? 0,
    meanWaitMs: waits === 0 ? null : ((metric(leveeMetrics, 'levee_consistent_read_wait_seconds_sum', { resource }) ?? 0) / waits) * 1000,
  };
};
const consistent = consistentOf('pods');
const consistentNodes = consistentOf('nodes');
const forwardedByReason: Record<string, number> = {};
for (const s of leveeMetrics) if (s.name === 'levee_read_forwarded_total' && s.value > 0) forwardedByReason[s.labels['reason'] ?? '?'] = s.value;
// What each synced agent cost the server side: the apiserver and etcd directly; Levee, the
// apiserver and etcd through Levee.
const serverCpu = (p: Phase): number => p.apiserverCpuSeconds + p.etcdCpuSeconds + (p.leveeCpuSeconds ?? 0);
const perAgent = (p: Phase): number => (serverCpu(p) / K) * 1000;
const perAgentMs = { direct: perAgent(direct), via: perAgent(via), ceiling: ceiling ? perAgent(ceiling) : null };
const report = { benchmark: 'massrestart', pinning: pinning ?? null, serverCpuPerSyncedAgentMs: perAgentMs, informers: values.informers, encoding: ENCODING, leveeConsistentReadsOfPods: consistent, leveeConsistentReadsOfNodes: consistentNodes, leveeReadsForwardedByReason: forwardedByReason, date: new Date().toISOString(), node: process.version, apiserver: env.version, agents: K, nodes: layout.nodes.length, pods: layout.pods.length, direct, via, ceiling: ceiling ?? null, restarts, firstStart: { direct: firstDirect, via: firstVia, ceiling: firstCeiling ?? null }, leveeReviewsSinceStart: reviews };
const out = resolve(import.meta.dirname, 'results');
mkdirSync(out, { recursive: true });
writeFileSync(resolve(out, 'massrestart.json'), JSON.stringify(report, null, 2) + '\n');

const f0 = (x: number) => x.toFixed(0);
const f1 = (x: number) => x.toFixed(1);
const errs = (e: Record<string, number>) => Object.entries(e).map(([k, v]) => `${k}×${v}`).join(' ') || 'none';
const kinds = (p: Phase) => Object.entries(p.upstreamByKind).sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${v}`).join(', ');
const md = `# Mass restart: ${K} agents at once

${report.date}, Kubernetes ${env.version}, Node ${process.version}; ${layout.pods.length} pods on ${layout.nodes.length} nodes, ${K} agents
(service accounts, one HTTP/2 connection each) on ${Math.min(K, layout.nodes.length)} nodes. ${WATCH_LIST ? `Each agent starts as a client-go 1.35+ informer does, for the pods
on its node and its Node: a consistent watch-list (no resourceVersion) in ${ENCODING === 'protobuf' ? 'protobuf (as typed clients ask)' : 'JSON'}; synced = both initial-events-end bookmarks received.` : `Each agent LISTs the pods on its node
and its Node (resourceVersion=0), then WATCHes both; synced = both watches open.`} 429s are retried after Retry-After.
Directly and through Levee (\`--cache pods,nodes --authorization-local-rbac --authentication-local-serviceaccount-tokens\`, synced before the agents start, running as
deploy/rbac.yaml's account). Watches that reached the apiserver are counted while open (apiserver_longrunning_requests).
Each target first sees the agents' first start, then their restarts, each ${RESTART_PAUSE_MS / 1000} s after every connection of the round before closed; the targets
take turns (apiserver, Levee${ceiling ? ', bare replay' : ''}), ${RESTARTS} restarts each. The restarts are the measurement below, each figure the median over a target's
${RESTARTS}; the first start follows.
${pinning ? `Pinned (taskset): the agents on CPU ${pinning.client}; the apiserver, etcd and Levee on CPU ${pinning.server}.` : 'Not pinned: agents and servers share every CPU.'}

| | apiserver directly | through Levee | ratio |
|---|---:|---:|---:|
| all agents synced, ms | ${f0(direct.allSyncedMs)} | ${f0(via.allSyncedMs)} | ${(direct.allSyncedMs / via.allSyncedMs).toFixed(1)}× sooner |
| server-side CPU per synced agent, ms (apiserver + etcd; through Levee also Levee) | ${f1(perAgentMs.direct)} | ${f1(perAgentMs.via)} | ${(perAgentMs.direct / perAgentMs.via).toFixed(1)}× less |
| agent sync p50 / p99, ms | ${f0(direct.syncP50Ms)} / ${f0(direct.syncP99Ms)} | ${f0(via.syncP50Ms)} / ${f0(via.syncP99Ms)} | - |
| request latency p99, ms | ${f0(direct.requestP99Ms)} | ${f0(via.requestP99Ms)} | - |
| requests sent by agents (429s retried) | ${direct.requests} (${direct.throttled} × 429) | ${via.requests} (${via.throttled} × 429) | - |
| errors other than 429 | ${errs(direct.errors)} | ${errs(via.errors)} | - |
| requests that reached the apiserver | ${direct.upstreamRequests} | ${via.upstreamRequests} | ${(direct.upstreamRequests / Math.max(1, via.upstreamRequests)).toFixed(1)}× fewer |
| apiserver CPU, s | ${f1(direct.apiserverCpuSeconds)} | ${f1(via.apiserverCpuSeconds)} | - |
| etcd CPU, s | ${f1(direct.etcdCpuSeconds)} | ${f1(via.etcdCpuSeconds)} | - |
| apiserver RSS before → peak, MB | ${f0(direct.apiserverRssBeforeMb)} → ${f0(direct.apiserverRssPeakMb)} | ${f0(via.apiserverRssBeforeMb)} → ${f0(via.apiserverRssPeakMb)} | - |
| Levee CPU, s / RSS peak, MB | - | ${f1(via.leveeCpuSeconds ?? 0)} / ${f0(via.leveeRssPeakMb ?? 0)} | - |
| agents' CPU (this benchmark's process), s | ${f1(direct.clientCpuSeconds)} | ${f1(via.clientCpuSeconds)} | - |

Each restart, in the order run (all agents synced, ms / server-side CPU per synced agent, ms):

| restart | apiserver directly | through Levee | ratio (sooner / less CPU) |${ceiling ? ' bare replay |' : ''}
|---:|---:|---:|---:|${ceiling ? '---:|' : ''}
${restarts.direct.map((d, i) => { const v = restarts.via[i]!; const c = restarts.ceiling[i]; return `| ${i + 1} | ${f0(d.allSyncedMs)} / ${f1(perAgent(d))} | ${f0(v.allSyncedMs)} / ${f1(perAgent(v))} | ${(d.allSyncedMs / v.allSyncedMs).toFixed(1)}× / ${(perAgent(d) / perAgent(v)).toFixed(1)}× |${c ? ` ${f0(c.allSyncedMs)} / ${f1(perAgent(c))} |` : ''}`; }).join('\n')}

The agents' first start, the server never having served them before (Levee's code not yet optimized by V8, its heap not grown, no token seen):

| | apiserver directly | through Levee | ratio |${firstCeiling ? ' bare replay | Levee ÷ replay |' : ''}
|---|---:|---:|---:|${firstCeiling ? '---:|---:|' : ''}
| all agents synced, ms | ${f0(firstDirect.allSyncedMs)} | ${f0(firstVia.allSyncedMs)} | ${(firstDirect.allSyncedMs / firstVia.allSyncedMs).toFixed(1)}× sooner |${firstCeiling ? ` ${f0(firstCeiling.allSyncedMs)} | ${(firstVia.allSyncedMs / firstCeiling.allSyncedMs).toFixed(2)} |` : ''}
| server-side CPU per synced agent, ms | ${f1(perAgent(firstDirect))} | ${f1(perAgent(firstVia))} | ${(perAgent(firstDirect) / perAgent(firstVia)).toFixed(1)}× less |${firstCeiling ? ` ${f1(perAgent(firstCeiling))} | ${(perAgent(firstVia) / perAgent(firstCeiling)).toFixed(2)} |` : ''}
| requests sent by agents (429s retried) | ${firstDirect.requests} (${firstDirect.throttled} × 429) | ${firstVia.requests} (${firstVia.throttled} × 429) | - |${firstCeiling ? ` ${firstCeiling.requests} | - |` : ''}
| errors other than 429 | ${errs(firstDirect.errors)} | ${errs(firstVia.errors)} | - |${firstCeiling ? ` ${errs(firstCeiling.errors)} | - |` : ''}
| agents' CPU, s | ${f1(firstDirect.clientCpuSeconds)} | ${f1(firstVia.clientCpuSeconds)} | - |${firstCeiling ? ` ${f1(firstCeiling.clientCpuSeconds)} | - |` : ''}

${
  ceiling
    ? `The machine's ceiling, at the restarts (medians): a bare HTTP/2 server (bench/lib/watchreplay.ts) replaying Levee's answers to the same watch-lists, each in one write,
with nothing authenticated, authorized or looked up; its own process, Levee's certificate and Node flags, on the same CPU, the apiserver and etcd idle beside it.

| | through Levee | bare replay | Levee ÷ replay |
|---|---:|---:|---:|
| all agents synced, ms | ${f0(via.allSyncedMs)} | ${f0(ceiling.allSyncedMs)} | ${(via.allSyncedMs / ceiling.allSyncedMs).toFixed(2)} |
| server-side CPU per synced agent, ms (with the apiserver and etcd) | ${f1(perAgentMs.via)} | ${f1(perAgentMs.ceiling!)} | ${(perAgentMs.via / perAgentMs.ceiling!).toFixed(2)} |
| CPU of the process in front, s / its RSS peak, MB | ${f1(via.leveeCpuSeconds ?? 0)} / ${f0(via.leveeRssPeakMb ?? 0)} | ${f1(ceiling.leveeCpuSeconds ?? 0)} / ${f0(ceiling.leveeRssPeakMb ?? 0)} | - |
| agents' CPU, s | ${f1(via.clientCpuSeconds)} | ${f1(ceiling.clientCpuSeconds)} | - |
| errors | ${errs(via.errors)} | ${errs(ceiling.errors)} | - |

`
    : ''
}What reached the apiserver, by verb and resource:
- directly: ${kinds(direct)}
- through Levee: ${kinds(via)}

Consistent reads through Levee (each agent's watch-lists in all rounds, and the replay's capture of them), proven fresh and answered from the cache / forwarded / failed (a watch-list ended with a 504, its proof not come in time), and their mean wait for the proof:
pods ${consistent.verified} / ${consistent.forwarded} / ${consistent.failed}, ${consistent.meanWaitMs === null ? '-' : f0(consistent.meanWaitMs)} ms; nodes ${consistentNodes.verified} / ${consistentNodes.forwarded} / ${consistentNodes.failed}, ${consistentNodes.meanWaitMs === null ? '-' : f0(consistentNodes.meanWaitMs)} ms.
Reads Levee forwarded, by reason: ${Object.entries(forwardedByReason).map(([k, v]) => `${k} ${v}`).join(', ') || 'none'}.
Levee since its start (all rounds): ${reviews.tokenReviews} TokenReviews, ${reviews.subjectAccessReviews} SubjectAccessReviews sent;
${reviews.serviceAccountTokensVerifiedLocally} service-account token authentications verified locally, ${reviews.serviceAccountTokenSignaturesChecked} signatures checked.
`;
writeFileSync(resolve(out, 'massrestart.md'), md);
console.log(md);
