import { strict as assert } from 'node:assert';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

const REAP = resolve(import.meta.dirname, '../support/reap.ts');

/** Whether a process with this pid still runs (a zombie, reaped by nobody yet, counts as gone). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
}

/**
 * Runs a parent that starts a long-lived child under reapOnExit, prints its pid, then ends as
 * `ending` says; the child's pid.
 */
async function orphanOf(ending: 'throw' | 'SIGTERM' | 'SIGINT'): Promise<{ pid: number; code: number | null; signal: NodeJS.Signals | null }> {
  const script = `
    import { spawn } from 'node:child_process';
    import { reapOnExit } from ${JSON.stringify(REAP)};
    const child = spawn('sleep', ['60'], { stdio: 'ignore' });
    reapOnExit(child);
    console.log(child.pid);
    ${ending === 'throw' ? "setTimeout(() => { throw new Error('the benchmark crashed'); }, 50);" : 'setInterval(() => undefined, 1000);'}
  `;
  const parent = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = once(parent, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  try {
    const [line] = (await once(parent.stdout, 'data')) as [Buffer];
    const pid = Number(line.toString().trim());
    assert.ok(running(pid), 'the child runs while its parent does');
    if (ending !== 'throw') parent.kill(ending);
    const [code, signal] = await exited;
    return { pid, code, signal };
  } finally {
    parent.kill('SIGKILL');
  }
}

async function gone(pid: number): Promise<boolean> {
  for (let i = 0; i < 50 && running(pid); i++) await sleep(20);
  return !running(pid);
}

test('a child is killed when its parent dies of an uncaught error', async () => {
  const { pid, code } = await orphanOf('throw');
  assert.equal(code, 1, 'the uncaught error still ends the parent with its exit code');
  assert.ok(await gone(pid), `child ${pid} outlived its parent`);
});

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  test(`a child is killed when its parent gets ${signal}, and the signal still ends the parent`, async () => {
    const { pid, signal: ended } = await orphanOf(signal);
    assert.equal(ended, signal);
    assert.ok(await gone(pid), `child ${pid} outlived its parent`);
  });
}
