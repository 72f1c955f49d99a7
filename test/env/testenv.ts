// The integration test environment: a real etcd and kube-apiserver on loopback,
// built from the Go module in testenv/ (pinned Kubernetes release), plus the
// matching kubectl. Processes are detached so one `up` serves many test runs;
// everything lives under .testenv/ and is described by .testenv/env.json.
//
// Only etcd and kube-apiserver run: no controller-manager, scheduler or kubelet.
// So pods stay Pending, deleted namespaces stay Terminating (no namespace
// controller), ownerReferences are never garbage-collected, and no "default"
// ServiceAccount is created. Tests should use fresh names rather than rely on
// deletion of namespaces completing. Pods bound to a node wait for a kubelet to
// confirm their deletion: delete them with gracePeriodSeconds=0.
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

const ROOT = path.resolve(import.meta.dirname, '../..');
const MODULE_DIR = path.join(ROOT, 'testenv');
const DIR = path.join(ROOT, '.testenv');
const PKI = path.join(DIR, 'pki');
const LOGS = path.join(DIR, 'logs');
const ETCD_DATA = path.join(DIR, 'etcd-data');
const STATE_FILE = path.join(DIR, 'state.json');
const ENV_FILE = path.join(DIR, 'env.json');
const KUBECONFIG = path.join(DIR, 'kubeconfig');
const TOKEN_FILE = path.join(DIR, 'tokens.csv');
const LOCK_FILE = path.join(DIR, 'lock');

const READY_TIMEOUT_MS = 120_000;
const SA_ISSUER = 'https://kubernetes.default.svc.cluster.local';

export type TokenUser = 'admin' | 'alice' | 'bob' | 'levee';
export type CertUser = 'admin' | 'alice' | 'bob' | NodeName;
/**
 * Kubelet identities with client certificates (CN system:node:NAME, O system:nodes), for the Node
 * authorizer. Nothing runs behind them, and their Node objects are for tests to create.
 */
export const NODE_NAMES = ['node-a', 'node-b'] as const;
export type NodeName = (typeof NODE_NAMES)[number];
export interface CertPair {
  cert: string;
  key: string;
}

/** Contents of .testenv/env.json; all paths are absolute. */
export interface TestEnv {
  version: string;
  server: string;
  caFile: string;
  kubeconfig: string;
  kubectl: string;
  /** A client-go informer program (testenv/cmd/informer). */
  informer: string;
  /** The linearizability checker of consistent reads (testenv/cmd/linearizability). */
  linearizability: string;
  etcd: string;
  tokens: Record<TokenUser, string>;
  clientCerts: Record<CertUser, CertPair>;
  leveeServing: CertPair;
  logs: string;
}

export interface ProcessStatus {
  pid: number | null;
  running: boolean;
}

export interface Status {
  etcd: ProcessStatus;
  apiserver: ProcessStatus & { ready: boolean };
  server: string | null;
}

/** A managed process: enough to tell whether it is ours and to start it again identically. */
interface Proc {
  pid: number | null;
  bin: string;
  args: string[];
  log: string;
}

interface State {
  server: string;
  etcd: Proc;
  apiserver: Proc;
  /** Used for the /readyz probe: system:masters is authorized even before RBAC roles are bootstrapped. */
  adminToken: string;
}

// Groups per static token user; everyone also gets system:authenticated from the apiserver.
const TOKEN_GROUPS: Record<TokenUser, string[]> = {
  admin: ['system:masters'],
  alice: [],
  bob: [],
  levee: ['levee:gateway'],
};

function log(msg: string): void {
  process.stderr.write(`testenv: ${msg}\n`);
}

// ---------------------------------------------------------------- public API

/** Builds if needed, starts etcd and kube-apiserver, and resolves once /readyz is 200. */
export function up(): Promise<TestEnv> {
  return withLock(upLocked);
}

/** Stops both processes and removes the etcd data and the state files (logs and binaries stay). */
export function down(): Promise<void> {
  return withLock(downLocked);
}

