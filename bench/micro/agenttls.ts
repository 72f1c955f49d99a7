// What a simulated node agent's connection costs the agent's side (bench/lib/agent.ts): an HTTP/2
// connection with a full TLS 1.3 handshake and one request, the client verifying the server's
// certificate against its CA, or not verifying it (no CA in its context, rejectUnauthorized off).
// The server's side of the handshake is the same either way. bench:massrestart runs 2,000 agents
// on one core, so their cost per connection sets how soon a fast server can have them all synced.
// An ECDSA P-256 CA and serving certificate, as the test environment's, made with openssl(1).
//
//   node bench/micro/agenttls.ts [--connections 2000] [--runs 4]
//
// The client runs on the first CPU, the server (a child process) on the others; reported per
// kind: the client's CPU per connection, median over the runs, and each run's.
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { connect, createSecureServer } from 'node:http2';
import { join } from 'node:path';
import { createSecureContext } from 'node:tls';
import { parseArgs } from 'node:util';
import { allCpus, pinned, pinSelf } from '../../test/support/cpus.ts';
import { reapOnExit } from '../../test/support/reap.ts';
import { tempDir } from '../../test/support/tempdir.ts';
import { quantile } from '../lib/stats.ts';

if (process.argv[2] === 'serve') {
  const [cert, key] = [readFileSync(process.argv[3]!), readFileSync(process.argv[4]!)];
  const server = createSecureServer({ cert, key }, (_req, res) => res.end('{}\n'));
  server.listen(0, '127.0.0.1', () => process.stdout.write(`${(server.address() as { port: number }).port}\n`));
} else {
  const { values } = parseArgs({ options: { connections: { type: 'string', default: '2000' }, runs: { type: 'string', default: '4' } } });
  const N = Number(values.connections);
  const RUNS = Number(values.runs);

  const dir = tempDir('levee-agenttls-');
  const at = (f: string): string => join(dir, f);
  const openssl = (...args: string[]): void => void execFileSync('openssl', args, { stdio: 'ignore' });
  openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', at('ca.key'), '-out', at('ca.crt'), '-subj', '/CN=agenttls-ca', '-days', '1');
  openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', at('server.key'), '-out', at('server.csr'), '-subj', '/CN=127.0.0.1');
  writeFileSync(at('san.ext'), 'subjectAltName=IP:127.0.0.1\n');
  openssl('x509', '-req', '-in', at('server.csr'), '-CA', at('ca.crt'), '-CAkey', at('ca.key'), '-CAcreateserial', '-out', at('server.crt'), '-days', '1', '-extfile', at('san.ext'));

  const cpus = allCpus();
  const serverCpus = cpus === '0-0' ? undefined : `1-${cpus.split('-')[1]}`;
  if (serverCpus) pinSelf('0');
  const [cmd, argv] = pinned(serverCpus, process.execPath, [import.meta.filename, 'serve', at('server.crt'), at('server.key')]);
  const child = spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'inherit'] });
  reapOnExit(child);
  const port = await new Promise<number>((ok) => child.stdout.once('data', (c: Buffer) => ok(Number(c.toString().trim()))));
  const origin = `https://127.0.0.1:${port}`;

  const verifying = createSecureContext({ ca: readFileSync(at('ca.crt')) });
  const trusting = createSecureContext({});
  const once = (verify: boolean): Promise<void> =>
    new Promise((ok, fail) => {
      const session = connect(origin, verify ? { secureContext: verifying } : { secureContext: trusting, rejectUnauthorized: false });
      session.on('error', fail);
      const stream = session.request({ ':path': '/' });
      stream.on('data', () => undefined);
      stream.on('end', () => {
        session.close();
        ok();
      });
    });
  const perConnection: Record<'verifying' | 'not verifying', number[]> = { verifying: [], 'not verifying': [] };
  for (let run = 0; run < RUNS; run++) {
    for (const verify of [true, false]) {
      const before = process.cpuUsage();
      // 50 at a time, as a burst of agents keeps many handshakes in flight.
      for (let i = 0; i < N; i += 50) await Promise.all(Array.from({ length: Math.min(50, N - i) }, () => once(verify)));
      const used = process.cpuUsage(before);
      perConnection[verify ? 'verifying' : 'not verifying'].push((used.user + used.system) / N);
    }
  }
  child.kill();
  for (const [kind, runs] of Object.entries(perConnection)) {
    console.log(`${kind}: client CPU per connection, median ${quantile(runs, 0.5).toFixed(0)} µs (runs: ${runs.map((r) => r.toFixed(0)).join(', ')})`);
  }
}
