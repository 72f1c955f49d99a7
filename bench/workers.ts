// Worker threads: does Levee's throughput grow with the cores it is given, and is its cache held
// once? Two Levees serve the same cluster from their caches side by side: one with one thread on
// one CPU, one with --workers N on N CPUs. The load generator runs on the server's own CPUs, so
// each configuration is the whole measured system (server and its load) on 1 or N cores, on equal
// terms; on a machine with as few cores as this one there are no others to give it. As a
// reference, the one thread is also measured with the load generator on the other CPUs (a core of
// its own). Each round runs, for each, cached GETs of one pod and LISTs of one node's pods
// (resourceVersion=0, as bench:list asks), and GETs each on a new TLS connection (connections per
// second), in alternating order. The load generator is testenv/cmd/load (Go, HTTP/1.1, -c
// connections; its CPU per request is reported). Reported: medians of requests per second, the
// ratio N cores : 1 core (goal ≥ 0.8·N), Levee's CPU per request from /proc, and both Levees' RSS
// after sync, idle 15 s after it, and at rest after the load (goal: N threads ≤ 1.2× one).
//
// The ceiling, in the same rounds: a bare TLS server replaying Levee's own answers
// (bench/lib/replay.ts), with one thread on one core and N threads on N cores, under the same
// load. Its ratio is what N cores give a server on this machine with nothing behind it (the
// kernel's loopback, TLS and the load generator share the cores); Levee's ratio is read against it.
//
//   npm run bench:workers                      # --workers 2, 5 rounds of 5 s
//   npm run bench:workers -- --rounds 7 --seconds 10 --connections 64
//
// Levee runs as it ships: compiled to dist/ (npm run build) first; from src/ each thread would
// also hold Node's TypeScript stripper. Uses whatever pods the test environment holds (bench:list
// generates them); brings it up bare.
import { execFile, execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { availableParallelism } from 'node:os';
import { promisify } from 'node:util';
import { parseArgs } from 'node:util';
import { request } from 'undici';
import { quietEnv } from './lib/env.ts';
import { startLevee, type LeveeProcess } from '../test/support/levee.ts';
import { agentFor } from '../test/support/http.ts';
import { waitReady } from '../test/support/wait.ts';
import { pinned } from '../test/support/cpus.ts';
import { quantile } from './lib/stats.ts';
import { cpuSeconds } from './lib/watchproc.ts';
import { startReplay, type ReplayServer } from './lib/replay.ts';

const run = promisify(execFile);
const { values: flags } = parseArgs({
  options: {
    workers: { type: 'string', default: String(availableParallelism()) },
    rounds: { type: 'string', default: '5' },
    seconds: { type: 'string', default: '5' },
    connections: { type: 'string', default: '32' },
    cache: { type: 'string', default: 'pods,nodes' },
  },
});
const N = Number(flags.workers);
const ROUNDS = Number(flags.rounds);
const log = (line: string): void => void process.stderr.write(`${line}\n`);
if (N < 2) throw new Error('--workers must be at least 2: the comparison is with one thread');
const lastCpu = availableParallelism() - 1;
const allCpus = `0-${Math.min(N, availableParallelism()) - 1}`;

const env = await quietEnv();
const agent = agentFor(env.caFile);
const token = env.tokens.admin;
const sample = await request(`${env.server}/api/v1/pods?limit=500`, { dispatcher: agent, headers: { authorization: `Bearer ${token}` } });
const pods = ((await sample.body.json()) as { items: Array<{ metadata: { namespace: string; name: string }; spec: { nodeName?: string } }> }).items;
if (pods.length === 0) throw new Error('the test environment holds no pods: run bench:list first (or bench:list -- --generate-only)');
const nodes = [...new Set(pods.map((p) => p.spec.nodeName).filter((n): n is string => !!n))];

const root = resolve(import.meta.dirname, '..');
execFileSync(process.execPath, [resolve(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
const cli = resolve(root, 'dist/cli.js');
const common = ['--cache', flags.cache];
log(`starting Levee with 1 thread on CPU ${lastCpu}, and with ${N} threads on CPUs ${allCpus}`);
// Each Levee's log (a line per request) goes straight to a file: read here, it would take CPU from
// the cores being measured.
const one = await startLevee({ cli, kubeconfig: env.kubeconfig, tls: env.leveeServing, cpus: String(lastCpu), extra: [...common, '--workers', '1'], outputToFile: true });
const many = await startLevee({ cli, kubeconfig: env.kubeconfig, tls: env.leveeServing, cpus: allCpus, extra: [...common, '--workers', String(N)], outputToFile: true });
const stopAll = async (): Promise<void> => {
  await Promise.all([one.stop(), many.stop()]);
};
await Promise.all([waitReady(one, agent, 300_000), waitReady(many, agent, 300_000)]);
const synced = { one: one.rss(), many: many.rss() };
log(`ready; RSS after sync: 1 thread ${mb(synced.one)}, ${N} threads ${mb(synced.many)}`);
// Once idle after the sync: the sync's garbage given back by each thread's idle heap trim
// (heaptrim.ts: a check every 5 s, a trim after a whole quiet check), before any load.
await new Promise((r) => setTimeout(r, 15_000));
const settled = { one: one.rss(), many: many.rss() };
log(`RSS 15 s after sync: 1 thread ${mb(settled.one)}, ${N} threads ${mb(settled.many)}`);

/** What the load is sent to: a Levee or a replay server. */
interface Target {
  origin: string;
  pid: number;
}
const levee = (l: LeveeProcess): Target => ({ origin: l.url.origin, pid: l.pid });

interface LoadResult {
  requests: number;
  errors: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  /** The load generator's own CPU. */
  cpuSeconds: number;
  /** The server's CPU over the same run, from /proc (every thread). */
  serverCpuSeconds: number;
  firstError?: string;
}

const scenarios = [
  { name: 'GET one pod', paths: pods.map((p) => `/api/v1/namespaces/${p.metadata.namespace}/pods/${p.metadata.name}?resourceVersion=0`), fresh: false },
  { name: 'LIST pods of one node', paths: nodes.map((n) => `/api/v1/pods?fieldSelector=${encodeURIComponent(`spec.nodeName=${n}`)}&resourceVersion=0`), fresh: false },
  { name: 'GET on a new TLS connection', paths: pods.map((p) => `/api/v1/namespaces/${p.metadata.namespace}/pods/${p.metadata.name}?resourceVersion=0`), fresh: true },
];

async function load(target: Target, cpus: string, paths: string[], fresh: boolean): Promise<LoadResult> {
  const args = ['-url', target.origin, '-path', paths.join(','), '-token', token, '-ca', env.caFile, '-c', flags.connections, '-d', `${flags.seconds}s`];
  if (fresh) args.push('-new-connections');
  const [cmd, cmdArgs] = pinned(cpus, env.load, args);
  const before = cpuSeconds(target.pid) ?? 0;
  const { stdout } = await run(cmd, cmdArgs, { maxBuffer: 1 << 20 });
  const r = { ...(JSON.parse(stdout) as Omit<LoadResult, 'serverCpuSeconds'>), serverCpuSeconds: (cpuSeconds(target.pid) ?? 0) - before };
  if (r.errors > 0) log(`  ${r.errors} errors, first: ${r.firstError}`);
  return r;
}

// The ceiling's two servers, on the CPUs of the two Levees, holding Levee's own answer to every path.
const replayOne = await startReplay(env.leveeServing, String(lastCpu), 1);
const replayMany = await startReplay(env.leveeServing, allCpus, N);
const stopReplays = (): Promise<unknown> => Promise.all([replayOne.stop(), replayMany.stop()]);
const replayPaths = new Set(scenarios.flatMap((s) => s.paths));
for (const path of replayPaths) {
  const res = await request(`${one.url.origin}${path}`, { dispatcher: agent, headers: { authorization: `Bearer ${token}`, accept: 'application/json' } });
  const body = Buffer.from(await res.body.arrayBuffer());
  if (res.statusCode !== 200) throw new Error(`${path}: ${res.statusCode} from Levee: ${body.toString().slice(0, 200)}`);
  await Promise.all([replayOne.store(path, body), replayMany.store(path, body)]);
}
log(`replay servers hold Levee's answers to ${replayPaths.size} paths`);

type Config = 'one' | 'many' | 'alone' | 'replayOne' | 'replayMany';
const LABELS: Record<Config, string> = {
  one: '1 thread on 1 core',
  many: `${N} threads on ${N} cores`,
  alone: '1 thread, load generator on another core',
  replayOne: 'replay, 1 thread on 1 core',
  replayMany: `replay, ${N} threads on ${N} cores`,
};
const results = new Map<string, Record<Config, LoadResult[]>>();
for (const s of scenarios) results.set(s.name, { one: [], many: [], alone: [], replayOne: [], replayMany: [] });
const configs: Config[] = ['one', 'many', 'alone', 'replayOne', 'replayMany'];
const replayTarget = (r: ReplayServer): Target => ({ origin: r.origin, pid: r.pid });
for (let round = 0; round < ROUNDS; round++) {
  for (const s of scenarios) {
    const order = round % 2 === 0 ? configs : [...configs].reverse();
    for (const which of order) {
      const [target, cpus]: [Target, string] =
        which === 'one'
          ? [levee(one), String(lastCpu)]
          : which === 'many'
            ? [levee(many), allCpus]
            : which === 'alone'
              ? [levee(one), lastCpu === 0 ? '0' : `0-${lastCpu - 1}`]
              : which === 'replayOne'
                ? [replayTarget(replayOne), String(lastCpu)]
                : [replayTarget(replayMany), allCpus];
      const r = await load(target, cpus, s.paths, s.fresh);
      results.get(s.name)![which].push(r);
      log(
        `round ${round + 1} ${s.name}, ${LABELS[which]}: ${Math.round(r.perSecond)}/s, p50 ${r.p50Ms} ms, p99 ${r.p99Ms} ms, ` +
          `server ${perRequest(r.serverCpuSeconds, r)} µs CPU/request, load generator ${perRequest(r.cpuSeconds, r)}`,
      );
    }
  }
}
await stopReplays();

// At rest: what each holds once the load is over and every thread has had its idle heap trim (heaptrim.ts: once a minute at most).
await new Promise((r) => setTimeout(r, 70_000));
const rest = { one: one.rss(), many: many.rss() };
await stopAll();
await agent.close();

const median = (xs: number[]): number => quantile(xs, 0.5);
const lines = [
  `# Worker threads: 1 core against ${N}, ${ROUNDS} rounds of ${flags.seconds} s, ${flags.connections} connections, ${pods.length} pods sampled on ${nodes.length} nodes`,
  '',
  `Each configuration is Levee and its load generator together on 1 core or on ${N}. Requests per second (medians):`,
  '',
  `| scenario | 1 thread on 1 core | ${N} threads on ${N} cores | ratio (goal ≥ ${(0.8 * N).toFixed(1)}) | 1 thread, load generator on another core | Levee CPU per request (1 core / ${N} cores / reference) | load generator CPU per request |`,
  '|---|---|---|---|---|---|---|',
];
for (const s of scenarios) {
  const r = results.get(s.name)!;
  const rate = (c: Config): number => median(r[c].map((x) => x.perSecond));
  const cpu = (c: Config): string => String(Math.round(median(r[c].map((x) => x.serverCpuSeconds / x.requests)) * 1e6));
  const gen = median((['one', 'many', 'alone'] as const).flatMap((c) => r[c].map((x) => x.cpuSeconds / x.requests)));
  const ratio = rate('many') / rate('one');
  lines.push(
    `| ${s.name} | ${Math.round(rate('one'))} | ${Math.round(rate('many'))} | ${ratio.toFixed(2)}× ${ratio >= 0.8 * N ? 'met' : 'not met'} | ${Math.round(rate('alone'))} | ${cpu('one')} / ${cpu('many')} / ${cpu('alone')} µs | ${Math.round(gen * 1e6)} µs |`,
  );
}
lines.push(
  '',
  `The ceiling: a bare TLS server replaying Levee's answers, under the same load on the same cores (requests per second, medians):`,
  '',
  `| scenario | replay, 1 thread on 1 core | replay, ${N} threads on ${N} cores | ceiling ratio | Levee's ratio | Levee's ÷ ceiling |`,
  '|---|---|---|---|---|---|',
);
for (const s of scenarios) {
  const r = results.get(s.name)!;
  const rate = (c: Config): number => median(r[c].map((x) => x.perSecond));
  const ceiling = rate('replayMany') / rate('replayOne');
  const ratio = rate('many') / rate('one');
  lines.push(`| ${s.name} | ${Math.round(rate('replayOne'))} | ${Math.round(rate('replayMany'))} | ${ceiling.toFixed(2)}× | ${ratio.toFixed(2)}× | ${(ratio / ceiling).toFixed(2)} |`);
}
lines.push(
  '',
  `RSS after sync: 1 thread ${mb(synced.one)}, ${N} threads ${mb(synced.many)} (${(synced.many / synced.one).toFixed(2)}×)`,
  `RSS 15 s after sync, idle: 1 thread ${mb(settled.one)}, ${N} threads ${mb(settled.many)} (${(settled.many / settled.one).toFixed(2)}×; goal ≤ 1.2×)`,
  `RSS at rest after the rounds: 1 thread ${mb(rest.one)}, ${N} threads ${mb(rest.many)} (${(rest.many / rest.one).toFixed(2)}×; goal ≤ 1.2×)`,
);
process.stdout.write(`${lines.join('\n')}\n`);

function perRequest(seconds: number, r: { requests: number }): string {
  return String(Math.round((seconds / Math.max(1, r.requests)) * 1e6));
}

function mb(bytes: number): string {
  return `${(bytes / 1e6).toFixed(1)} MB`;
}
