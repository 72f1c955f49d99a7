// Starts a real Levee process for integration tests and reads what it says. A separate process,
// not an in-process server, so tests can see its memory, its logs and its exit.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync, writeFileSync, writeSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { NODE_FLAGS } from '../../src/nodeflags.ts';
import { pinned } from './cpus.ts';
import { reapOnExit } from './reap.ts';
import { tempDir } from './tempdir.ts';

const CLI = resolve(import.meta.dirname, '../../src/cli.ts');

export interface LeveeProcess {
  url: URL;
  pid: number;
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string;
  /** Resident set size in bytes, from /proc. */
  rss(): number;
  stop(): Promise<void>;
  /** Sends a signal to the process. */
  kill(signal: NodeJS.Signals): void;
  /** Settles when the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export interface LeveeArgs {
  kubeconfig: string;
  tls?: { cert: string; key: string };
  auth?: 'delegate' | 'trust-loopback';
  extra?: string[];
  /** Node flags besides Levee's own (src/nodeflags.ts). */
  nodeFlags?: string[];
  /** Levee's own Node flags, in place of this checkout's (a baseline checkout runs with its own). */
  leveeFlags?: readonly string[];
  /** Runs Levee on these CPUs only (taskset), as a benchmark pins the server under test. */
  cpus?: string;
  /** Also write everything it says to this file, as it says it (a long run's log to read while it runs). */
  logFile?: string;
  /**
   * Levee writes stdout and stderr straight into a file of its own, not through this process, which
   * reads it only for the start-up line and for output(). For a benchmark: Levee logs every request,
   * and reading 20,000 lines a second here took 4 % of a core from the cores being measured.
   */
  outputToFile?: boolean;
  /** Another checkout's src/cli.ts (a benchmark's baseline); this checkout's by default. */
  cli?: string;
}

export async function startLevee(args: LeveeArgs): Promise<LeveeProcess> {
  // The start-up line at info level tells the test the port; Levee always logs it.
  const argv = [...(args.leveeFlags ?? NODE_FLAGS), ...(args.nodeFlags ?? []), args.cli ?? CLI, '--kubeconfig', args.kubeconfig, '--listen', '127.0.0.1:0', '--log-level', 'info'];
  if (args.tls) argv.push('--tls-cert-file', args.tls.cert, '--tls-private-key-file', args.tls.key);
  if (args.auth) argv.push('--auth', args.auth);
  argv.push(...(args.extra ?? []));
  const [cmd, cmdArgs] = pinned(args.cpus, process.execPath, argv);
  const outputFile = args.outputToFile ? join(tempDir('levee-output-'), 'output.log') : undefined;
  const outFd = outputFile ? openSync(outputFile, 'w') : undefined;
  const child: ChildProcess = spawn(cmd, cmdArgs, { stdio: outFd === undefined ? ['ignore', 'pipe', 'pipe'] : ['ignore', outFd, outFd] });
  if (outFd !== undefined) closeSync(outFd);
  reapOnExit(child);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolveExit) =>
    child.once('exit', (code, signal) => resolveExit({ code, signal })),
  );
  let collected = '';
  const output = (): string => (outputFile ? readFileSync(outputFile, 'utf8') : collected);
  const logFd = args.logFile ? openSync(args.logFile, 'w') : undefined;
  const collect = (c: Buffer): void => {
    collected += c.toString();
    if (logFd !== undefined) writeSync(logFd, c);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  if (logFd !== undefined) child.once('close', () => closeSync(logFd));

  const url = await new Promise<URL>((resolveUrl, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      clearInterval(poll);
      reject(new Error(`levee did not start in 20 s:\n${output()}`));
    }, 20_000);
    const check = (): void => {
      const m = /"url":"([^"]+)"[^\n]*"msg":"levee listening"/.exec(output());
      if (m) {
        clearTimeout(timer);
        clearInterval(poll);
        child.stdout?.off('data', check);
        resolveUrl(new URL(m[1]!));
      }
    };
    child.stdout?.on('data', check);
    // Written straight to a file, the start-up line is looked for there.
    const poll = outputFile ? setInterval(check, 50) : undefined;
    child.once('exit', (code) => {
      clearTimeout(timer);
      clearInterval(poll);
      reject(new Error(`levee exited with ${code}:\n${output()}`));
    });
  });

  return {
    url,
    pid: child.pid!,
    output,
    rss: () => {
      const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'));
      return Number(m![1]) * 1024;
    },
    kill: (signal) => void child.kill(signal),
    exited,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** A kubeconfig for a client that talks to `server` as a token user. */
export function writeKubeconfig(server: string, caFile: string | undefined, token: string): string {
  const dir = tempDir('levee-kc-');
  const path = join(dir, 'kubeconfig');
  const cluster: Record<string, unknown> = { server };
  if (caFile) cluster['certificate-authority'] = caFile;
  writeFileSync(
    path,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'c', cluster }],
      users: [{ name: 'u', user: { token } }],
      contexts: [{ name: 'c', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'c',
    }),
  );
  return path;
}
