// A/B of Levee against itself: the working tree against a baseline commit, in one run, so that a
// change to the read path is measured by what it changes and not by the day's noise. Both Levees
// serve the same cluster from their caches, pinned to the same CPU (the client on the other), and
// every round asks both the same query (resourceVersion=0), in alternating order: GET and LIST over
// HTTP/1.1, and a node agent's watch-list of its pods over HTTP/2, read to its initial-events-end
// bookmark and then cancelled. Reported per scenario: latency p50
// and p99 of each, and the CPU each Levee spent per request (from /proc, over the timed rounds),
// which is steadier than latency on a shared machine.
//
//   npm run bench:ab                          # baseline HEAD (the working tree's uncommitted change)
//   npm run bench:ab -- --baseline HEAD~3 --reps 1000
//   npm run bench:ab -- --only watch-list    # the scenarios whose name holds this
//
// The baseline is checked out beside this one, with its own Node flags, and removed afterwards
// (bench/lib/baseline.ts). Uses whatever pods the test environment holds (bench:list or
// bench:watch generate them); brings it up bare.
import { NODE_FLAGS } from '../src/nodeflags.ts';
import { checkoutBaseline } from './lib/baseline.ts';
import { parseArgs } from 'node:util';
import { quietEnv } from './lib/env.ts';
import { startLevee, type LeveeProcess } from '../test/support/levee.ts';
import { agentFor } from '../test/support/http.ts';
import { waitReady } from '../test/support/wait.ts';
import { pinSelf, splitCpus } from '../test/support/cpus.ts';
import { timedGet } from './lib/client.ts';
import { cpuSeconds } from './lib/watchproc.ts';
import { quantile } from './lib/stats.ts';
import { request } from 'undici';
import { connect, type ClientHttp2Session } from 'node:http2';
import { readFileSync } from 'node:fs';
import { captureWatchList, WATCH_LIST_QUERY } from './lib/agent.ts';

const { values: flags } = parseArgs({
  options: {
    baseline: { type: 'string', default: 'HEAD' },
    reps: { type: 'string', default: '600' },
    warmup: { type: 'string', default: '500' },
    cache: { type: 'string', default: 'pods,nodes' },
    // Only the scenarios whose name holds this text.
    only: { type: 'string', default: '' },
  },
});
const REPS = Number(flags.reps);
const WARMUP = Number(flags.warmup);
const log = (line: string): void => void process.stderr.write(`${line}\n`);

const env = await quietEnv();
const agent = agentFor(env.caFile);
const token = env.tokens.admin;

// Pods to read: a sample of what the cluster holds, and the nodes they run on.
const sample = await request(`${env.server}/api/v1/pods?limit=500`, { dispatcher: agent, headers: { authorization: `Bearer ${token}` } });
const pods = ((await sample.body.json()) as { items: Array<{ metadata: { namespace: string; name: string }; spec: { nodeName?: string } }> }).items;
if (pods.length === 0) throw new Error('the test environment holds no pods: run bench:list or bench:watch first');
const nodes = [...new Set(pods.map((p) => p.spec.nodeName).filter((n): n is string => !!n))];

const baseline = await checkoutBaseline(flags.baseline);

