// The differential fuzz (test/support/fuzz.ts) with a larger budget: every generated request goes
// to the apiserver directly and through Levee, and every difference is counted and recorded
// instead of stopping at the first. Reports the cases run by kind, how many Levee answered from its
// cache, why the rest went upstream, and each distinct difference with a request that shows it.
// Brings the test environment up bare (bench/lib/env.ts).
//
//   npm run bench:fuzz [-- --runs 1500 --seed N]    (or LEVEE_FUZZ_RUNS, LEVEE_FUZZ_SEED)
import { mkdirSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import fc from 'fast-check';
import { quietEnv } from './lib/env.ts';
import { cacheStats, cases, leveeHealth, runCase, setUp, tearDown, type CaseKind } from '../test/support/fuzz.ts';

const { values } = parseArgs({ options: { runs: { type: 'string' }, seed: { type: 'string' } } });
const runs = Number(values.runs ?? process.env.LEVEE_FUZZ_RUNS ?? 1500);
// A new seed each run explores new cases; the report names it, to run the same ones again.
const seed = Number(values.seed ?? process.env.LEVEE_FUZZ_SEED ?? Date.now() % 2 ** 31);

const env = await quietEnv();
const fixture = await setUp(env);
const started = Date.now();
const byKind: Partial<Record<CaseKind, number>> = {};
const differences = new Map<string, { count: number; request: string; difference: string }>();
let ran = 0;
let down: string | undefined;
console.log(`fuzzing: seed ${seed}, ${runs} cases`);
try {
  await fc.assert(
    fc.asyncProperty(cases(fixture), async (c) => {
      if (down) return;
      ran++;
      byKind[c.kind] = (byKind[c.kind] ?? 0) + 1;
      const outcome = await runCase(fixture, c);
      const health = await leveeHealth(fixture);
      if (health && /exited|readyz/.test(health)) down = `${outcome.request}\n  ${health}`;
      for (const difference of [outcome.difference, health]) {
        if (!difference) continue;
        // One entry per kind of difference: the same path through the answer, values aside.
        const key = `${c.kind} ${difference.replace(/"(?:[^"\\]|\\.)*"/g, '""').replace(/\d+/g, '#').slice(0, 160)}`;
        const seen = differences.get(key);
        if (seen) seen.count++;
        else {
          differences.set(key, { count: 1, request: outcome.request, difference });
          console.log(`difference #${differences.size}: ${outcome.request}\n  ${difference}\n`);
        }
      }
      if (ran % 100 === 0) console.log(`${ran} cases, ${differences.size} distinct differences`);
    }),
    { seed, numRuns: runs },
  );
} finally {
  const stats = await cacheStats(fixture).catch(() => ({ fromCache: 0, forwarded: {} }));
  await tearDown(fixture, env);
  const seconds = (Date.now() - started) / 1000;
  const total = [...differences.values()].reduce((n, d) => n + d.count, 0);
  const report = {
    benchmark: 'fuzz',
    date: new Date().toISOString(),
    node: process.version,
    apiserver: env.version,
    seed,
    cases: ran,
    seconds,
    byKind,
    fromCache: stats.fromCache,
    forwarded: stats.forwarded,
    differences: total,
    distinct: [...differences.values()],
    leveeDown: down,
  };
  const out = resolve(import.meta.dirname, 'results');
  mkdirSync(out, { recursive: true });
  writeFileSync(resolve(out, 'fuzz.json'), `${JSON.stringify(report, null, 2)}\n`);
  const kinds = Object.entries(byKind).map(([k, n]) => `${k} ${n}`).join(', ');
  const reasons = Object.entries(stats.forwarded).sort((a, b) => b[1] - a[1]).map(([r, n]) => `${r} ${n}`).join(', ');
  const md = [
    '# Differential fuzz',
    '',
    `Seed ${seed}: ${ran} cases in ${seconds.toFixed(0)} s (${kinds}), ${report.date}, apiserver ${env.version}.`,
    '',
    `Levee answered ${stats.fromCache} requests from its cache (pages followed included); reads of cached resources it forwarded, by reason: ${reasons || 'none'}.`,
    '',
    down ? `**Levee went down:** ${down}` : 'Levee stayed up and logged no error after every case.',
    '',
    total === 0 ? '**No difference** from the apiserver.' : `**${total} differences, ${differences.size} distinct:**`,
    '',
    ...[...differences.values()].map((d) => `- ${d.count}× \`${d.request}\`\n  ${d.difference.replace(/\n/g, ' ')}`),
    '',
  ].join('\n');
  writeFileSync(resolve(out, 'fuzz.md'), md);
  console.log(md);
}
process.exit(down || differences.size > 0 ? 1 : 0);
