// What forwarding through Levee adds to a request that it cannot answer from cache. The same
// client sends the same request to the apiserver directly and through Levee, alternating, both
// over TLS with keep-alive; medians and p99 are compared. Brings the test environment up bare
// (bench/lib/env.ts).
//
//   npm run bench:forward [-- --requests 1000]
import { mkdirSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { request, type Agent } from 'undici';
import { quietEnv } from './lib/env.ts';
import { startLevee } from '../test/support/levee.ts';
import { agentFor, send, suffix } from '../test/support/http.ts';

const { values } = parseArgs({ options: { requests: { type: 'string', default: '1000' } } });
const N = Number(values.requests);

const env = await quietEnv();
const agent: Agent = agentFor(env.caFile);
const levee = await startLevee({ kubeconfig: env.kubeconfig, tls: env.leveeServing });
const ns = `bench-forward-${suffix()}`;
await send('POST', `${env.server}/api/v1/namespaces`, agent, env.tokens.admin, { metadata: { name: ns } });
for (let i = 0; i < 20; i++) {
  await send('POST', `${env.server}/api/v1/namespaces/${ns}/configmaps`, agent, env.tokens.admin, { metadata: { name: `c${i}` }, data: { v: 'x'.repeat(1000) } });
}

async function once(url: string): Promise<number> {
  const t = process.hrtime.bigint();
  const res = await request(url, { dispatcher: agent, headers: { authorization: `Bearer ${env.tokens.admin}`, accept: 'application/json' } });
  await res.body.dump({ limit: Infinity });
  if (res.statusCode !== 200) throw new Error(`${url}: ${res.statusCode}`);
  return Number(process.hrtime.bigint() - t) / 1e6;
}

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};

const scenarios = [
  { name: 'GET namespace', path: `/api/v1/namespaces/${ns}` },
  { name: 'LIST 20 configmaps', path: `/api/v1/namespaces/${ns}/configmaps` },
];
const results = [];
for (const s of scenarios) {
  const direct: number[] = [];
  const via: number[] = [];
  for (let i = 0; i < 50; i++) {
    await once(env.server + s.path);
    await once(levee.url.origin + s.path);
  }
  for (let i = 0; i < N; i++) {
    // Alternate which goes first so neither side always meets a warmer apiserver.
    if (i % 2 === 0) {
      direct.push(await once(env.server + s.path));
      via.push(await once(levee.url.origin + s.path));
    } else {
      via.push(await once(levee.url.origin + s.path));
      direct.push(await once(env.server + s.path));
    }
  }
  const r = {
    scenario: s.name,
    requests: N,
    apiserverP50Ms: quantile(direct, 0.5),
    leveeP50Ms: quantile(via, 0.5),
    apiserverP99Ms: quantile(direct, 0.99),
    leveeP99Ms: quantile(via, 0.99),
  };
  results.push({ ...r, addedP50Ms: r.leveeP50Ms - r.apiserverP50Ms, ratioP50: r.leveeP50Ms / r.apiserverP50Ms });
}

await levee.stop();
await agent.close();

const out = resolve(import.meta.dirname, 'results');
mkdirSync(out, { recursive: true });
const report = { benchmark: 'forward', date: new Date().toISOString(), node: process.version, apiserver: env.version, results };
writeFileSync(resolve(out, 'forward.json'), JSON.stringify(report, null, 2) + '\n');
const f = (x: number) => x.toFixed(3);
const table = [
  '| scenario | apiserver p50 ms | levee p50 ms | added p50 ms | ratio p50 | apiserver p99 ms | levee p99 ms |',
  '|---|---:|---:|---:|---:|---:|---:|',
  ...results.map((r) => `| ${r.scenario} | ${f(r.apiserverP50Ms)} | ${f(r.leveeP50Ms)} | ${f(r.addedP50Ms)} | ${r.ratioP50.toFixed(2)}× | ${f(r.apiserverP99Ms)} | ${f(r.leveeP99Ms)} |`),
].join('\n');
writeFileSync(resolve(out, 'forward.md'), `# Forwarding overhead\n\n${N} requests each, alternated, TLS on both paths, ${report.date}.\n\n${table}\n`);
console.log(table);
