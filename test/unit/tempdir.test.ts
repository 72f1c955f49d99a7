// A test process's temporary directories (kubeconfigs with tokens among them) are gone once it exits.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';

test("a process's temporary directories and what it wrote in them are removed when it exits", () => {
  const module = resolve(import.meta.dirname, '../support/tempdir.ts');
  const script = `
    import { writeFileSync } from 'node:fs';
    import { join } from 'node:path';
    const { tempDir } = await import(${JSON.stringify(module)});
    const a = tempDir('levee-kc-');
    const b = tempDir('levee-certs-');
    writeFileSync(join(a, 'kubeconfig'), 'token');
    writeFileSync(join(b, 'key.pem'), 'key');
    process.stdout.write(JSON.stringify([a, b, join(a, 'kubeconfig')]));
  `;
  const paths = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' })) as string[];
  assert.equal(paths.length, 3);
  for (const p of paths) assert.equal(existsSync(p), false, `${p} left behind`);
});
