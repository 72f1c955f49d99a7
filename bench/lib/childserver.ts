// A benchmark's server in a process of its own (bench/lib/replay.ts, bench/lib/watchreplay.ts):
// started with Levee's Node flags, pinned to the CPUs it is given, and told what to serve over an
// IPC channel with advanced serialization. The child answers each message in order, and its first
// message is {port} once it listens.
import { spawn, type ChildProcess } from 'node:child_process';
import { NODE_FLAGS } from '../../src/nodeflags.ts';
import { pinned } from '../../test/support/cpus.ts';
import { reapOnExit } from '../../test/support/reap.ts';

export interface ChildServer {
  port: number;
  pid: number;
  /** Sends `m`; resolves with the child's answer to it. */
  ask: (m: unknown) => Promise<unknown>;
  stop: () => Promise<void>;
}

/** Runs `module` with `args` on the CPUs `cpus` names (taskset), if any; `name` is for errors. */
export async function startChildServer(name: string, module: string, args: readonly string[], cpus?: string): Promise<ChildServer> {
  const [cmd, argv] = pinned(cpus, process.execPath, [...NODE_FLAGS, module, ...args]);
  const child: ChildProcess = spawn(cmd, argv, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], serialization: 'advanced' });
  reapOnExit(child);
  const replies: Array<(m: unknown) => void> = [];
  child.on('message', (m) => replies.shift()?.(m));
  const { port } = (await new Promise<unknown>((ok, fail) => {
    replies.push(ok);
    child.once('exit', (code) => fail(new Error(`${name} exited with ${code}`)));
  })) as { port: number };
  return {
    port,
    pid: child.pid!,
    ask: (m) =>
      new Promise((ok, fail) => {
        replies.push(ok);
        child.send(m as never, (err) => err && fail(err));
      }),
    stop: async () => {
      child.kill('SIGTERM');
      if (child.exitCode === null) await new Promise((ok) => child.once('exit', ok));
    },
  };
}
