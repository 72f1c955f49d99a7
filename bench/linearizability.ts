// A longer linearizability run than the test suite's (test/integration/linearizability.test.ts):
// concurrent writes and consistent reads (GET, LIST, watch-list) through a Levee whose connection
// to the apiserver lags, checked by porcupine, with the apiserver restarted every few minutes.
//
//   npm run testenv -- up && npm run bench:linearizability [-- --seconds 300 --delay-ms 100]
import { mkdirSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { spawn } from 'node:child_process';
import { loadEnv, startApiserver, stopApiserver } from '../test/env/testenv.ts';
import { agentFor, get, send, suffix } from '../test/support/http.ts';
import { startLevee, writeKubeconfig } from '../test/support/levee.ts';
import { startRelay } from '../test/support/relay.ts';
import { waitReady } from '../test/support/wait.ts';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '300' },
    'delay-ms': { type: 'string', default: '100' },
    'restart-every': { type: 'string', default: '120' },
    writers: { type: 'string', default: '4' },
    getters: { type: 'string', default: '3' },
    listers: { type: 'string', default: '2' },
    'watch-listers': { type: 'string', default: '2' },
  },
});
const seconds = Number(values.seconds);
const env = loadEnv();
const agent = agentFor(env.caFile);
const ns = `bench-linearizable-${suffix()}`;
await send('POST', `${env.server}/api/v1/namespaces`, agent, env.tokens.admin, { metadata: { name: ns } });
const relay = await startRelay(env.server, { delayMs: Number(values['delay-ms']) });
const levee = await startLevee({
  kubeconfig: writeKubeconfig(relay.url, env.caFile, env.tokens.admin),
  tls: env.leveeServing,
  extra: ['--cache', 'configmaps', '--consistent-read-proof-bytes', '0'],
});
await waitReady(levee, agent);
const out = resolve(import.meta.dirname, 'results');
mkdirSync(out, { recursive: true });
const child = spawn(env.linearizability, [
  '-server', levee.url.origin, '-direct', env.server, '-token', env.tokens.admin, '-ca', env.caFile, '-namespace', ns,
  '-duration', `${seconds}s`, '-check-timeout', '10m',
  '-writers', values.writers, '-getters', values.getters, '-listers', values.listers, '-watch-listers', values['watch-listers'],
  '-visualize', resolve(out, 'linearizability.html'),
]);
let stdout = '';
child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
child.stderr.pipe(process.stderr);
const exited = new Promise<number | null>((r) => child.once('exit', r));
const restartEvery = Number(values['restart-every']) * 1000;
let restarts = 0;
const started = Date.now();
while (Date.now() - started + restartEvery < seconds * 1000) {
  await new Promise((r) => setTimeout(r, restartEvery));
  await stopApiserver();
  await new Promise((r) => setTimeout(r, 3000));
  await startApiserver();
  restarts++;
}
const code = await exited;
const metrics = (await get(`${levee.url.origin}/metrics`, agent)).body;
await levee.stop();
await relay.close();
await send('DELETE', `${env.server}/api/v1/namespaces/${ns}`, agent, env.tokens.admin);
await agent.close();
const summary = JSON.parse(stdout.trim().split('\n').at(-1) || '{}') as { operations: number; counts: Record<string, number>; result: string };
const verified = Number(/^levee_consistent_reads_total\{resource="configmaps",result="verified"\} (\d+)/m.exec(metrics)?.[1] ?? 0);
const result = { date: new Date().toISOString(), apiserver: env.version, seconds, delayMs: Number(values['delay-ms']), restarts, exitCode: code, verifiedFromCache: verified, ...summary };
writeFileSync(resolve(out, 'linearizability.json'), `${JSON.stringify(result, null, 2)}\n`);
const md = [
  '# Linearizability of consistent reads through Levee',
  '',
  `${result.date}, kube-apiserver ${env.version}: ${seconds} s, every byte from the apiserver ${result.delayMs} ms late, the apiserver restarted ${restarts} times. porcupine: **${summary.result}** over ${summary.operations} operations; ${verified} consistent reads proven fresh and answered from the cache.`,
  '',
  '| operation | count |',
  '|---|---|',
  ...Object.entries(summary.counts).sort().map(([k, v]) => `| ${k} | ${v} |`),
  '',
];
writeFileSync(resolve(out, 'linearizability.md'), md.join('\n'));
console.log(md.join('\n'));
process.exitCode = code ?? 1;
