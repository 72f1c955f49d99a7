// Keeps one process of the test environment running, as a kubelet keeps a static pod running: it
// starts the process, and whenever it exits starts it again after a backoff (1 s, doubling up to
// 30 s, back to 1 s once a run has lasted a minute). kube-controller-manager and kube-scheduler
// exit by design when they lose their leader lease, and a fault test that stops kube-apiserver for
// a few seconds is enough for that; supervised, the control plane comes back by itself.
//
// Usage: node supervise.ts STATUS_FILE -- BIN ARGS...
//
// The process inherits stdout and stderr (the component's log, opened by testenv), where each
// start and exit is also written. STATUS_FILE holds {"pid", "restarts", "started"} of the current
// run, so `testenv status` can show the real process and whether it ever crashed. SIGTERM or
// SIGINT is passed on; the supervisor exits once the process has (SIGKILL after 10 s).
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';

const KILL_AFTER_MS = 10_000;
const STABLE_MS = 60_000;
const MAX_BACKOFF_MS = 30_000;

const [statusFile, separator, bin, ...args] = process.argv.slice(2);
if (!statusFile || separator !== '--' || !bin) {
  process.stderr.write('usage: supervise.ts STATUS_FILE -- BIN ARGS...\n');
  process.exit(2);
}

let child: ChildProcess | undefined;
let stopping = false;
let restarts = 0;
let backoffMs = 1000;
let retry: NodeJS.Timeout | undefined;

const say = (msg: string): void => void process.stderr.write(`==== ${new Date().toISOString()} supervise: ${msg}\n`);

function writeStatus(pid: number): void {
  const tmp = `${statusFile}.tmp`;
  fs.writeFileSync(tmp, `${JSON.stringify({ pid, restarts, started: new Date().toISOString() })}\n`);
  fs.renameSync(tmp, statusFile!);
}

function start(): void {
  retry = undefined;
  const startedAt = Date.now();
  const c = spawn(bin!, args, { stdio: ['ignore', 'inherit', 'inherit'] });
  child = c;
  let done = false;
  // A process that could not start at all only emits 'error'; one that ran emits 'close'.
  const ended = (why: string): void => {
    if (done) return;
    done = true;
    child = undefined;
    if (stopping) process.exit(0);
    if (Date.now() - startedAt >= STABLE_MS) backoffMs = 1000;
    say(`${bin} ${why}; starting it again in ${backoffMs / 1000} s`);
    restarts++;
    retry = setTimeout(start, backoffMs);
    backoffMs = Math.min(backoffMs * 2, MAX_BACKOFF_MS);
  };
  c.once('spawn', () => writeStatus(c.pid!));
  c.once('error', (err) => ended(`could not start: ${err.message}`));
  c.once('close', (code, signal) => ended(`exited (${signal ?? `code ${code}`})`));
}

function stop(signal: NodeJS.Signals): void {
  if (stopping) return;
  stopping = true;
  if (retry) clearTimeout(retry);
  if (!child) process.exit(0);
  child.kill(signal);
  setTimeout(() => child?.kill('SIGKILL'), KILL_AFTER_MS).unref();
}

process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGTERM'));
start();
