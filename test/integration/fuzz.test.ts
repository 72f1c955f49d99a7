// Property-based differential fuzzing (test/support/fuzz.ts): generated requests (paths, queries,
// selectors, resourceVersions, limits, continue tokens, watch parameters, headers, identities,
// bodies) get the same answer from the apiserver directly and through Levee, and Levee stays up and
// logs no error after every one. A fixed seed by default, so CI runs the same cases each time;
// LEVEE_FUZZ_SEED and LEVEE_FUZZ_RUNS choose others (a failure prints both, to run it again).
// `npm run bench:fuzz` runs a larger budget and counts every difference instead of stopping.
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { loadEnv, type TestEnv } from '../env/testenv.ts';
import { cacheStats, cases, leveeHealth, runCase, setUp, tearDown, type Fixture } from '../support/fuzz.ts';

const SEED = Number(process.env.LEVEE_FUZZ_SEED ?? 20260101);
// About a minute on two busy cores: most cases take milliseconds, a watch a second or more.
const RUNS = Number(process.env.LEVEE_FUZZ_RUNS ?? 400);
// Shrinking sends every smaller candidate both ways again; past this, the smallest found stands.
const SHRINK_MS = 90_000;

let env: TestEnv;
let fixture: Fixture | undefined;

before(async () => {
  env = loadEnv();
  fixture = await setUp(env);
});

after(async () => {
  await tearDown(fixture, env);
});

test(`generated requests get the apiserver's answer through Levee (seed ${SEED}, ${RUNS} cases)`, async () => {
  const f = fixture!;
  const started = Date.now();
  let failedAt: number | undefined;
  let ran = 0;
  const property = fc.asyncProperty(cases(f), async (c) => {
    if (failedAt !== undefined && Date.now() - failedAt > SHRINK_MS) return;
    ran++;
    const outcome = await runCase(f, c);
    const health = await leveeHealth(f);
    const problem = outcome.difference ?? health;
    if (problem) {
      failedAt ??= Date.now();
      throw new Error(`${outcome.request}\n  ${problem}`);
    }
  });
  try {
    await fc.assert(property, { seed: SEED, numRuns: RUNS });
  } catch (err) {
    (err as Error).message = `reproduce with LEVEE_FUZZ_SEED=${SEED} LEVEE_FUZZ_RUNS=${RUNS}\n${(err as Error).message}`;
    throw err;
  }
  const stats = await cacheStats(f);
  console.log(`${ran} cases in ${((Date.now() - started) / 1000).toFixed(1)} s, the same through Levee; ${stats.fromCache} answers from its cache; forwarded reads by reason: ${JSON.stringify(stats.forwarded)}`);
  // A fuzz that Levee answers only by forwarding would test nothing of the cache.
  if (stats.fromCache < RUNS / 5) throw new Error(`only ${stats.fromCache} of ${RUNS} cases were answered from the cache`);
});
