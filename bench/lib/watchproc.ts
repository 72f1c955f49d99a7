// What the watch benchmark reads about the processes it measures, straight from /proc: CPU time
// and resident memory of Levee, kube-apiserver and etcd (their pids are in .testenv/state.json),
// so that every process is measured the same way whatever language it is written in.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';

const STATE_FILE = resolve(import.meta.dirname, '../../.testenv/state.json');

/** Clock ticks per second of utime and stime in /proc/<pid>/stat (USER_HZ, 100 nearly everywhere). */
const TICKS_PER_SECOND = ((): number => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** User plus system CPU seconds the process has used so far; null when it is gone. */
export function cpuSeconds(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) is in parentheses and may hold spaces: count fields after it.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
  } catch {
    return null;
  }
}

/**
 * CPU seconds the whole machine has spent busy (all processes, the kernel included) and stolen by
 * the hypervisor, from the first line of /proc/stat. On a shared machine this shows whether
 * processes the benchmark does not watch competed for the CPUs.
 */
export function machineCpuSeconds(): { busy: number; steal: number } {
  // cpu  user nice system idle iowait irq softirq steal guest guest_nice
  const f = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/).slice(1).map(Number);
  const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = f;
  return { busy: (user + nice + system + irq + softirq) / TICKS_PER_SECOND, steal: steal / TICKS_PER_SECOND };
}

/**
 * Seconds the process's threads have spent runnable but waiting for a CPU (the second field of
 * each /proc/<pid>/task/<tid>/schedstat, summed over the threads alive now); null when it is gone.
 * A thread's wait is the part of a delivery's delay that is the machine's, not the process's work.
 */
export function runQueueWaitSeconds(pid: number | 'self'): number | null {
  try {
    let ns = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[1]);
      } catch {
        // the thread ended
      }
    }
    return ns / 1e9;
  } catch {
    return null;
  }
}

/** Resident set size in bytes; null when the process is gone. */
export function rssBytes(pid: number): number | null {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : null;
  } catch {
    return null;
  }
}

/** Open file descriptors (sockets among them); null when the process is gone or not ours to read. */
export function openFiles(pid: number): number | null {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return null;
  }
}

/**
 * The test environment's processes as its state file names them now. Other users of the shared
 * environment may restart the apiserver, so callers read this again to notice a new pid.
 */
export function testenvPids(): { apiserver: number | null; etcd: number | null } {
  try {
    const state = JSON.parse(readFileSync(STATE_FILE, 'utf8')) as { apiserver: { pid: number | null }; etcd: { pid: number | null } };
    return { apiserver: state.apiserver.pid, etcd: state.etcd.pid };
  } catch {
    return { apiserver: null, etcd: null };
  }
}

/** CPU seconds of a set of processes (and of this one) between start() and stop(). */
export class CpuWindow {
  readonly #pids: Record<string, number | null>;
  readonly #start: Record<string, number | null> = {};
  readonly #startedAt = performance.now();
  readonly #client = process.cpuUsage();
  readonly #machine = machineCpuSeconds();
  readonly #startWait: Record<string, number | null> = {};

  constructor(pids: Record<string, number | null>) {
    this.#pids = pids;
    for (const [name, pid] of Object.entries(pids)) {
      this.#start[name] = pid === null ? null : cpuSeconds(pid);
      this.#startWait[name] = pid === null ? null : runQueueWaitSeconds(pid);
    }
    this.#startWait['client'] = runQueueWaitSeconds('self');
  }

  /**
   * Cores used on average over the window, per process; `client` is this benchmark's own process,
   * `machine` every process on the machine, `steal` time the hypervisor gave to other machines.
   * `waiting`: each process's run-queue wait per second of the window, all its threads together.
   */
  stop(): { seconds: number; cores: Record<string, number | null>; waiting: Record<string, number | null> } {
    const seconds = (performance.now() - this.#startedAt) / 1000;
    const cores: Record<string, number | null> = {};
    const waiting: Record<string, number | null> = {};
    const perSecond = (before: number | null | undefined, after: number | null): number | null =>
      before === null || before === undefined || after === null ? null : (after - before) / seconds;
    for (const [name, pid] of Object.entries(this.#pids)) {
      cores[name] = perSecond(this.#start[name], pid === null ? null : cpuSeconds(pid));
      waiting[name] = perSecond(this.#startWait[name], pid === null ? null : runQueueWaitSeconds(pid));
    }
    waiting['client'] = perSecond(this.#startWait['client'], runQueueWaitSeconds('self'));
    const used = process.cpuUsage(this.#client);
    cores['client'] = (used.user + used.system) / 1e6 / seconds;
    const machine = machineCpuSeconds();
    cores['machine'] = (machine.busy - this.#machine.busy) / seconds;
    cores['steal'] = (machine.steal - this.#machine.steal) / seconds;
    return { seconds, cores, waiting };
  }
}
