// `npm run conformance`: the curated Conformance tests of sig-api-machinery, sig-apps and sig-node
// (test/conformance/list.yaml) from Kubernetes' own e2e suite, run once directly against the test
// environment's apiserver and once through a Levee in front of it, both as the cluster admin.
// Prints and writes (bench/results/conformance.{json,md}) what passed, failed and was skipped each
// way, and every test whose outcome differs: a test that passes directly but not through Levee is
// a Levee bug. Exits non-zero when there is one, or when the list does not account for every test
// the label filter selects.
//
//   npm run conformance [-- --procs 10] [-- --only direct|levee] [-- --ci] [-- --focus REGEX]
//   npm run conformance -- --excluded     run the excluded tests directly, to check their reasons
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { up } from '../test/env/testenv.ts';
import {
  LIST_FILE,
  differences,
  loadList,
  runSpecs,
  selectedSpecs,
  startRunLevee,
  unaccounted,
  type RunResult,
} from '../test/support/conformance.ts';

const root = path.resolve(import.meta.dirname, '..');
const { values } = parseArgs({
  options: {
    procs: { type: 'string', default: '10' },
    only: { type: 'string' },
    ci: { type: 'boolean', default: false },
    excluded: { type: 'boolean', default: false },
    focus: { type: 'string' },
  },
});
const procs = Number(values.procs);
if (!(Number.isSafeInteger(procs) && procs > 0)) throw new Error(`--procs ${values.procs}: not a whole number`);
if (values.only && values.only !== 'direct' && values.only !== 'levee') throw new Error(`--only ${values.only}: direct or levee`);

const env = await up({ bare: false });
const list = loadList();
const selected = await selectedSpecs(list.labelFilter, env.kubeconfig);
const { missing, unknown } = unaccounted(list, selected);
if (missing.length > 0 || unknown.length > 0) {
  console.error(`${path.relative(root, LIST_FILE)} does not match Kubernetes ${env.version}'s tests (label filter ${list.labelFilter}):`);
  for (const n of missing) console.error(`  not listed: ${n}`);
  for (const n of unknown) console.error(`  no such test: ${n}`);
  process.exit(2);
}

let names = values.excluded ? list.excluded.map((e) => e.name) : list.run.filter((e) => !values.ci || e.ci).map((e) => e.name);
if (values.focus) {
  const re = new RegExp(values.focus);
  names = names.filter((n) => re.test(n));
}
const outDir = path.join(root, '.testenv', 'conformance');
const resultsDir = path.join(root, 'bench', 'results');
console.log(`conformance: ${names.length} tests of ${selected.length} (${list.labelFilter}), ${procs} ginkgo processes; reports in ${path.relative(root, outDir)}/`);

const progress = (target: string) => (line: string) => {
  const m = /^• \[(\w+)\] \[([\d.]+) seconds\]/.exec(line);
  if (m) console.log(`  ${target}: ${m[1]} after ${Math.round(Number(m[2]))} s`);
};

const results: RunResult[] = [];
const targets = values.excluded ? ['direct'] : values.only ? [values.only] : ['direct', 'levee'];
for (const target of targets) {
  const dir = path.join(outDir, target);
  console.log(`\n== ${target === 'direct' ? `directly against ${env.server}` : 'through a Levee'}`);
  if (target === 'direct') {
    fs.mkdirSync(dir, { recursive: true });
    results.push(await runSpecs({ names, target: 'direct', kubeconfig: env.kubeconfig, server: env.server, dir, procs, onLine: progress(target) }));
  } else {
    const { levee, kubeconfig, log } = await startRunLevee(env, path.join(outDir, 'levee-process'));
    try {
      console.log(`  Levee at ${levee.url.origin}, its log in ${path.relative(root, log)}`);
      results.push(await runSpecs({ names, target: 'levee', kubeconfig, server: levee.url.origin, dir, procs, onLine: progress(target) }));
    } finally {
      await levee.stop();
    }
  }
  const r = results.at(-1)!;
  console.log(`  ${r.counts.passed} passed, ${r.counts.failed} failed, ${r.counts.skipped} skipped in ${r.seconds} s`);
  for (const s of r.specs.filter((x) => x.state !== 'passed')) console.log(`    ${s.state}: ${s.name}`);
}

const direct = results.find((r) => r.target === 'direct');
const viaLevee = results.find((r) => r.target === 'levee');
const differ = direct && viaLevee ? differences(direct, viaLevee) : [];
const leveeBugs = differ.filter((d) => d.direct === 'passed');

console.log('\n== conformance');
for (const r of results) console.log(`${r.target.padEnd(7)} ${r.counts.passed} passed, ${r.counts.failed} failed, ${r.counts.skipped} skipped (${r.seconds} s)`);
if (direct && viaLevee) {
  console.log(differ.length === 0 ? 'same outcome for every test both ways' : `${differ.length} tests differ:`);
  for (const d of differ) console.log(`  direct ${d.direct}, through Levee ${d.levee}: ${d.name}`);
}

if (!values.focus && !values.excluded && !values.ci && !values.only) {
  fs.mkdirSync(resultsDir, { recursive: true });
  const report = {
    benchmark: 'conformance',
    date: new Date().toISOString(),
    kubernetes: env.version,
    labelFilter: list.labelFilter,
    selected: selected.length,
    run: names.length,
    excluded: list.excluded.length,
    procs,
    results: results.map((r) => ({ target: r.target, seconds: r.seconds, counts: r.counts, specs: r.specs })),
    differences: differ,
  };
  fs.writeFileSync(path.join(resultsDir, 'conformance.json'), `${JSON.stringify(report, null, 2)}\n`);
  const md = [
    '# Kubernetes conformance tests, directly and through Levee',
    '',
    `${report.date}, Kubernetes ${env.version}, \`npm run conformance\` (${procs} ginkgo processes). Of the ${selected.length} tests the label filter \`${list.labelFilter}\` selects, ${names.length} run and ${list.excluded.length} are excluded with their reasons in \`test/conformance/list.yaml\`.`,
    '',
    '| | passed | failed | skipped | time |',
    '|---|---|---|---|---|',
    ...results.map((r) => `| ${r.target === 'direct' ? 'directly' : 'through Levee'} | ${r.counts.passed} | ${r.counts.failed} | ${r.counts.skipped} | ${r.seconds} s |`),
    '',
    differ.length === 0 ? 'Every test had the same outcome both ways.' : `Tests whose outcome differs:\n\n| test | directly | through Levee |\n|---|---|---|\n${differ.map((d) => `| ${d.name} | ${d.direct} | ${d.levee} |`).join('\n')}`,
    '',
    ...results.flatMap((r) => {
      const bad = r.specs.filter((s) => s.state !== 'passed');
      return bad.length === 0 ? [] : [`Not passed ${r.target === 'direct' ? 'directly' : 'through Levee'}:`, '', ...bad.map((s) => `- ${s.state}: ${s.name}`), ''];
    }),
  ].join('\n');
  fs.writeFileSync(path.join(resultsDir, 'conformance.md'), md);
  console.log(`\nwritten: bench/results/conformance.json, bench/results/conformance.md`);
}
process.exit(leveeBugs.length > 0 || results.some((r) => r.counts.failed > 0) ? 1 : 0);
