// A/B of Levee against itself in the mass restart: the working tree against a baseline commit, in
// one run. bench:massrestart measures Levee against the apiserver, whose own restart takes 8–21 s
// from one run to the next (its heap, the machine), and Levee's restarts within a run spread from
// 1.9 to 4.0 s: a change worth a tenth of Levee's CPU does not show across runs. Here both Levees
// serve the same cluster, pinned to the same CPU (the agents on the other), and the same 2,000
// agents restart against each in turn, in alternating order, so that what drifts falls on both.
// Reported: each restart's time to all synced and each Levee's CPU for it, the medians, and in how
// many pairs the working tree used less CPU. The time waits on the apiserver's bookmark tick (the
// consistency proof, docs/design.md §7) and spreads more than the CPU: two runs of ten pairs with
// probes begun twice a second gave medians 12 % sooner and 19 % later.
//
//   npm run bench:restartab                       # baseline HEAD (the working tree's uncommitted change)
//   npm run bench:restartab -- --baseline HEAD~1 --restarts 8
//   npm run bench:restartab -- --writes 10        # other writes in the cluster, 10 a second, during each restart
//
// With --writes the cluster's revision moves during a restart, as node leases move it in a real
// cluster: each proof then waits for a bookmark newer than the pods' and nodes' own last change.
//
// The agents are bench:massrestart's (bench/lib/agent.ts, bench/lib/restart.ts): consistent
// watch-lists of their node's pods and their Node, in JSON. The baseline runs with its own Node
// flags (bench/lib/baseline.ts).
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { readFileSync } from 'node:fs';
import { Agent } from 'undici';
import { quietEnv } from './lib/env.ts';
import { pinSelf, splitCpus } from '../test/support/cpus.ts';
import { startLevee, writeKubeconfig, type LeveeProcess } from '../test/support/levee.ts';
import { waitReady } from '../test/support/wait.ts';
import { agentFor } from '../test/support/http.ts';
import { kubectl } from '../test/support/kubectl.ts';
import { ensureCluster } from './lib/pods.ts';
import { cpuSeconds } from './lib/watchproc.ts';
import { quantile } from './lib/stats.ts';
import { closeFleet, newFleet, runAgent } from './lib/agent.ts';
import { agentIdentities, RESTART_CLUSTER } from './lib/restart.ts';
import { call, must } from './lib/client.ts';
import { checkoutBaseline } from './lib/baseline.ts';
import { NODE_FLAGS } from '../src/nodeflags.ts';

const { values: flags } = parseArgs({
  options: {
    baseline: { type: 'string', default: 'HEAD' },
    agents: { type: 'string', default: '2000' },
    restarts: { type: 'string', default: '6' },
    writes: { type: 'string', default: '0' },
  },
});
const K = Number(flags.agents);
const RESTARTS = Number(flags.restarts);
if (!Number.isInteger(RESTARTS) || RESTARTS < 1) throw new Error('--restarts is a whole number of at least 1');
// As in bench:massrestart: each restart 5 s after every connection of the one before closed.
const PAUSE_MS = 5000;
const log = (line: string): void => void process.stderr.write(`${line}\n`);

const env = await quietEnv();
const pinning = splitCpus();
if (pinning) pinSelf(pinning.client);
const ca = readFileSync(env.caFile);
const admin = new Agent({ connect: { ca }, allowH2: false, connections: 32 });
const token = env.tokens.admin;
const { layout } = await ensureCluster({ server: env.server, dispatcher: admin, token, size: RESTART_CLUSTER, concurrency: 32, log, etcd: env.etcd });
const { tokens, tokenFor } = await agentIdentities(env.server, admin, token, K);
const applied = await kubectl(env.kubectl, env.kubeconfig, ['apply', '-f', resolve(import.meta.dirname, '../deploy/rbac.yaml')]);
if (applied.code !== 0) throw new Error(applied.stderr);
const kubeconfig = writeKubeconfig(env.server, env.caFile, await tokenFor('levee', 'levee'));
const extra = ['--cache', 'pods,nodes', '--authorization-local-rbac', '--authentication-local-serviceaccount-tokens'];

// Other writes during each restart: one configmap patched WRITES times a second, open loop.
const WRITES = Number(flags.writes);
if (!(WRITES >= 0)) throw new Error('--writes is a rate per second, 0 or more');
const writesPath = `${env.server}/api/v1/namespaces/default/configmaps`;
if (WRITES > 0) await must([201, 409], admin, token, 'POST', writesPath, { metadata: { name: 'levee-bench-writes' }, data: { n: '0' } });
function writeDuring(): () => void {
  if (WRITES === 0) return () => undefined;
  let n = 0;
  const timer = setInterval(() => {
    void call(admin, token, 'PATCH', `${writesPath}/levee-bench-writes`, { data: { n: String(++n) } }, 'application/merge-patch+json').catch(() => undefined);
  }, 1000 / WRITES);
  return () => clearInterval(timer);
}

interface Restart {
  allSyncedMs: number;
  cpuSeconds: number;
  errors: number;
}

