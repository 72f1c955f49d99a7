// Pinning a process to CPUs with taskset(1), so a benchmark's load generator and the server under
// test do not take each other's cores: on a small machine the client's own CPU would otherwise
// decide the result.
import { execFileSync } from 'node:child_process';
import os from 'node:os';

let hasTaskset: boolean | undefined;

/** The command line that runs `cmd args` on the CPUs `cpus` names ("1", "0-3", "0,2"); unchanged without `cpus`. */
export function pinned(cpus: string | undefined, cmd: string, args: readonly string[]): [string, string[]] {
  if (cpus === undefined) return [cmd, [...args]];
  hasTaskset ??= (() => {
    try {
      execFileSync('taskset', ['-V'], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  })();
  if (!hasTaskset) throw new Error('taskset(1) is needed to pin processes to CPUs (util-linux)');
  return ['taskset', ['-c', cpus, cmd, ...args]];
}

/** Pins the running process (and the threads it starts later) to `cpus`. */
export function pinSelf(cpus: string): void {
  pinProcess(process.pid, cpus);
}

/** Pins a running process and all its threads (a Go server's too) to `cpus`. */
export function pinProcess(pid: number, cpus: string): void {
  execFileSync('taskset', ['-a', '-p', '-c', cpus, String(pid)], { stdio: 'ignore' });
}

/**
 * Gives processes every CPU again (a benchmark's end: the test environment outlives it); one that
 * is gone is skipped.
 */
export function unpinProcesses(pids: Iterable<number>): void {
  for (const pid of pids) {
    try {
      pinProcess(pid, allCpus());
    } catch {
      // gone
    }
  }
}

/**
 * Puts every thread of a running process under SCHED_IDLE (chrt(1)), or back under the normal
 * policy: an idle thread runs only when no normal one on its CPU wants to, and a normal thread
 * that wakes takes the CPU from it at once.
 */
export function setIdlePolicy(pid: number, idle: boolean): void {
  execFileSync('chrt', [idle ? '--idle' : '--other', '--all-tasks', '--pid', '0', String(pid)], { stdio: 'ignore' });
}

/** Every CPU of the machine, as taskset names them. */
export function allCpus(): string {
  return `0-${os.cpus().length - 1}`;
}

/**
 * The machine split between a load generator and the server under test: the first half of the
 * CPUs for the client, the rest for the server (on 2 CPUs, one each). undefined on one CPU.
 */
export function splitCpus(): { client: string; server: string } | undefined {
  const n = os.cpus().length;
  if (n < 2) return undefined;
  const half = Math.floor(n / 2);
  return { client: half === 1 ? '0' : `0-${half - 1}`, server: half === n - 1 ? `${n - 1}` : `${half}-${n - 1}` };
}