const pinning = splitCpus();
if (pinning) pinSelf(pinning.client);
const extra = ['--cache', flags.cache];
let a: LeveeProcess | undefined;
let b: LeveeProcess | undefined;
const sessions: ClientHttp2Session[] = [];
try {
  // Their logs (a line per request) go to files, not through this client's event loop.
  a = await startLevee({ kubeconfig: env.kubeconfig, tls: env.leveeServing, extra, cpus: pinning?.server, cli: baseline.cli, leveeFlags: baseline.flags, outputToFile: true });
  b = await startLevee({ kubeconfig: env.kubeconfig, tls: env.leveeServing, extra, cpus: pinning?.server, outputToFile: true });
  for (const l of [a, b]) await waitReady(l, agent, 60_000);
  // Past the collections and compilations that follow a sync: they are no part of a request.
  await new Promise((res) => setTimeout(res, 5000));
  const targets = [
    { name: `baseline ${baseline.ref}`, levee: a },
    { name: 'working tree', levee: b },
  ];
  // resourceVersion=0, as bench:list asks Levee: answered from the cache alone. Without it each
  // read also waits for the proof of freshness, an upstream round trip that would hide the change.
  const scenarios: Array<{ name: string; path: (i: number) => string; h2?: true }> = [
    { name: 'GET one pod (random)', path: (i) => { const p = pods[i % pods.length]!; return `/api/v1/namespaces/${p.metadata.namespace}/pods/${p.metadata.name}?resourceVersion=0`; } },
    { name: 'LIST pods of one node (fieldSelector)', path: (i) => `/api/v1/pods?resourceVersion=0&fieldSelector=spec.nodeName%3D${nodes[i % nodes.length]}` },
    { name: 'watch-list of one node\'s pods (HTTP/2)', path: (i) => `/api/v1/pods?resourceVersion=0&fieldSelector=spec.nodeName%3D${nodes[i % nodes.length]}${WATCH_LIST_QUERY}`, h2: true },
  ];
  // A new connection every 500 watch-lists: Node's HTTP/2 server, as nghttp2's guard against rapid
  // reset (CVE-2023-44487), ends a connection whose client has cancelled more than 1,000 streams
  // at over 33 a second, and each watch-list here ends with the client cancelling it.
  const ca = readFileSync(env.caFile);
  const uses = targets.map(() => 0);
  const timedWatchList = async (j: number, path: string): Promise<number> => {
    if (uses[j]! % 500 === 0) {
      sessions[j]?.close();
      sessions[j] = connect(targets[j]!.levee.url.origin, { ca });
    }
    uses[j]!++;
    const started = performance.now();
    await captureWatchList(sessions[j]!, path, token);
    return performance.now() - started;
  };
  log(`A/B: ${targets.map((t) => t.name).join(' vs ')}; ${pods.length} pods sampled on ${nodes.length} nodes; ${REPS} rounds after ${WARMUP} warm-up` + (pinning ? `; client on CPU ${pinning.client}, both Levees on CPU ${pinning.server}` : ''));
  if (baseline.flags.join(' ') !== NODE_FLAGS.join(' ')) log(`Node flags: baseline ${baseline.flags.join(' ')}; working tree ${NODE_FLAGS.join(' ')}`);
  const lines: string[] = ['| scenario | target | p50 ms | p99 ms | CPU µs per request |', '|---|---|---:|---:|---:|'];
  for (const s of scenarios.filter((x) => x.name.includes(flags.only))) {
    const ms: number[][] = targets.map(() => []);
    let cpu0: number[] = [];
    for (let round = 0; round < WARMUP + REPS; round++) {
      if (round === WARMUP) cpu0 = targets.map((t) => cpuSeconds(t.levee.pid) ?? 0);
      const path = s.path(Math.floor(Math.random() * 1e9));
      // Alternate which target goes first, so neither always finds the other's work just done.
      const seq = round % 2 === 0 ? [0, 1] : [1, 0];
      for (const j of seq) {
        const took = s.h2 ? await timedWatchList(j, path) : (await timedGet(targets[j]!.levee.url.origin + path, agent, token)).ms;
        if (round >= WARMUP) ms[j]!.push(took);
      }
    }
    const cpu = targets.map((t, j) => (((cpuSeconds(t.levee.pid) ?? 0) - cpu0[j]!) / REPS) * 1e6);
    targets.forEach((t, j) => lines.push(`| ${s.name} | ${t.name} | ${quantile(ms[j]!, 0.5).toFixed(3)} | ${quantile(ms[j]!, 0.99).toFixed(3)} | ${cpu[j]!.toFixed(0)} |`));
    const ratio = quantile(ms[0]!, 0.5) / quantile(ms[1]!, 0.5);
    lines.push(`| ${s.name} | baseline ÷ working tree | ${ratio.toFixed(2)}× | | ${(cpu[0]! / cpu[1]!).toFixed(2)}× |`);
  }
  process.stdout.write(`${lines.join('\n')}\n`);
} finally {
  for (const session of sessions) session.close();
  await a?.stop();
  await b?.stop();
  baseline.remove();
  await agent.close();
}