export async function status(): Promise<Status> {
  const state = readState();
  if (!state) {
    return { etcd: { pid: null, running: false }, apiserver: { pid: null, running: false, ready: false }, server: null };
  }
  const apiserverRunning = alive(state.apiserver);
  return {
    etcd: { pid: state.etcd.pid, running: alive(state.etcd) },
    apiserver: {
      pid: state.apiserver.pid,
      running: apiserverRunning,
      ready: apiserverRunning && (await readyz(state)) === 200,
    },
    server: state.server,
  };
}

/** Reads .testenv/env.json as written by the last successful `up`. */
export function loadEnv(): TestEnv {
  let text: string;
  try {
    text = fs.readFileSync(ENV_FILE, 'utf8');
  } catch {
    throw new Error(`the test environment is not up (${ENV_FILE} is missing): run npm run testenv -- up`);
  }
  return JSON.parse(text) as TestEnv;
}

/** Stops only kube-apiserver; etcd and all data stay. */
export function stopApiserver(): Promise<void> {
  return withLock(async () => {
    const state = requireState();
    await terminate(state.apiserver, 'kube-apiserver');
    state.apiserver.pid = null;
    writeState(state);
  });
}

/** Starts kube-apiserver again with the same port, flags and etcd; resolves once /readyz is 200. */
export function startApiserver(): Promise<void> {
  return withLock(async () => {
    const state = requireState();
    if (!alive(state.etcd)) throw new Error('etcd is not running: run npm run testenv -- down, then up');
    if (!alive(state.apiserver)) {
      state.apiserver.pid = await startDetached(state.apiserver);
      writeState(state);
    }
    await waitReady(state);
  });
}

// ---------------------------------------------------------------- up / down

