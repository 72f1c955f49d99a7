// Servers a test or benchmark starts (Levee, a replay server) must not outlive it. A benchmark that
// dies of an uncaught error or a signal leaves its children running otherwise, pinned to the
// server's CPU: one such Levee sat there for an hour and shared the CPU with every run after it.
// A parent killed with SIGKILL runs nothing more; children with an IPC channel (the replay servers)
// see it close and end themselves, and Levee is left to whoever killed the parent.
import type { ChildProcess } from 'node:child_process';

const live = new Set<ChildProcess>();
let hooked = false;

function killAll(): void {
  for (const child of live) child.kill('SIGKILL');
  live.clear();
}

/**
 * Kills `child` when this process exits while it still runs: at exit (an uncaught error
 * included), or on SIGINT, SIGTERM or SIGHUP, which then end this process as they would have.
 */
export function reapOnExit(child: ChildProcess): void {
  live.add(child);
  child.once('exit', () => live.delete(child));
  if (hooked) return;
  hooked = true;
  process.once('exit', killAll);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      killAll();
      // With its only listener gone, the signal's default action ends the process.
      process.kill(process.pid, signal);
    });
  }
}
