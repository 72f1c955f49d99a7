// The fault suite (test/integration/faults.test.ts) with longer churn around each fault than CI
// runs: more events across every kill, restart, compaction and stall, for the watch guarantees and
// the informers to be judged on. Needs the test environment with its control plane (not bare).
//
//   npm run testenv -- up && npm run bench:faults [-- --seconds 30 --rounds 3]
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { up } from '../test/env/testenv.ts';

const { values } = parseArgs({
  options: {
    // Churn before and after each fault (CI: 3).
    seconds: { type: 'string', default: '30' },
    // Runs of the whole suite, each in a fresh namespace with a fresh Levee.
    rounds: { type: 'string', default: '1' },
  },
});
await up({ bare: false });
const root = resolve(import.meta.dirname, '..');
let failed = 0;
for (let round = 1; round <= Number(values.rounds); round++) {
  console.log(`== round ${round} of ${values.rounds}, ${values.seconds} s of churn around each fault`);
  const r = spawnSync(process.execPath, ['--test', '--test-reporter=spec', '--test-timeout=3600000', 'test/integration/faults.test.ts'], {
    cwd: root,
    stdio: 'inherit',
    env: { ...process.env, LEVEE_FAULTS_SECONDS: values.seconds },
  });
  if (r.status !== 0) failed++;
}
process.exit(failed === 0 ? 0 : 1);