async function upLocked(): Promise<TestEnv> {
  const previous = readState();
  if (previous) {
    if (alive(previous.etcd) && alive(previous.apiserver)) {
      try {
        await waitReady(previous); // it may still be starting
        const env = loadEnv();
        log(`already up: ${previous.server}`);
        return env;
      } catch (err) {
        log(`existing environment is unhealthy (${String(err).split('\n')[0]}); recreating it`);
      }
    } else {
      log('previous environment is partly down; recreating it');
    }
    await downLocked();
  }

  const bins = await ensureBinaries();
  fs.mkdirSync(LOGS, { recursive: true });
  await run(bins.pki, [PKI]);
  const pki = (name: string): CertPair => ({ cert: path.join(PKI, `${name}.crt`), key: path.join(PKI, `${name}.key`) });
  const caFile = path.join(PKI, 'ca.crt');

  // Fresh tokens per `up`: nothing can depend on a token from an earlier environment.
  const tokens = Object.fromEntries(
    Object.keys(TOKEN_GROUPS).map((u) => [u, randomBytes(24).toString('base64url')]),
  ) as Record<TokenUser, string>;
  fs.writeFileSync(
    TOKEN_FILE,
    Object.entries(TOKEN_GROUPS)
      .map(([u, groups]) => `${tokens[u as TokenUser]},${u},${u}${groups.length ? `,"${groups.join(',')}"` : ''}\n`)
      .join(''),
    { mode: 0o600 },
  );

  // A fresh store per `up`, so every run starts from the same empty cluster.
  fs.rmSync(ETCD_DATA, { recursive: true, force: true });
  const [etcdPort, peerPort, apiPort] = await freePorts(3);
  const etcdUrl = `http://127.0.0.1:${etcdPort}`;
  const peerUrl = `http://127.0.0.1:${peerPort}`;
  const server = `https://127.0.0.1:${apiPort}`;

  const state: State = {
    server,
    adminToken: tokens.admin,
    etcd: {
      pid: null,
      bin: bins.etcd,
      log: path.join(LOGS, 'etcd.log'),
      args: [
        '--name=levee-test',
        `--data-dir=${ETCD_DATA}`,
        `--listen-client-urls=${etcdUrl}`,
        `--advertise-client-urls=${etcdUrl}`,
        `--listen-peer-urls=${peerUrl}`,
        `--initial-advertise-peer-urls=${peerUrl}`,
        `--initial-cluster=levee-test=${peerUrl}`,
        '--initial-cluster-state=new',
        // etcd's own auto-compaction stays off (its default); kube-apiserver compacts
        // every --etcd-compaction-interval like in a real cluster.
        '--auto-compaction-retention=0',
        // Throwaway data: skipping fsync makes every write much faster on a small VM.
        '--unsafe-no-fsync=true',
      ],
    },
    apiserver: {
      pid: null,
      bin: bins.kubeApiserver,
      log: path.join(LOGS, 'kube-apiserver.log'),
      args: [
        `--etcd-servers=${etcdUrl}`,
        // The real-cluster default, spelled out: tests about "410 Gone" after compaction
        // compact etcd themselves (env.etcd) instead of waiting for this.
        '--etcd-compaction-interval=5m',
        '--bind-address=127.0.0.1',
        '--advertise-address=127.0.0.1',
        // Endpoints may not hold loopback IPs, so the default (lease) reconciler refuses to start
        // with a 127.0.0.1 advertise address. "none" keeps the default/kubernetes Service but
        // gives it no Endpoints/EndpointSlices, which nothing here needs.
        '--endpoint-reconciler-type=none',
        `--secure-port=${apiPort}`,
        `--cert-dir=${path.join(DIR, 'apiserver-certs')}`, // never the default /var/run/kubernetes
        `--tls-cert-file=${path.join(PKI, 'apiserver.crt')}`,
        `--tls-private-key-file=${path.join(PKI, 'apiserver.key')}`,
        `--client-ca-file=${caFile}`,
        `--token-auth-file=${TOKEN_FILE}`,
        // As real clusters run it: the Node authorizer first (kubelets read only what their pods
        // need, and list or watch pods only with their own spec.nodeName selector), then RBAC.
        '--authorization-mode=Node,RBAC',
        `--service-account-issuer=${SA_ISSUER}`,
        `--service-account-key-file=${path.join(PKI, 'sa.pub')}`,
        `--service-account-signing-key-file=${path.join(PKI, 'sa.key')}`,
        `--api-audiences=${SA_ISSUER}`,
        '--service-cluster-ip-range=10.0.0.0/24',
        '--allow-privileged=true',
        // No controller-manager runs, so no "default" ServiceAccount ever exists and the
        // ServiceAccount admission plugin would reject every pod.
        '--disable-admission-plugins=ServiceAccount',
        // The Node authorizer lets any node create, update and patch any Node and any pod's status,
        // mirror pods and evictions; NodeRestriction confines those writes to the node's own
        // objects. Real clusters pair the two (kubeadm does), and it acts only on requests from
        // node identities, so nothing else here changes.
        '--enable-admission-plugins=NodeRestriction',
        '--watch-cache=true',
      ],
    },
  };

  try {
    state.etcd.pid = await startDetached(state.etcd);
    writeState(state); // from here on `down` can clean up whatever happens
    await waitFor('etcd', [state.etcd], async () => (await probe(`${etcdUrl}/health`)) === 200);
    state.apiserver.pid = await startDetached(state.apiserver);
    writeState(state);
    await waitReady(state);
  } catch (err) {
    await downLocked();
    throw err;
  }

  const env: TestEnv = {
    version: bins.version,
    server,
    caFile,
    kubeconfig: KUBECONFIG,
    kubectl: bins.kubectl,
    informer: bins.informer,
    linearizability: bins.linearizability,
    etcd: etcdUrl,
    tokens,
    clientCerts: {
      admin: pki('admin'),
      alice: pki('alice'),
      bob: pki('bob'),
      ...(Object.fromEntries(NODE_NAMES.map((n) => [n, pki(n)])) as Record<NodeName, CertPair>),
    },
    leveeServing: pki('levee'),
    logs: LOGS,
  };
  fs.writeFileSync(KUBECONFIG, kubeconfig(env), { mode: 0o600 });
  fs.writeFileSync(ENV_FILE, `${JSON.stringify(env, null, 2)}\n`);
  log(`up: ${server} (Kubernetes ${env.version})`);
  return env;
}

async function downLocked(): Promise<void> {
  const state = readState();
  if (state) {
    await terminate(state.apiserver, 'kube-apiserver');
    await terminate(state.etcd, 'etcd');
  }
  for (const p of [ETCD_DATA, STATE_FILE, ENV_FILE, KUBECONFIG, TOKEN_FILE]) {
    fs.rmSync(p, { recursive: true, force: true });
  }
}

