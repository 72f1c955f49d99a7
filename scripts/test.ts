// `npm test`: everything CI checks, in order. Lint and types first (they fail fastest), then the
// real test environment, then every unit and integration test against it in one run of node's
// test runner, so one summary counts them all. An environment started here is stopped here; one
// that was already up is left as it was.
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { down, status, up } from '../test/env/testenv.ts';

const root = resolve(import.meta.dirname, '..');

function run(args: string[]): number {
  const r = spawnSync(process.execPath, args, { cwd: root, stdio: 'inherit' });
  return r.status ?? 1;
}

function step(name: string, args: string[]): void {
  console.log(`\n== ${name}`);
  const code = run(args);
  if (code !== 0) {
    console.error(`${name} failed (exit ${code})`);
    process.exit(code);
  }
}

step('lint', ['node_modules/eslint/bin/eslint.js', '.']);
// Rooms import only the floors beneath them, and nothing imports in a circle (.dependency-cruiser.cjs).
step('layers', ['node_modules/dependency-cruiser/bin/dependency-cruiser.mjs', 'src', '--config', '.dependency-cruiser.cjs']);
step('typecheck', ['node_modules/typescript/bin/tsc', '--noEmit']);

console.log('\n== test environment');
const wasUp = (await status()).apiserver.ready;
await up();
let code: number;
try {
  console.log('\n== tests');
  const files = process.argv.slice(2);
  code = run([
    '--test',
    '--test-reporter=spec',
    '--test-timeout=600000',
    ...(files.length > 0 ? files : ['test/unit/*.test.ts', 'test/integration/*.test.ts']),
  ]);
} finally {
  if (!wasUp) await down();
}
process.exit(code);
