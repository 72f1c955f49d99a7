// A baseline commit checked out beside this one, for a benchmark that measures the working tree
// against it in one run (bench:ab, bench:restartab). It shares this checkout's node_modules, so a
// baseline with other dependencies is not comparable, and runs with its own Node flags (its
// src/nodeflags.ts), so that a change of flags is measured too.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

export interface Baseline {
  /** The commit, abbreviated. */
  ref: string;
  /** Its `levee` entry point. */
  cli: string;
  /** Its Node flags. */
  flags: readonly string[];
  /** Removes the checkout. */
  remove(): void;
}

export async function checkoutBaseline(ref: string): Promise<Baseline> {
  const root = resolve(import.meta.dirname, '../..');
  const dir = mkdtempSync(join(tmpdir(), 'levee-baseline-'));
  const short = execFileSync('git', ['rev-parse', '--short', ref], { cwd: root, encoding: 'utf8' }).trim();
  execFileSync('git', ['worktree', 'add', '--detach', dir, short], { cwd: root, stdio: 'ignore' });
  const remove = (): void => {
    execFileSync('git', ['worktree', 'remove', '--force', dir], { cwd: root, stdio: 'ignore' });
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    if (!existsSync(join(dir, 'node_modules'))) symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'));
    const { NODE_FLAGS } = (await import(pathToFileURL(join(dir, 'src/nodeflags.ts')).href)) as { NODE_FLAGS: readonly string[] };
    return { ref: short, cli: join(dir, 'src/cli.ts'), flags: NODE_FLAGS, remove };
  } catch (err) {
    remove();
    throw err;
  }
}