/** Admin is the current context; the other token users get a context each for `kubectl --context alice`. */
function kubeconfig(env: TestEnv): string {
  const q = (s: string): string => JSON.stringify(s); // a JSON string is a valid YAML scalar
  const users = Object.keys(env.tokens) as TokenUser[];
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '- name: levee-test',
    '  cluster:',
    `    server: ${q(env.server)}`,
    `    certificate-authority: ${q(env.caFile)}`,
    'users:',
    ...users.flatMap((u) => [`- name: ${u}`, '  user:', `    token: ${q(env.tokens[u])}`]),
    'contexts:',
    ...users.flatMap((u) => [`- name: ${u}`, '  context:', '    cluster: levee-test', `    user: ${u}`]),
    'current-context: admin',
    '',
  ].join('\n');
}

// ---------------------------------------------------------------- build

const GO_PACKAGES = {
  'kube-apiserver': 'k8s.io/kubernetes/cmd/kube-apiserver',
  kubectl: 'k8s.io/kubernetes/cmd/kubectl',
  etcd: './cmd/etcd',
  pki: './cmd/pki',
  informer: './cmd/informer',
  linearizability: './cmd/linearizability',
} as const;
type Binary = keyof typeof GO_PACKAGES;

interface Binaries {
  version: string;
  kubeApiserver: string;
  kubectl: string;
  etcd: string;
  pki: string;
  informer: string;
  linearizability: string;
}

function moduleVersion(): string {
  const gomod = fs.readFileSync(path.join(MODULE_DIR, 'go.mod'), 'utf8');
  const m = /^\s*k8s\.io\/kubernetes (v\S+)/m.exec(gomod);
  if (!m?.[1]) throw new Error('testenv/go.mod does not require k8s.io/kubernetes');
  return m[1];
}

/** Like upstream release builds: static, stripped, and reporting the real version in /version. */
function buildArgs(name: Binary, version: string): string[] {
  const ldflags = ['-s', '-w'];
  if (GO_PACKAGES[name].startsWith('k8s.io/')) {
    const [major, minor] = version.slice(1).split('.');
    const vars = { gitVersion: version, gitMajor: major, gitMinor: minor, gitTreeState: 'clean' };
    for (const pkg of ['k8s.io/component-base/version', 'k8s.io/client-go/pkg/version']) {
      for (const [k, v] of Object.entries(vars)) ldflags.push(`-X=${pkg}.${k}=${v}`);
    }
  }
  return ['build', '-trimpath', `-ldflags=${ldflags.join(' ')}`];
}

/** Hash of everything a build depends on, so an edited go.mod or command source rebuilds it. */
function sourceHash(name: Binary, version: string): string {
  const h = createHash('sha256');
  const files = ['go.mod', 'go.sum'];
  const walk = (rel: string): void => {
    for (const e of fs.readdirSync(path.join(MODULE_DIR, rel), { withFileTypes: true })) {
      const r = path.join(rel, e.name);
      if (e.isDirectory()) walk(r);
      else files.push(r);
    }
  };
  // Our own commands also depend on their sources; the upstream ones only on go.mod/go.sum.
  if (GO_PACKAGES[name].startsWith('./')) walk(GO_PACKAGES[name]);
  for (const f of files.sort()) h.update(`${f}\0`).update(fs.readFileSync(path.join(MODULE_DIR, f))).update('\0');
  h.update(JSON.stringify(buildArgs(name, version)));
  return h.digest('hex');
}

