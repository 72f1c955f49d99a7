// Worker threads: does Levee's throughput grow with the cores it is given, and is its cache held
// once? Two Levees serve the same cluster from their caches side by side: one with one thread,
// pinned to one CPU (the load generator on the other), and one with --workers N on N CPUs (the
// load generator sharing them, which only handicaps it). Rounds alternate between them; each
// round runs, for each, cached GETs of one pod and LISTs of one node's pods (resourceVersion=0,
// as bench:list asks), and GETs each on a new TLS connection (connections per second). The load
// generator is testenv/cmd/load (Go, HTTP/1.1, -c connections), so its CPU per request is small
// next to the server's. Reported: medians of requests per second, the ratio N threads : 1 thread
// (goal ≥ 0.8·N), and both Levees' RSS at rest after the rounds (goal: N threads ≤ 1.2× one).
//
//   npm run bench:workers                      # --workers 2, 3 rounds of 5 s
//   npm run bench:workers -- --rounds 5 --seconds 10 --connections 64
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

const run = promisify(execFile);
const { values: flags } = parseArgs({
  options: {
    workers: { type: 'string', default: String(availableParallelism()) },
    rounds: { type: 'string', default: '3' },
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
const one = await startLevee({ cli, kubeconfig: env.kubeconfig, tls: env.leveeServing, cpus: String(lastCpu), extra: [...common, '--workers', '1'] });
const many = await startLevee({ cli, kubeconfig: env.kubeconfig, tls: env.leveeServing, cpus: allCpus, extra: [...common, '--workers', String(N)] });
const stopAll = async (): Promise<void> => {
  await Promise.all([one.stop(), many.stop()]);
};
process.once('SIGINT', () => void stopAll().then(() => process.exit(130)));
await Promise.all([waitReady(one, agent, 300_000), waitReady(many, agent, 300_000)]);
const synced = { one: one.rss(), many: many.rss() };
log(`ready; RSS after sync: 1 thread ${mb(synced.one)}, ${N} threads ${mb(synced.many)}`);

interface LoadResult {
  requests: number;
  errors: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  /** The load generator's own CPU. */
  cpuSeconds: number;
  /** Levee's CPU over the same run, from /proc (every thread). */
  leveeCpuSeconds: number;
  firstError?: string;
}

const scenarios = [
  { name: 'GET one pod', paths: pods.map((p) => `/api/v1/namespaces/${p.metadata.namespace}/pods/${p.metadata.name}?resourceVersion=0`), fresh: false },
  { name: 'LIST pods of one node', paths: nodes.map((n) => `/api/v1/pods?fieldSelector=${encodeURIComponent(`spec.nodeName=${n}`)}&resourceVersion=0`), fresh: false },
  { name: 'GET on a new TLS connection', paths: pods.map((p) => `/api/v1/namespaces/${p.metadata.namespace}/pods/${p.metadata.name}?resourceVersion=0`), fresh: true },
];

async function load(target: LeveeProcess, cpus: string, paths: string[], fresh: boolean): Promise<LoadResult> {
  const args = ['-url', target.url.origin, '-path', paths.join(','), '-token', token, '-ca', env.caFile, '-c', flags.connections, '-d', `${flags.seconds}s`];
  if (fresh) args.push('-new-connections');
  const [cmd, cmdArgs] = pinned(cpus, env.load, args);
  const before = cpuSeconds(target.pid) ?? 0;
  const { stdout } = await run(cmd, cmdArgs, { maxBuffer: 1 << 20 });
  const r = { ...(JSON.parse(stdout) as Omit<LoadResult, 'leveeCpuSeconds'>), leveeCpuSeconds: (cpuSeconds(target.pid) ?? 0) - before };
  if (r.errors > 0) log(`  ${r.errors} errors, first: ${r.firstError}`);
  return r;
}

const results = new Map<string, { one: LoadResult[]; many: LoadResult[] }>();
for (const s of scenarios) results.set(s.name, { one: [], many: [] });
for (let round = 0; round < ROUNDS; round++) {
  for (const s of scenarios) {
    const order = round % 2 === 0 ? (['one', 'many'] as const) : (['many', 'one'] as const);
    for (const which of order) {
      // One thread: the load generator on the CPUs Levee does not use. N threads: on all of them.
      const r = which === 'one' ? await load(one, lastCpu === 0 ? '0' : `0-${lastCpu - 1}`, s.paths, s.fresh) : await load(many, allCpus, s.paths, s.fresh);
      results.get(s.name)![which].push(r);
      log(
        `round ${round + 1} ${s.name}, ${which === 'one' ? '1 thread' : `${N} threads`}: ${Math.round(r.perSecond)}/s, p50 ${r.p50Ms} ms, p99 ${r.p99Ms} ms, ` +
          `Levee ${perRequest(r.leveeCpuSeconds, r)} µs CPU/request, load generator ${perRequest(r.cpuSeconds, r)}`,
      );
    }
  }
}

// At rest: what each holds once the load is over and every thread has had its idle heap trim (heaptrim.ts: once a minute at most).
await new Promise((r) => setTimeout(r, 70_000));
const rest = { one: one.rss(), many: many.rss() };
await stopAll();
await agent.close();

const median = (xs: number[]): number => quantile(xs, 0.5);
const lines = [
  `# Worker threads: 1 thread against ${N}, ${ROUNDS} rounds of ${flags.seconds} s, ${flags.connections} connections, ${pods.length} pods sampled on ${nodes.length} nodes`,
  '',
  'Throughput is measured with the load generator on the cores Levee does not use (1 thread) and on',
  `the same ${N} cores as Levee (${N} threads), so the ratio is what this machine gives; Levee's CPU per`,
  'request shows what each core does: equal figures mean throughput grows with the cores Levee has.',
  '',
  `| scenario | 1 thread (req/s) | ${N} threads (req/s) | ratio (goal ≥ ${(0.8 * N).toFixed(1)}) | Levee CPU per request, 1 / ${N} threads | load generator CPU per request | ${N} threads on ${N} free cores |`,
  '|---|---|---|---|---|---|---|',
];
for (const s of scenarios) {
  const r = results.get(s.name)!;
  const a = median(r.one.map((x) => x.perSecond));
  const b = median(r.many.map((x) => x.perSecond));
  const cpuA = median(r.one.map((x) => x.leveeCpuSeconds / x.requests));
  const cpuB = median(r.many.map((x) => x.leveeCpuSeconds / x.requests));
  const gen = median([...r.one, ...r.many].map((x) => x.cpuSeconds / x.requests));
  // What N threads would serve with every core to themselves: N cores over the CPU one request takes there, against one core over its own.
  const projected = (N / cpuB) / (1 / cpuA);
  lines.push(
    `| ${s.name} | ${Math.round(a)} | ${Math.round(b)} | ${(b / a).toFixed(2)}× ${b / a >= 0.8 * N ? 'met' : 'not met'} | ${Math.round(cpuA * 1e6)} / ${Math.round(cpuB * 1e6)} µs | ${Math.round(gen * 1e6)} µs | ${projected.toFixed(2)}× |`,
  );
}
lines.push(
  '',
  `RSS after sync: 1 thread ${mb(synced.one)}, ${N} threads ${mb(synced.many)} (${(synced.many / synced.one).toFixed(2)}×)`,
  `RSS at rest after the rounds: 1 thread ${mb(rest.one)}, ${N} threads ${mb(rest.many)} (${(rest.many / rest.one).toFixed(2)}×; goal ≤ 1.2×)`,
);
process.stdout.write(`${lines.join('\n')}\n`);

function perRequest(seconds: number, r: { requests: number }): string {
  return String(Math.round((seconds / Math.max(1, r.requests)) * 1e6));
}

function mb(bytes: number): string {
  return `${(bytes / 1e6).toFixed(1)} MB`;
}