async function restart(levee: LeveeProcess): Promise<Restart> {
  // The agents' heap collected first, as bench:massrestart does, so neither target inherits it.
  (globalThis as { gc?: () => void }).gc?.();
  const fleet = newFleet();
  const cpu0 = cpuSeconds(levee.pid) ?? 0;
  const t0 = performance.now();
  const stopWrites = writeDuring();
  const results = await Promise.all(
    Array.from({ length: K }, (_, i) => runAgent({ origin: levee.url.origin, token: tokens[i]!, node: layout.nodes[i % layout.nodes.length]!, watchList: true, index: i }, t0, fleet)),
  );
  const allSyncedMs = performance.now() - t0;
  stopWrites();
  const cpu = (cpuSeconds(levee.pid) ?? 0) - cpu0;
  closeFleet(fleet);
  let errors = 0;
  for (const r of results) for (const n of Object.values(r.errors)) errors += n;
  return { allSyncedMs, cpuSeconds: cpu, errors };
}

const baseline = await checkoutBaseline(flags.baseline);
const agent = agentFor(env.caFile);
let a: LeveeProcess | undefined;
let b: LeveeProcess | undefined;
try {
  a = await startLevee({ kubeconfig, tls: env.leveeServing, extra, cpus: pinning?.server, cli: baseline.cli, leveeFlags: baseline.flags, outputToFile: true });
  b = await startLevee({ kubeconfig, tls: env.leveeServing, extra, cpus: pinning?.server, outputToFile: true });
  for (const l of [a, b]) await waitReady(l, agent, 60_000);
  const targets = [
    { name: `baseline ${baseline.ref}`, levee: a, restarts: [] as Restart[] },
    { name: 'working tree', levee: b, restarts: [] as Restart[] },
  ];
  log(`restart A/B: ${targets.map((t) => t.name).join(' vs ')}; ${K} agents on ${layout.nodes.length} nodes, ${RESTARTS} restarts each` + (pinning ? `; agents on CPU ${pinning.client}, both Levees on CPU ${pinning.server}` : '') + (WRITES > 0 ? `; ${WRITES} other writes a second during each restart` : ''));
  if (baseline.flags.join(' ') !== NODE_FLAGS.join(' ')) log(`Node flags: baseline ${baseline.flags.join(' ')}; working tree ${NODE_FLAGS.join(' ')}`);
  // The agents' first start against each: no part of the measure (code not yet optimized, no token seen).
  for (const t of targets) {
    await new Promise((r) => setTimeout(r, PAUSE_MS));
    const first = await restart(t.levee);
    log(`${t.name}, first start: all synced in ${first.allSyncedMs.toFixed(0)} ms, ${first.cpuSeconds.toFixed(2)} s of CPU`);
  }
  for (let i = 0; i < RESTARTS; i++) {
    for (const t of i % 2 === 0 ? targets : [...targets].reverse()) {
      await new Promise((r) => setTimeout(r, PAUSE_MS));
      const r = await restart(t.levee);
      t.restarts.push(r);
      log(`${t.name}, restart ${i + 1}: all synced in ${r.allSyncedMs.toFixed(0)} ms, ${r.cpuSeconds.toFixed(2)} s of CPU, ${r.errors} errors`);
    }
  }
  const [base, work] = targets as [(typeof targets)[0], (typeof targets)[0]];
  const med = (rs: Restart[], f: (r: Restart) => number): number => quantile(rs.map(f), 0.5);
  const lessCpu = work.restarts.filter((r, i) => r.cpuSeconds < base.restarts[i]!.cpuSeconds).length;
  const lines = [
    '| | ' + targets.map((t) => t.name).join(' | ') + ' | baseline ÷ working tree |',
    '|---|---:|---:|---:|',
    `| all agents synced, ms (median) | ${med(base.restarts, (r) => r.allSyncedMs).toFixed(0)} | ${med(work.restarts, (r) => r.allSyncedMs).toFixed(0)} | ${(med(base.restarts, (r) => r.allSyncedMs) / med(work.restarts, (r) => r.allSyncedMs)).toFixed(2)}× |`,
    `| Levee's CPU per restart, s (median) | ${med(base.restarts, (r) => r.cpuSeconds).toFixed(2)} | ${med(work.restarts, (r) => r.cpuSeconds).toFixed(2)} | ${(med(base.restarts, (r) => r.cpuSeconds) / med(work.restarts, (r) => r.cpuSeconds)).toFixed(2)}× |`,
    `| each restart's CPU, s | ${base.restarts.map((r) => r.cpuSeconds.toFixed(2)).join(' ')} | ${work.restarts.map((r) => r.cpuSeconds.toFixed(2)).join(' ')} | less in ${lessCpu} of ${RESTARTS} pairs |`,
    `| errors | ${base.restarts.reduce((n, r) => n + r.errors, 0)} | ${work.restarts.reduce((n, r) => n + r.errors, 0)} | |`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
} finally {
  await a?.stop();
  await b?.stop();
  await admin.close();
  await agent.close();
  baseline.remove();
}