async function ensureBinaries(): Promise<Binaries> {
  const version = moduleVersion();
  const binDir = path.join(DIR, 'bin', version);
  fs.mkdirSync(binDir, { recursive: true });

  // Prebuilt binaries (the controller-runtime envtest layout) win over building.
  const assets = process.env.KUBEBUILDER_ASSETS;
  const prebuilt = (name: Binary): string | undefined => {
    // Levee's own test programs are always built here.
    if (!assets || name === 'pki' || name === 'informer' || name === 'linearizability') return undefined;
    const p = path.join(assets, name);
    if (fs.existsSync(p)) return p;
    if (name !== 'kubectl') throw new Error(`KUBEBUILDER_ASSETS=${assets} has no ${name}`);
    return undefined;
  };

  const paths = {} as Record<Binary, string>;
  for (const name of Object.keys(GO_PACKAGES) as Binary[]) {
    const given = prebuilt(name);
    if (given) {
      paths[name] = given;
      continue;
    }
    const out = path.join(binDir, name);
    paths[name] = out;
    const stamp = `${out}.stamp`;
    const hash = sourceHash(name, version);
    if (fs.existsSync(out) && fs.existsSync(stamp) && fs.readFileSync(stamp, 'utf8') === hash) continue;
    await goBuild(name, version, out);
    fs.writeFileSync(stamp, hash);
  }
  const apiserverVersion = assets ? await reportedVersion(paths['kube-apiserver']) : version;
  return {
    version: apiserverVersion,
    kubeApiserver: paths['kube-apiserver'],
    kubectl: paths.kubectl,
    etcd: paths.etcd,
    pki: paths.pki,
    informer: paths.informer,
    linearizability: paths.linearizability,
  };
}

async function goBuild(name: Binary, version: string, out: string): Promise<void> {
  const upstream = GO_PACKAGES[name].startsWith('k8s.io/');
  log(`building ${name}${upstream ? ` ${version} (minutes when the Go build cache is cold)` : ''}`);
  const started = Date.now();
  const elapsed = (): string => `${Math.round((Date.now() - started) / 1000)}s`;
  const heartbeat = setInterval(() => log(`  still building ${name} (${elapsed()})`), 30_000);
  try {
    const tmp = `${out}.tmp`;
    await run('go', [...buildArgs(name, version), '-o', tmp, GO_PACKAGES[name]], {
      cwd: MODULE_DIR,
      // Never download a toolchain; static binaries like upstream's release builds.
      env: { ...process.env, GOTOOLCHAIN: 'local', CGO_ENABLED: '0' },
    });
    fs.renameSync(tmp, out); // a half-written binary never sits at the final path
  } finally {
    clearInterval(heartbeat);
  }
  log(`built ${name} in ${elapsed()}`);
}

async function reportedVersion(apiserver: string): Promise<string> {
  const out = await run(apiserver, ['--version']);
  return /v\d+\.\d+\.\d+\S*/.exec(out)?.[0] ?? 'unknown';
}

/** Runs a command to completion; stderr is passed through, stdout is returned. */
function run(cmd: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { ...opts, stdio: ['ignore', 'pipe', 'inherit'] });
    let stdout = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.on('error', (err: NodeJS.ErrnoException) =>
      reject(err.code === 'ENOENT' ? new Error(`${cmd} not found on PATH${cmd === 'go' ? ' (need Go >= 1.26)' : ''}`) : err),
    );
    child.on('close', (code) =>
      code === 0 ? resolve(stdout) : reject(new Error(`${cmd} ${args.join(' ')} exited with ${code}`)),
    );
  });
}

// ---------------------------------------------------------------- processes

async function startDetached(p: Proc): Promise<number> {
  fs.mkdirSync(path.dirname(p.log), { recursive: true });
  const fd = fs.openSync(p.log, 'a');
  try {
    fs.writeSync(fd, `\n==== ${new Date().toISOString()} ${p.bin} ${p.args.join(' ')}\n`);
    // Own session and no pipes to us, so the process outlives the CLI that started it.
    const child = spawn(p.bin, p.args, { detached: true, stdio: ['ignore', fd, fd], cwd: DIR });
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    child.unref();
    if (child.pid === undefined) throw new Error(`could not start ${p.bin}`);
    return child.pid;
  } finally {
    fs.closeSync(fd);
  }
}

/** True if the pid is alive and still runs our binary (a recycled pid or a zombie is not ours). */
function alive(p: Proc): boolean {
  if (!p.pid) return false;
  try {
    process.kill(p.pid, 0);
  } catch {
    return false;
  }
  try {
    return fs.readFileSync(`/proc/${p.pid}/cmdline`, 'utf8').split('\0')[0] === p.bin;
  } catch {
    return process.platform !== 'linux'; // no /proc elsewhere: trust kill(0)
  }
}

