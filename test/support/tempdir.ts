// Directories a test process writes to (kubeconfigs with tokens, certificates and their keys,
// configuration files, kubectl's caches), all under one directory of the process's own that is
// removed when it exits: credentials are not left behind in the machine's temporary directory.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

let root: string | undefined;

/** A new directory, named from `prefix`, removed with everything in it when the process exits. */
export function tempDir(prefix: string): string {
  if (root === undefined) {
    const dir = mkdtempSync(join(tmpdir(), 'levee-test-'));
    root = dir;
    process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  }
  return mkdtempSync(join(root, prefix));
}
