// What a new upstream connection costs Levee's thread: TLS to the test environment's apiserver
// through Levee's own connector (src/upstream/connector.ts, one SecureContext per credentials)
// against undici's connector given the same PEM material, from which every tls.connect builds a
// SecureContext of its own (what Levee did before). Each forwarded watch over HTTP/1.1 holds a
// connection of its own, so a burst of them opens as many.
//
//   node bench/micro/upstreamconnect.ts [--connections 300] [--runs 3]
//
// Reported per connector: medians over the runs of the process CPU per connection (handshake and
// close) and of the wall time per connection, connections opened one at a time, the connectors
// taking turns run by run.
import { parseArgs } from 'node:util';
import { buildConnector } from 'undici';
import { loadEnv } from '../../test/env/testenv.ts';
import { loadUpstream } from '../../src/upstream/credentials.ts';
import { connectTarget, identityConnector, openSocket } from '../../src/upstream/connector.ts';
import { quantile } from '../lib/stats.ts';

const { values } = parseArgs({ options: { connections: { type: 'string', default: '300' }, runs: { type: 'string', default: '3' } } });
const N = Number(values.connections);
const RUNS = Number(values.runs);

const env = loadEnv();
const upstream = loadUpstream({ kind: 'kubeconfig', path: env.kubeconfig });
const tls = (await upstream.ownCredentials()).tls;
const target = connectTarget(upstream.server);
const connectors = {
  'one SecureContext per credentials (Levee)': identityConnector(upstream, 'own'),
  'a SecureContext per connection': buildConnector({ ca: tls.ca, cert: tls.cert, key: tls.key, rejectUnauthorized: tls.rejectUnauthorized, allowH2: false }),
};

async function batch(connector: buildConnector.connector): Promise<{ cpuUs: number; wallUs: number }> {
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < N; i++) {
    const socket = await openSocket(connector, target);
    await new Promise<void>((resolve) => socket.end(resolve));
    socket.destroy();
  }
  const cpu = process.cpuUsage(cpu0);
  return { cpuUs: (cpu.user + cpu.system) / N, wallUs: Number(process.hrtime.bigint() - t0) / 1e3 / N };
}

const results = new Map<string, Array<{ cpuUs: number; wallUs: number }>>();
for (const name of Object.keys(connectors)) results.set(name, []);
// A warm-up batch each, then the runs, alternating which goes first.
for (const c of Object.values(connectors)) await batch(c);
for (let run = 0; run < RUNS; run++) {
  const names = Object.keys(connectors) as Array<keyof typeof connectors>;
  if (run % 2 === 1) names.reverse();
  for (const name of names) results.get(name)!.push(await batch(connectors[name]));
}
process.stdout.write(`${N} connections per run, ${RUNS} runs, to ${upstream.server.origin}\n\n| connector | CPU per connection, µs | wall per connection, µs |\n|---|---:|---:|\n`);
for (const [name, rs] of results) {
  process.stdout.write(`| ${name} | ${quantile(rs.map((r) => r.cpuUs), 0.5).toFixed(0)} | ${quantile(rs.map((r) => r.wallUs), 0.5).toFixed(0)} |\n`);
}
