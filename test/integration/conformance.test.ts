// Kubernetes' own conformance tests through Levee: the tests of test/conformance/list.yaml marked
// `ci` (64 fast sig-api-machinery ones, about 3 minutes: CRDs and their OpenAPI, discovery, field
// validation, watch, chunking, garbage collection, quotas, admission policies, flow control),
// run by e2e.test of the cluster's own release once directly against the apiserver and once
// through a Levee in front of it, at the same time. Each must pass both ways: one that passes
// directly but fails through Levee is a Levee bug, and the assertion names it with its failure.
// `npm run conformance` runs the whole list.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { loadEnv, type TestEnv } from '../env/testenv.ts';
import { loadList, runSpecs, startRunLevee, type RunResult } from '../support/conformance.ts';
import type { LeveeProcess } from '../support/levee.ts';

const env: TestEnv = loadEnv();
const skip = env.controlPlane ? false : 'the environment is bare: the e2e suite needs the controllers and nodes (npm run testenv -- up)';
const dir = path.resolve(import.meta.dirname, '../../.testenv/conformance-ci');
const names = loadList()
  .run.filter((e) => e.ci)
  .map((e) => e.name);
let levee: LeveeProcess | undefined;
let leveeLog = '';

before(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

after(async () => {
  await levee?.stop();
});

const summary = (r: RunResult): string =>
  r.specs
    .filter((s) => s.state !== 'passed')
    .map((s) => `  ${s.state}: ${s.name}${s.failure ? `\n    ${s.failure.replace(/\n/g, '\n    ')}` : ''}`)
    .join('\n');

test(`${names.length} Kubernetes conformance tests pass directly and through Levee`, { skip, timeout: 540_000 }, async () => {
  assert.ok(names.length > 0, 'test/conformance/list.yaml marks no test ci');
  const run = await startRunLevee(env, path.join(dir, 'levee'));
  levee = run.levee;
  leveeLog = run.log;
  const procs = 3;
  const [direct, viaLevee] = await Promise.all([
    runSpecs({ names, target: 'direct', kubeconfig: env.kubeconfig, server: env.server, dir: path.join(dir, 'direct'), procs, timeout: '8m' }),
    runSpecs({ names, target: 'levee', kubeconfig: run.kubeconfig, server: run.levee.url.origin, dir: path.join(dir, 'through-levee'), procs, timeout: '8m' }),
  ]);
  const state = new Map(direct.specs.map((s) => [s.name, s.state]));
  const leveeBugs = viaLevee.specs.filter((s) => state.get(s.name) === 'passed' && s.state !== 'passed');
  assert.deepEqual(
    leveeBugs.map((s) => s.name),
    [],
    `passed directly but not through Levee (reports in ${dir}, Levee's log in ${leveeLog}):\n${summary(viaLevee)}`,
  );
  assert.equal(direct.counts.passed, names.length, `not every test passed directly against the apiserver (reports in ${dir}):\n${summary(direct)}`);
  assert.equal(viaLevee.counts.passed, names.length, `not every test passed through Levee:\n${summary(viaLevee)}`);
});
