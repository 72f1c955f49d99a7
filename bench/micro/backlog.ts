// How long clients wait to be accepted when thousands connect at once to a server that is busy
// for a moment (a DaemonSet's agents reconnecting while the gateway works through a burst): with
// Node's default accept queue (511) against Levee's (LISTEN_BACKLOG in src/http/listener.ts,
// capped by the kernel at net.core.somaxconn). A connection the full queue drops is only accepted
// after the client sends again, a retransmission timeout later. Each client sends one byte on
// connect, as a TLS client sends its hello; the server answers by closing.
//
//   node bench/micro/backlog.ts [--connections 2000] [--busy-ms 300] [--runs 3]
//
// Reported per backlog: medians over the runs of the p50, p99 and slowest time to be answered, and
// the kernel's count of accept-queue overflows (TcpExtListenOverflows) during the runs.
import { readFileSync } from 'node:fs';
import { connect, createServer, type AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { LISTEN_BACKLOG } from '../../src/http/listener.ts';
import { quantile, summarize } from '../lib/stats.ts';

const { values } = parseArgs({ options: { connections: { type: 'string', default: '2000' }, 'busy-ms': { type: 'string', default: '300' }, runs: { type: 'string', default: '3' } } });
const N = Number(values.connections);
const BUSY_MS = Number(values['busy-ms']);
const RUNS = Number(values.runs);
const NODE_DEFAULT = 511;

/** TcpExtListenOverflows from /proc/net/netstat. */
function overflows(): number {
  const lines = readFileSync('/proc/net/netstat', 'utf8').split('\n');
  const i = lines.findIndex((l) => l.startsWith('TcpExt:'));
  const names = lines[i]!.split(/\s+/);
  const counts = lines[i + 1]!.split(/\s+/);
  return Number(counts[names.indexOf('ListenOverflows')]);
}

async function once(backlog: number): Promise<{ p50: number; p99: number; max: number; overflows: number }> {
  const server = createServer((s) => s.once('data', () => s.end()));
  await new Promise<void>((resolve) => server.listen({ port: 0, host: '127.0.0.1', backlog }, resolve));
  const { port } = server.address() as AddressInfo;
  const before = overflows();
  setTimeout(() => {
    const t = performance.now();
    while (performance.now() - t < BUSY_MS);
  }, 0);
  const t0 = performance.now();
  const times = await Promise.all(
    Array.from({ length: N }, () =>
      new Promise<number>((resolve, reject) => {
        const c = connect({ port, host: '127.0.0.1' }, () => c.write('x'));
        c.on('data', () => undefined);
        c.on('error', reject);
        c.on('close', () => resolve(performance.now() - t0));
      }),
    ),
  );
  await new Promise((resolve) => server.close(resolve));
  const { p50Ms, p99Ms, maxMs } = summarize(times);
  return { p50: p50Ms, p99: p99Ms, max: maxMs, overflows: overflows() - before };
}

const median = (xs: number[]): number => quantile(xs, 0.5);
const results = new Map<number, Awaited<ReturnType<typeof once>>[]>([[NODE_DEFAULT, []], [LISTEN_BACKLOG, []]]);
for (let r = 0; r < RUNS; r++) for (const backlog of results.keys()) results.get(backlog)!.push(await once(backlog));
const somaxconn = readFileSync('/proc/sys/net/core/somaxconn', 'utf8').trim();
console.log(`${N} connections at once, server busy ${BUSY_MS} ms, ${RUNS} runs (medians); net.core.somaxconn ${somaxconn}\n`);
console.log('| backlog asked | answered p50 ms | p99 ms | slowest ms | accept-queue overflows |');
console.log('|---|---:|---:|---:|---:|');
for (const [backlog, rs] of results) {
  const label = backlog === NODE_DEFAULT ? `${backlog} (Node's default)` : `${backlog} (Levee)`;
  console.log(`| ${label} | ${median(rs.map((r) => r.p50)).toFixed(0)} | ${median(rs.map((r) => r.p99)).toFixed(0)} | ${median(rs.map((r) => r.max)).toFixed(0)} | ${median(rs.map((r) => r.overflows))} |`);
}