/** SIGTERM, then SIGKILL if it has not exited after a few seconds. */
async function terminate(p: Proc, name: string): Promise<void> {
  if (!alive(p) || !p.pid) return;
  log(`stopping ${name} (pid ${p.pid})`);
  const pid = p.pid;
  const kill = (sig: NodeJS.Signals): void => {
    try {
      process.kill(pid, sig);
    } catch {
      // already gone
    }
  };
  kill('SIGTERM');
  for (let i = 0; i < 50 && alive(p); i++) await sleep(100);
  if (alive(p)) {
    log(`${name} did not exit within 5s of SIGTERM; sending SIGKILL`);
    kill('SIGKILL');
    for (let i = 0; i < 50 && alive(p); i++) await sleep(100);
  }
}

function waitReady(state: State): Promise<void> {
  return waitFor('kube-apiserver /readyz', [state.etcd, state.apiserver], async () => (await readyz(state)) === 200);
}

/** Polls `ok` until true; fails fast with the log tail when a process dies, or after the timeout. */
async function waitFor(what: string, procs: Proc[], ok: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (await ok()) return;
    const dead = procs.find((p) => !alive(p));
    if (dead) throw new Error(`${path.basename(dead.bin)} exited while waiting for ${what}\n${tail(dead.log)}`);
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${READY_TIMEOUT_MS / 1000}s waiting for ${what}\n${procs.map((p) => tail(p.log)).join('\n')}`);
    }
    await sleep(250);
  }
}

function tail(file: string, lines = 25): string {
  try {
    const text = fs.readFileSync(file, 'utf8');
    return `--- last lines of ${file}:\n${text.trimEnd().split('\n').slice(-lines).join('\n')}`;
  } catch {
    return `--- (no log at ${file})`;
  }
}

/** Resolves with the HTTP status, or 0 when the request fails. */
function probe(url: string, opts: https.RequestOptions = {}): Promise<number> {
  return new Promise((resolve) => {
    const req = (url.startsWith('https:') ? https : http).get(url, { ...opts, timeout: 3000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
  });
}

function readyz(state: State): Promise<number> {
  return probe(`${state.server}/readyz`, {
    ca: fs.readFileSync(path.join(PKI, 'ca.crt')),
    headers: { authorization: `Bearer ${state.adminToken}` },
  });
}

/** Distinct free loopback ports: all listeners stay open until every port is known. */
async function freePorts(n: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from({ length: n }, () =>
      new Promise<net.Server>((resolve, reject) => {
        const s = net.createServer();
        s.once('error', reject);
        s.listen(0, '127.0.0.1', () => resolve(s));
      }),
    ),
  );
  const ports = servers.map((s) => (s.address() as net.AddressInfo).port);
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  return ports;
}

// ---------------------------------------------------------------- state and locking

function readState(): State | null {
  try {
    return JSON.parse(fs.readFileSync(STATE_FILE, 'utf8')) as State;
  } catch {
    return null;
  }
}

function requireState(): State {
  const state = readState();
  if (!state) throw new Error('the test environment is not up: run npm run testenv -- up');
  return state;
}

function writeState(state: State): void {
  fs.writeFileSync(`${STATE_FILE}.tmp`, `${JSON.stringify(state, null, 2)}\n`);
  fs.renameSync(`${STATE_FILE}.tmp`, STATE_FILE);
}

/** Serializes up/down/stop/start across processes (parallel test files may all call `up`). */
async function withLock<T>(fn: () => Promise<T>): Promise<T> {
  fs.mkdirSync(DIR, { recursive: true });
  let waiting = false;
  for (;;) {
    try {
      fs.writeFileSync(LOCK_FILE, String(process.pid), { flag: 'wx' });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    let holder: number;
    try {
      holder = Number(fs.readFileSync(LOCK_FILE, 'utf8'));
    } catch {
      continue; // released meanwhile
    }
    if (holder && !pidAlive(holder)) {
      fs.rmSync(LOCK_FILE, { force: true }); // left behind by a crashed process
      continue;
    }
    // holder 0: the file exists but its pid is not written yet.
    if (holder && !waiting) log(`waiting for pid ${holder}, which holds ${LOCK_FILE}`);
    waiting = holder !== 0;
    await sleep(holder ? 500 : 50);
  }
  try {
    return await fn();
  } finally {
    fs.rmSync(LOCK_FILE, { force: true });
  }
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
