// The integration test environment: a real cluster on loopback, built from the Go modules in
// testenv/ (pinned Kubernetes release, and KWOK), plus the matching kubectl. Processes are detached
// so one `up` serves many test runs; everything lives under .testenv/ and is described by
// .testenv/env.json.
//
// By default it runs as a cluster does: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, and simulated nodes (KWOK's fake kubelets keep their leases and their pods'
// status). The controller manager, the scheduler and KWOK reach the apiserver through a Levee run
// from this checkout's src/ (restarted by `up` when that changes), so Levee serves the real control
// plane: protobuf, watch-lists, metadata-only informers, leader election. Each of these runs under
// test/env/supervise.ts, which starts it again when it exits (a leader that lost its lease while a
// fault test stopped the apiserver, a crash). What that means for tests:
//
// - A pod that names no node is bound by the scheduler (to any schedulable node) and, on a KWOK
//   node, goes Running. A pod a test wants to stay Pending and unbound names a scheduler nobody
//   runs (test/support/cluster.ts).
// - Pods bound to a node that does not exist are deleted by the pod garbage collector within about
//   a minute; tests bind pods to Node objects they create (unschedulable, left alone by KWOK).
// - Deleting a namespace completes, owners' dependents are garbage-collected, and every namespace
//   gets a "default" ServiceAccount and a "kube-root-ca.crt" ConfigMap shortly after it is created:
//   pods are admitted only once their ServiceAccount exists.
//
// `up --bare` (or LEVEE_TESTENV_BARE=1) starts only etcd and kube-apiserver, for work that needs a
// quiet apiserver (benchmarks): pods stay Pending, namespaces stay Terminating, nothing is
// collected, and no ServiceAccount is created (so the ServiceAccount admission plugin is off).
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { NODE_FLAGS } from '../../src/nodeflags.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const MODULE_DIR = path.join(ROOT, 'testenv');
const KWOK_MODULE_DIR = path.join(MODULE_DIR, 'kwok');
const E2E_MODULE_DIR = path.join(MODULE_DIR, 'e2e');
const DIR = path.join(ROOT, '.testenv');
const PKI = path.join(DIR, 'pki');
const LOGS = path.join(DIR, 'logs');
const RUN = path.join(DIR, 'run');
const ETCD_DATA = path.join(DIR, 'etcd-data');
const STATE_FILE = path.join(DIR, 'state.json');
const ENV_FILE = path.join(DIR, 'env.json');
const KUBECONFIG = path.join(DIR, 'kubeconfig');
const TOKEN_FILE = path.join(DIR, 'tokens.csv');
const LOCK_FILE = path.join(DIR, 'lock');
const LEVEE_SOURCES = [path.join(ROOT, 'src'), path.join(ROOT, 'package-lock.json')];
const LEVEE_CLI = path.join(ROOT, 'src', 'cli.ts');
const SUPERVISOR = path.join(import.meta.dirname, 'supervise.ts');
const RBAC_MANIFEST = path.join(ROOT, 'deploy', 'rbac.yaml');

const READY_TIMEOUT_MS = 120_000;
const SA_ISSUER = 'https://kubernetes.default.svc.cluster.local';

/** Simulated nodes when `up` is not told how many. */
export const DEFAULT_NODES = 3;
/** KWOK manages only nodes with this annotation (kwok.x-k8s.io/node=fake), so node-a and the other test nodes stay as tests make them. */
export const KWOK_ANNOTATION = 'kwok.x-k8s.io/node';
/** The label every simulated node carries, for a nodeSelector or a list. */
export const KWOK_LABEL = { key: 'type', value: 'kwok' } as const;

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

/** The processes besides etcd and kube-apiserver, each kept running by test/env/supervise.ts. */
export const COMPONENTS = ['levee', 'kube-controller-manager', 'kube-scheduler', 'kwok'] as const;
export type Component = (typeof COMPONENTS)[number];

/** The users the control plane authenticates to its Levee as (client certificates from testenv/cmd/pki). */
export const CONTROL_PLANE_USERS = {
  'kube-controller-manager': 'system:kube-controller-manager',
  'kube-scheduler': 'system:kube-scheduler',
  kwok: 'kwok-controller',
} as const;

export interface ControlPlane {
  /** The Levee kube-controller-manager, kube-scheduler and KWOK reach the apiserver through. */
  levee: string;
  /** Its log: JSON lines, one per request, with the user. */
  leveeLog: string;
  /** Kubeconfigs of the components (client certificates, server: the Levee above). */
  kubeconfigs: Record<Exclude<Component, 'levee'>, string>;
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
  /** The HTTPS load generator of the throughput benchmarks (testenv/cmd/load). */
  load: string;
  etcd: string;
  tokens: Record<TokenUser, string>;
  clientCerts: Record<CertUser, CertPair>;
  leveeServing: CertPair;
  logs: string;
  /** Only etcd and kube-apiserver run: no control plane, no nodes. */
  bare: boolean;
  /** The controller manager, scheduler and KWOK, and their Levee; null when bare. */
  controlPlane: ControlPlane | null;
  /** The simulated nodes, all Ready when `up` returned (labelled KWOK_LABEL); empty when bare. */
  nodes: string[];
}

export interface UpOptions {
  /** Simulated nodes (default: as many as run now, else $LEVEE_TESTENV_NODES, else DEFAULT_NODES). */
  nodes?: number;
  /** Only etcd and kube-apiserver (default: $LEVEE_TESTENV_BARE=1). */
  bare?: boolean;
}

export interface ProcessStatus {
  pid: number | null;
  running: boolean;
}

export interface ComponentStatus extends ProcessStatus {
  /** Its health endpoint answers 200 (Levee's /readyz, the others' /healthz). */
  healthy: boolean;
  /** How often its supervisor had to start it again since `up`. */
  restarts: number;
}

export interface Status {
  etcd: ProcessStatus;
  apiserver: ProcessStatus & { ready: boolean };
  server: string | null;
  bare: boolean;
  components: Partial<Record<Component, ComponentStatus>>;
  /** Simulated nodes: how many exist and how many are Ready; null when bare or unknown. */
  nodes: { ready: number; total: number } | null;
}

/** A managed process: enough to tell whether it is ours and to start it again identically. */
interface Proc {
  pid: number | null;
  bin: string;
  args: string[];
  log: string;
  env?: Record<string, string>;
}

interface ControlPlaneState {
  leveeUrl: string;
  /** What the running Levee was started from (its sources, Node, flags): `up` restarts it when this changes. */
  leveeHash: string;
  healthPorts: Record<Exclude<Component, 'levee'>, number>;
  procs: Record<Component, Proc>;
  nodes: number;
}

interface State {
  server: string;
  etcd: Proc;
  apiserver: Proc;
  /** Used for the /readyz probe: system:masters is authorized even before RBAC roles are bootstrapped. */
  adminToken: string;
  bare: boolean;
  /** Absent when bare, and until the control plane has been set up. */
  controlPlane?: ControlPlaneState;
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

/**
 * Builds if needed, starts everything and resolves once the apiserver is ready and, unless bare,
 * the control plane's Levee is ready, both leaders hold their leases and every node is Ready with
 * its lease. An environment already up is kept: a dead component or a Levee whose sources changed
 * is started again, and the nodes are scaled to the number asked; one in the other mode is
 * recreated.
 */
export function up(options: UpOptions = {}): Promise<TestEnv> {
  const bare = options.bare ?? ['1', 'true'].includes(process.env.LEVEE_TESTENV_BARE ?? '');
  let nodes = options.nodes;
  if (nodes === undefined && process.env.LEVEE_TESTENV_NODES) nodes = Number(process.env.LEVEE_TESTENV_NODES);
  if (nodes !== undefined && !(Number.isSafeInteger(nodes) && nodes >= 0)) throw new Error(`nodes: ${nodes} is not a whole number`);
  return withLock(() => upLocked(bare, nodes));
}

/** Stops every process and removes the etcd data and the state files (logs and binaries stay). */
export function down(): Promise<void> {
  return withLock(downLocked);
}

export async function status(): Promise<Status> {
  const state = readState();
  if (!state) {
    return { etcd: { pid: null, running: false }, apiserver: { pid: null, running: false, ready: false }, server: null, bare: false, components: {}, nodes: null };
  }
  const apiserverRunning = alive(state.apiserver);
  const ready = apiserverRunning && (await readyz(state)) === 200;
  const components: Status['components'] = {};
  const cp = state.controlPlane;
  if (cp) {
    await Promise.all(
      COMPONENTS.map(async (name) => {
        const p = cp.procs[name];
        const supervised = supervisedStatus(name);
        const running = alive(p) && supervised !== null && pidAlive(supervised.pid);
        components[name] = { pid: supervised?.pid ?? null, running, healthy: running && (await componentHealthy(cp, name)), restarts: supervised?.restarts ?? 0 };
      }),
    );
  }
  let nodes: Status['nodes'] = null;
  if (cp && ready) {
    try {
      nodes = await nodeCounts(state);
    } catch {
      // unknown
    } finally {
      closeApi();
    }
  }
  return {
    etcd: { pid: state.etcd.pid, running: alive(state.etcd) },
    apiserver: { pid: state.apiserver.pid, running: apiserverRunning, ready },
    server: state.server,
    bare: state.bare,
    components,
    nodes,
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

/** Stops only kube-apiserver; etcd, all data and the control plane stay (it reconnects once the apiserver is back). */
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

/**
 * kill -9 of kube-apiserver, as a crash: no graceful shutdown, its connections reset. etcd, the data
 * and the control plane stay; startApiserver() brings it back.
 */
export function killApiserver(): Promise<void> {
  return withLock(async () => {
    const state = requireState();
    await sigkill(state.apiserver);
    state.apiserver.pid = null;
    writeState(state);
  });
}

/**
 * kill -9 of etcd, as a crash. Its data directory stays (writes were acknowledged before the page
 * cache had them on disk, --unsafe-no-fsync, but the kernel keeps those through a process kill),
 * and kube-apiserver keeps running, failing its storage calls until startEtcd().
 */
export function killEtcd(): Promise<void> {
  return withLock(async () => {
    const state = requireState();
    await sigkill(state.etcd);
    state.etcd.pid = null;
    writeState(state);
  });
}

/** Starts etcd again with the same data, ports and flags; resolves once it is healthy. */
export function startEtcd(): Promise<void> {
  return withLock(async () => {
    const state = requireState();
    if (!alive(state.etcd)) {
      state.etcd.pid = await startDetached(state.etcd);
      writeState(state);
    }
    const url = state.etcd.args.find((a) => a.startsWith('--listen-client-urls='))!.split('=')[1]!;
    await waitFor('etcd', [state.etcd], async () => (await probe(`${url}/health`)) === 200);
  });
}

async function sigkill(p: Proc): Promise<void> {
  if (!alive(p) || !p.pid) return;
  log(`kill -9 ${path.basename(p.bin)} (pid ${p.pid})`);
  try {
    process.kill(p.pid, 'SIGKILL');
  } catch {
    // already gone
  }
  for (let i = 0; i < 100 && alive(p); i++) await sleep(50);
  if (alive(p)) throw new Error(`${p.bin} (pid ${p.pid}) survived SIGKILL`);
}

// ---------------------------------------------------------------- up / down

async function upLocked(bare: boolean, nodes: number | undefined): Promise<TestEnv> {
  const previous = readState();
  if (previous) {
    if (previous.bare !== bare) {
      log(`the environment is up ${previous.bare ? 'bare' : 'with its control plane'}; recreating it ${bare ? 'bare' : 'with its control plane'}`);
    } else if (!bare && !previous.controlPlane) {
      log('the control plane was never set up; recreating the environment');
    } else if (!alive(previous.etcd) || !alive(previous.apiserver)) {
      log('previous environment is partly down; recreating it');
    } else {
      let healthy = true;
      try {
        await waitReady(previous); // it may still be starting
      } catch (err) {
        healthy = false;
        log(`existing environment is unhealthy (${String(err).split('\n')[0]}); recreating it`);
      }
      if (healthy) {
        // The running components keep their binaries; a test program edited since is built again.
        await ensureBinaries(bare, TEST_PROGRAMS);
        const env = loadEnv();
        if (previous.controlPlane) {
          // A control plane that cannot be made healthy is an error to see, not a reason to
          // throw away the cluster: a Levee that no longer starts is most often the change under test.
          env.nodes = await reconcileControlPlane(previous, nodes ?? previous.controlPlane.nodes);
          fs.writeFileSync(ENV_FILE, `${JSON.stringify(env, null, 2)}\n`);
        }
        log(`already up: ${previous.server}${previous.bare ? ' (bare)' : `, Levee ${previous.controlPlane!.leveeUrl}, ${env.nodes.length} nodes`}`);
        return env;
      }
    }
    await downLocked();
  }

  const bins = await ensureBinaries(bare);
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
    bare,
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
        // The ServiceAccount admission plugin (on by default) refuses a pod whose ServiceAccount
        // does not exist. With the controller manager every namespace gets its "default" one;
        // bare, nothing creates it, and every pod would be refused.
        ...(bare ? ['--disable-admission-plugins=ServiceAccount'] : []),
        // The Node authorizer lets any node create, update and patch any Node and any pod's status,
        // mirror pods and evictions; NodeRestriction confines those writes to the node's own
        // objects. Real clusters pair the two (kubeadm does), and it acts only on requests from
        // node identities, so nothing else here changes.
        '--enable-admission-plugins=NodeRestriction',
        '--watch-cache=true',
      ],
    },
  };

  const env: TestEnv = {
    version: bins.version,
    server,
    caFile,
    kubeconfig: KUBECONFIG,
    kubectl: bins.kubectl,
    informer: bins.informer,
    linearizability: bins.linearizability,
    load: bins.load,
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
    bare,
    controlPlane: null,
    nodes: [],
  };
  fs.writeFileSync(KUBECONFIG, kubeconfig(env), { mode: 0o600 });

  try {
    state.etcd.pid = await startDetached(state.etcd);
    writeState(state); // from here on `down` can clean up whatever happens
    await waitFor('etcd', [state.etcd], async () => (await probe(`${etcdUrl}/health`)) === 200);
    state.apiserver.pid = await startDetached(state.apiserver);
    writeState(state);
    await waitReady(state);
    if (!bare) {
      const cp = await startControlPlane(state, bins, nodes ?? DEFAULT_NODES);
      env.controlPlane = controlPlaneEnv(cp);
      env.nodes = nodeNames(cp.nodes);
    }
  } catch (err) {
    await downLocked();
    throw err;
  }

  fs.writeFileSync(ENV_FILE, `${JSON.stringify(env, null, 2)}\n`);
  log(`up: ${server} (Kubernetes ${env.version})${bare ? ', bare' : `, Levee ${env.controlPlane!.levee}, ${env.nodes.length} nodes`}`);
  return env;
}

async function downLocked(): Promise<void> {
  const state = readState();
  if (state) {
    // Clients first, so nothing logs a storm of errors while the apiserver goes.
    for (const name of [...COMPONENTS].reverse()) {
      const p = state.controlPlane?.procs[name];
      if (p) await terminate(p, name, 15_000);
    }
    await terminate(state.apiserver, 'kube-apiserver');
    await terminate(state.etcd, 'etcd');
  }
  const kubeconfigs = [LEVEE_KUBECONFIG, ...(['kube-controller-manager', 'kube-scheduler', 'kwok'] as const).map(componentKubeconfig)];
  for (const p of [ETCD_DATA, STATE_FILE, ENV_FILE, KUBECONFIG, TOKEN_FILE, RUN, ...kubeconfigs]) {
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

/** A kubeconfig of one user, by token or by client certificate (JSON, which is YAML). */
function userKubeconfig(server: string, user: { name: string; token?: string; cert?: CertPair }): string {
  const credentials = user.token ? { token: user.token } : { 'client-certificate': user.cert!.cert, 'client-key': user.cert!.key };
  return `${JSON.stringify(
    {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'levee-test', cluster: { server, 'certificate-authority': path.join(PKI, 'ca.crt') } }],
      users: [{ name: user.name, user: credentials }],
      contexts: [{ name: 'levee-test', context: { cluster: 'levee-test', user: user.name } }],
      'current-context': 'levee-test',
    },
    null,
    2,
  )}\n`;
}

// ---------------------------------------------------------------- the control plane

const componentKubeconfig = (name: Exclude<Component, 'levee'>): string => path.join(DIR, `${name}.kubeconfig`);
/** Levee's own credentials: a token of the levee/levee ServiceAccount of deploy/rbac.yaml. */
const LEVEE_KUBECONFIG = path.join(DIR, 'levee.controlplane.kubeconfig');

function controlPlaneEnv(cp: ControlPlaneState): ControlPlane {
  return {
    levee: cp.leveeUrl,
    leveeLog: cp.procs.levee.log,
    kubeconfigs: {
      'kube-controller-manager': componentKubeconfig('kube-controller-manager'),
      'kube-scheduler': componentKubeconfig('kube-scheduler'),
      kwok: componentKubeconfig('kwok'),
    },
  };
}

/** A process run by test/env/supervise.ts, which starts it again whenever it exits. */
function supervised(name: Component, bin: string, args: string[], env?: Record<string, string>): Proc {
  return {
    pid: null,
    bin: process.execPath,
    args: [SUPERVISOR, path.join(RUN, `${name}.json`), '--', bin, ...args],
    log: path.join(LOGS, `${name}.log`),
    ...(env ? { env } : {}),
  };
}

function supervisedStatus(name: Component): { pid: number; restarts: number } | null {
  try {
    return JSON.parse(fs.readFileSync(path.join(RUN, `${name}.json`), 'utf8')) as { pid: number; restarts: number };
  } catch {
    return null;
  }
}

/**
 * The control plane's Levee, as a central gateway is deployed: TLS with the test CA's serving
 * certificate, client certificates accepted (the components' identities, impersonated upstream),
 * the ServiceAccount of deploy/rbac.yaml as its identity, and that role's optional features on
 * (service-account tokens verified locally: the controllers' own; RBAC evaluated locally).
 */
function leveeProc(url: string): Proc {
  const port = new URL(url).port;
  return supervised('levee', process.execPath, [
    ...NODE_FLAGS,
    LEVEE_CLI,
    '--kubeconfig', LEVEE_KUBECONFIG,
    '--listen', `127.0.0.1:${port}`,
    '--tls-cert-file', path.join(PKI, 'levee.crt'),
    '--tls-private-key-file', path.join(PKI, 'levee.key'),
    '--client-ca-file', path.join(PKI, 'ca.crt'),
    '--authentication-local-serviceaccount-tokens',
    '--authorization-local-rbac',
    // A restart for new sources should not wait out the default 30 s for long requests.
    '--shutdown-grace-period', '5s',
    '--log-level', 'info',
  ]);
}

/** What a running Levee was started from: its sources, dependencies, Node and command line. */
function leveeHash(p: Proc): string {
  const h = createHash('sha256');
  const files: string[] = [];
  const walk = (f: string): void => {
    if (fs.statSync(f).isDirectory()) for (const e of fs.readdirSync(f)) walk(path.join(f, e));
    else files.push(f);
  };
  for (const f of LEVEE_SOURCES) walk(f);
  for (const f of files.sort()) h.update(`${path.relative(ROOT, f)}\0`).update(fs.readFileSync(f)).update('\0');
  h.update(JSON.stringify([p.bin, p.args]));
  return h.digest('hex');
}

async function startControlPlane(state: State, bins: Binaries, nodes: number): Promise<ControlPlaneState> {
  const [leveePort, kcmPort, schedulerPort, kwokPort] = await freePorts(4);
  const leveeUrl = `https://127.0.0.1:${leveePort}`;
  fs.mkdirSync(RUN, { recursive: true });

  // Identities. Levee's: deploy/rbac.yaml as shipped. KWOK's: KWOK's own ClusterRole (from its
  // module), bound to the user of its certificate. The controller manager and the scheduler are
  // users the apiserver's bootstrap RBAC already knows.
  await run(bins.kubectl, ['--kubeconfig', KUBECONFIG, 'apply', '-f', RBAC_MANIFEST, '-f', bins.kwokRole, '-f', '-'], {
    input: JSON.stringify({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'kwok-controller' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'kwok-controller' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: CONTROL_PLANE_USERS.kwok }],
    }),
    env: { ...process.env, KUBECACHEDIR: path.join(DIR, 'kubectl-cache') },
  });
  // Valid as long as any environment lives; a new `up` makes a new cluster and a new token.
  const tokenRequest = await api(state, 'POST', '/api/v1/namespaces/levee/serviceaccounts/levee/token', {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: { expirationSeconds: 365 * 24 * 3600 },
  });
  if (tokenRequest.status !== 201) throw new Error(`TokenRequest for levee/levee: ${tokenRequest.status} ${tokenRequest.body}`);
  const leveeToken = (JSON.parse(tokenRequest.body) as { status: { token: string } }).status.token;
  fs.writeFileSync(LEVEE_KUBECONFIG, userKubeconfig(state.server, { name: 'levee', token: leveeToken }), { mode: 0o600 });
  for (const name of ['kube-controller-manager', 'kube-scheduler', 'kwok'] as const) {
    const cert = { cert: path.join(PKI, `${name}.crt`), key: path.join(PKI, `${name}.key`) };
    fs.writeFileSync(componentKubeconfig(name), userKubeconfig(leveeUrl, { name: CONTROL_PLANE_USERS[name], cert }), { mode: 0o600 });
  }

  // Every component serves its health on loopback (the secure ports are for this only; their
  // defaults, 10257 and 10259, would collide between environments on one machine).
  const delegated = (name: Exclude<Component, 'levee'>): string[] => [
    `--kubeconfig=${componentKubeconfig(name)}`,
    // Their own endpoints authenticate and authorize callers through the apiserver, here Levee.
    `--authentication-kubeconfig=${componentKubeconfig(name)}`,
    `--authorization-kubeconfig=${componentKubeconfig(name)}`,
    '--bind-address=127.0.0.1',
    '--leader-elect=true',
  ];
  const levee = leveeProc(leveeUrl);
  const cp: ControlPlaneState = {
    leveeUrl,
    leveeHash: leveeHash(levee),
    healthPorts: { 'kube-controller-manager': kcmPort!, 'kube-scheduler': schedulerPort!, kwok: kwokPort! },
    nodes,
    procs: {
      levee,
      'kube-controller-manager': supervised('kube-controller-manager', bins.kubeControllerManager!, [
        ...delegated('kube-controller-manager'),
        `--secure-port=${kcmPort}`,
        // Each controller runs as its own ServiceAccount (kube-system/deployment-controller, ...),
        // as kubeadm sets it up, with tokens it requests for them: Levee sees many users.
        '--use-service-account-credentials=true',
        `--service-account-private-key-file=${path.join(PKI, 'sa.key')}`,
        `--root-ca-file=${path.join(PKI, 'ca.crt')}`,
        `--cluster-signing-cert-file=${path.join(PKI, 'ca.crt')}`,
        `--cluster-signing-key-file=${path.join(PKI, 'ca.key')}`,
        '--cluster-name=levee-test',
      ]),
      'kube-scheduler': supervised('kube-scheduler', bins.kubeScheduler!, [...delegated('kube-scheduler'), `--secure-port=${schedulerPort}`]),
      kwok: supervised(
        'kwok',
        bins.kwok!,
        [
          `--kubeconfig=${componentKubeconfig('kwok')}`,
          `--config=${bins.kwokStages}`,
          // Only the nodes testenv makes for it: the Node objects tests create for node-a and the
          // like are no kubelet's, and their pods must stay as the tests leave them.
          '--manage-all-nodes=false',
          `--manage-nodes-with-annotation-selector=${KWOK_ANNOTATION}=fake`,
          // A kubelet's defaults: a 40 s lease, renewed every 10 s.
          '--node-lease-duration-seconds=40',
          // Pod IPs for tens of thousands of pods (the default /24 has 254).
          '--cidr=10.244.0.0/16',
          `--server-address=127.0.0.1:${kwokPort}`,
        ],
        // KWOK also reads ~/.kwok/kwok.yaml when it exists: a developer's own must not change this cluster.
        { HOME: path.join(DIR, 'kwok-home') },
      ),
    },
  };
  state.controlPlane = cp;
  writeState(state);
  fs.mkdirSync(cp.procs.kwok.env!.HOME!, { recursive: true });

  cp.procs.levee.pid = await startDetached(cp.procs.levee);
  writeState(state);
  await waitLevee(cp);
  for (const name of ['kube-controller-manager', 'kube-scheduler', 'kwok'] as const) {
    cp.procs[name].pid = await startDetached(cp.procs[name]);
    writeState(state);
  }
  await scaleNodes(state, nodes);
  await waitControlPlane(state);
  return cp;
}

/** Starts again what is not running or runs outdated code, scales the nodes; resolves when all is ready. */
async function reconcileControlPlane(state: State, nodes: number): Promise<string[]> {
  const cp = state.controlPlane!;
  const levee = leveeProc(cp.leveeUrl);
  const hash = leveeHash(levee);
  const leveeAlive = alive(cp.procs.levee);
  if (!leveeAlive || hash !== cp.leveeHash) {
    log(leveeAlive ? 'Levee\'s sources changed since it started: restarting the control plane\'s Levee' : 'the control plane\'s Levee is not running: starting it');
    await terminate(cp.procs.levee, 'levee', 15_000);
    cp.procs.levee = levee;
    cp.leveeHash = hash;
    cp.procs.levee.pid = await startDetached(levee);
    writeState(state);
    await waitLevee(cp);
    // Clients that came back while the new Levee was still syncing were forwarded, and their
    // watches stay upstream for as long as they last (minutes). KWOK, the agent of this cluster,
    // starts again (within seconds, leases kept): its informers are served from the cache, as in
    // a fresh environment. The controller manager and the scheduler keep running: starting them
    // again would cost a leader election (15 s), and they are served either way.
    await terminate(cp.procs.kwok, 'kwok', 15_000);
    // KWOK creates its nodes' leases before its informer of them has listed: with the old leases
    // still there, that fails and it manages nothing for 30 s. It starts with none, as at `up`.
    const leases = await api(state, 'DELETE', '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases');
    if (leases.status !== 200) throw new Error(`deleting the node leases: ${leases.status} ${leases.body}`);
  }
  for (const name of ['kube-controller-manager', 'kube-scheduler', 'kwok'] as const) {
    if (alive(cp.procs[name])) continue;
    log(`${name} is not running: starting it`);
    cp.procs[name].pid = await startDetached(cp.procs[name]);
    writeState(state);
  }
  if (nodes !== cp.nodes) {
    await scaleNodes(state, nodes);
    cp.nodes = nodes;
    writeState(state);
  }
  await waitControlPlane(state);
  return nodeNames(nodes);
}

function waitLevee(cp: ControlPlaneState): Promise<void> {
  return waitFor('the control plane\'s Levee /readyz', [cp.procs.levee], async () => (await componentHealthy(cp, 'levee')));
}

async function componentHealthy(cp: ControlPlaneState, name: Component): Promise<boolean> {
  if (name === 'levee') return (await probe(`${cp.leveeUrl}/readyz`, { ca: fs.readFileSync(path.join(PKI, 'ca.crt')) })) === 200;
  if (name === 'kwok') return (await probe(`http://127.0.0.1:${cp.healthPorts.kwok}/healthz`)) === 200;
  // Their serving certificates are self-signed in memory; all that matters here is the answer.
  return (await probe(`https://127.0.0.1:${cp.healthPorts[name]}/healthz`, { rejectUnauthorized: false })) === 200;
}

const nodeNames = (n: number): string[] => Array.from({ length: n }, (_, i) => `kwok-node-${i}`);
const KWOK_SELECTOR = encodeURIComponent(`${KWOK_LABEL.key}=${KWOK_LABEL.value}`);

/** A Node as a kubelet registers it, for KWOK to take over (it sets the conditions and keeps the lease). */
function kwokNode(name: string): unknown {
  const resources = { cpu: '32', memory: '256Gi', pods: '110' };
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name,
      annotations: { [KWOK_ANNOTATION]: 'fake', 'node.alpha.kubernetes.io/ttl': '0' },
      labels: {
        [KWOK_LABEL.key]: KWOK_LABEL.value,
        'kubernetes.io/hostname': name,
        'kubernetes.io/os': 'linux',
        'kubernetes.io/arch': 'amd64',
        'node-role.kubernetes.io/agent': '',
      },
    },
    // A registering kubelet reports its capacity; Nodes, unlike most objects, take status on create.
    status: { capacity: resources, allocatable: resources },
  };
}

/** Creates and deletes simulated nodes until exactly kwok-node-0 … kwok-node-(n-1) exist. */
async function scaleNodes(state: State, n: number): Promise<void> {
  const list = await api(state, 'GET', `/api/v1/nodes?labelSelector=${KWOK_SELECTOR}`);
  if (list.status !== 200) throw new Error(`listing nodes: ${list.status} ${list.body}`);
  const have = new Set((JSON.parse(list.body) as { items: Array<{ metadata: { name: string } }> }).items.map((o) => o.metadata.name));
  const want = new Set(nodeNames(n));
  const create = [...want].filter((name) => !have.has(name));
  const remove = [...have].filter((name) => !want.has(name));
  if (create.length === 0 && remove.length === 0) return;
  const started = Date.now();
  // Many at once, so thousands of nodes take seconds; the apiserver takes them in parallel.
  await inParallel(create, 32, async (name) => {
    const r = await api(state, 'POST', '/api/v1/nodes', kwokNode(name));
    if (r.status !== 201 && r.status !== 409) throw new Error(`creating node ${name}: ${r.status} ${r.body}`);
  });
  await inParallel(remove, 32, async (name) => {
    const r = await api(state, 'DELETE', `/api/v1/nodes/${name}`);
    if (r.status !== 200 && r.status !== 404) throw new Error(`deleting node ${name}: ${r.status} ${r.body}`);
  });
  log(`nodes: ${create.length} created, ${remove.length} deleted in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

async function inParallel<T>(items: T[], width: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, items.length) }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

async function nodeCounts(state: State): Promise<{ ready: number; total: number }> {
  const r = await api(state, 'GET', `/api/v1/nodes?labelSelector=${KWOK_SELECTOR}&resourceVersion=0`);
  if (r.status !== 200) throw new Error(`listing nodes: ${r.status}`);
  const items = (JSON.parse(r.body) as { items: Array<{ status?: { conditions?: Array<{ type: string; status: string }> } }> }).items;
  return { total: items.length, ready: items.filter((n) => n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')).length };
}

/**
 * Ready means: every node Ready with its lease, both leaders holding a fresh lease, and the
 * serviceaccount controller done with the "default" namespace (the controllers work end to end).
 */
async function waitControlPlane(state: State): Promise<void> {
  const cp = state.controlPlane!;
  const started = Date.now();
  const timeoutMs = 180_000 + 50 * cp.nodes;
  let missing = '';
  let reported = 0;
  const leaseFresh = async (ns: string, name: string): Promise<boolean> => {
    const r = await api(state, 'GET', `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${name}`);
    if (r.status !== 200) return false;
    const spec = (JSON.parse(r.body) as { spec?: { holderIdentity?: string; renewTime?: string; leaseDurationSeconds?: number } }).spec;
    if (!spec?.holderIdentity || !spec.renewTime) return false;
    return Date.now() - Date.parse(spec.renewTime) < 1000 * (spec.leaseDurationSeconds ?? 15) + 5000;
  };
  const ok = async (): Promise<boolean> => {
    const waiting: string[] = [];
    const nodes = await nodeCounts(state);
    if (nodes.ready !== cp.nodes || nodes.total !== cp.nodes) waiting.push(`nodes Ready ${nodes.ready}/${cp.nodes}`);
    const leases = await api(state, 'GET', `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases?resourceVersion=0`);
    const held = leases.status === 200 ? new Set((JSON.parse(leases.body) as { items: Array<{ metadata: { name: string } }> }).items.map((l) => l.metadata.name)) : new Set();
    const withLease = nodeNames(cp.nodes).filter((n) => held.has(n)).length;
    if (withLease !== cp.nodes) waiting.push(`node leases ${withLease}/${cp.nodes}`);
    for (const leader of ['kube-controller-manager', 'kube-scheduler']) {
      if (!(await leaseFresh('kube-system', leader))) waiting.push(`${leader} leader lease`);
    }
    if ((await api(state, 'GET', '/api/v1/namespaces/default/serviceaccounts/default')).status !== 200) waiting.push('ServiceAccount default/default');
    missing = waiting.join(', ');
    if (missing && Date.now() - reported > 15_000) {
      reported = Date.now();
      log(`waiting for the control plane (${Math.round((Date.now() - started) / 1000)} s): ${missing}`);
    }
    return missing === '';
  };
  await waitFor(() => `the control plane (${missing})`, Object.values(cp.procs), ok, timeoutMs);
}

// ---------------------------------------------------------------- build

interface GoBinary {
  /** Module directory the build runs in. */
  module: string;
  pkg: string;
  /** Only for the control plane: not built for a bare environment. */
  controlPlane?: boolean;
  /** Built by `go test -c`: the package's test binary. */
  test?: boolean;
}

const GO_PACKAGES = {
  'kube-apiserver': { module: MODULE_DIR, pkg: 'k8s.io/kubernetes/cmd/kube-apiserver' },
  'kube-controller-manager': { module: MODULE_DIR, pkg: 'k8s.io/kubernetes/cmd/kube-controller-manager', controlPlane: true },
  'kube-scheduler': { module: MODULE_DIR, pkg: 'k8s.io/kubernetes/cmd/kube-scheduler', controlPlane: true },
  kubectl: { module: MODULE_DIR, pkg: 'k8s.io/kubernetes/cmd/kubectl' },
  etcd: { module: MODULE_DIR, pkg: './cmd/etcd' },
  pki: { module: MODULE_DIR, pkg: './cmd/pki' },
  informer: { module: MODULE_DIR, pkg: './cmd/informer' },
  linearizability: { module: MODULE_DIR, pkg: './cmd/linearizability' },
  load: { module: MODULE_DIR, pkg: './cmd/load' },
  kwok: { module: KWOK_MODULE_DIR, pkg: 'sigs.k8s.io/kwok/cmd/kwok', controlPlane: true },
  // Kubernetes' own end-to-end suite and the ginkgo CLI that runs it in parallel, for the
  // conformance runs (test/conformance/): the suite needs a cluster, so not for a bare one.
  'e2e.test': { module: E2E_MODULE_DIR, pkg: 'k8s.io/kubernetes/test/e2e', controlPlane: true, test: true },
  ginkgo: { module: E2E_MODULE_DIR, pkg: 'github.com/onsi/ginkgo/v2/ginkgo', controlPlane: true },
} as const satisfies Record<string, GoBinary>;
type Binary = keyof typeof GO_PACKAGES;

/**
 * KWOK's default stages, as kwokctl configures them: nodes become Ready and keep a lease (their
 * status is refreshed every 10 to 20 minutes, as a kubelet with leases does), pods on them go
 * Running, Job pods complete, and a pod being deleted is removed.
 */
const KWOK_STAGES = [
  'kustomize/stage/node/fast/node-initialize.yaml',
  'kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml',
  'kustomize/stage/pod/fast/pod-ready.yaml',
  'kustomize/stage/pod/fast/pod-complete.yaml',
  'kustomize/stage/pod/fast/pod-delete.yaml',
];
const KWOK_ROLE = 'kustomize/rbac/role.yaml';
/**
 * KWOK's own options, first in its --config file. Its defaults (4 workers each) are sized for small
 * clusters: with thousands of nodes, 4 lease workers cannot renew every lease each 10 s, and 4 pod
 * workers take pods to Running at ~25 a second on a busy machine (100,000 pods in over an hour).
 */
const KWOK_CONFIGURATION = {
  apiVersion: 'config.kwok.x-k8s.io/v1alpha1',
  kind: 'KwokConfiguration',
  options: { podPlayStageParallelism: 32, nodePlayStageParallelism: 8, nodeLeaseParallelism: 16 },
};

interface Binaries {
  version: string;
  kubeApiserver: string;
  kubectl: string;
  etcd: string;
  pki: string;
  informer: string;
  linearizability: string;
  /** The HTTPS load generator of the throughput benchmarks (testenv/cmd/load). */
  load: string;
  kubeControllerManager?: string;
  kubeScheduler?: string;
  kwok?: string;
  e2eTest?: string;
  ginkgo?: string;
  /** KWOK_CONFIGURATION and KWOK_STAGES in one file, for kwok --config. */
  kwokStages: string;
  /** KWOK's ClusterRole for its controller. */
  kwokRole: string;
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
  if (GO_PACKAGES[name].pkg.startsWith('k8s.io/')) {
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
  const { module, pkg } = GO_PACKAGES[name];
  const h = createHash('sha256');
  const files = ['go.mod', 'go.sum'];
  const walk = (rel: string): void => {
    for (const e of fs.readdirSync(path.join(module, rel), { withFileTypes: true })) {
      const r = path.join(rel, e.name);
      if (e.isDirectory()) walk(r);
      else files.push(r);
    }
  };
  // Our own commands also depend on their sources; the upstream ones only on go.mod/go.sum.
  if (pkg.startsWith('./')) walk(pkg);
  for (const f of files.sort()) h.update(`${f}\0`).update(fs.readFileSync(path.join(module, f))).update('\0');
  h.update(JSON.stringify(buildArgs(name, version)));
  if (name === 'kwok') h.update(JSON.stringify([KWOK_STAGES, KWOK_ROLE, KWOK_CONFIGURATION]));
  return h.digest('hex');
}

/** Levee's own test programs: rebuilt when their source changed, even for an environment already up. */
const TEST_PROGRAMS: readonly Binary[] = ['informer', 'linearizability', 'load'];

/** Builds what is missing or stale; with `only`, just those (and the paths returned for the others are absent). */
async function ensureBinaries(bare: boolean, only?: readonly Binary[]): Promise<Binaries> {
  const version = moduleVersion();
  const binDir = path.join(DIR, 'bin', version);
  fs.mkdirSync(binDir, { recursive: true });

  // Prebuilt binaries (the controller-runtime envtest layout: kube-apiserver, etcd, kubectl) win
  // over building; what the folder lacks besides those two is built.
  const assets = process.env.KUBEBUILDER_ASSETS;
  const prebuilt = (name: Binary): string | undefined => {
    // Levee's own test programs and KWOK are always built here.
    if (!assets || name === 'pki' || name === 'informer' || name === 'linearizability' || name === 'load' || name === 'kwok') return undefined;
    const p = path.join(assets, name);
    if (fs.existsSync(p)) return p;
    if (name === 'kube-apiserver' || name === 'etcd') throw new Error(`KUBEBUILDER_ASSETS=${assets} has no ${name}`);
    return undefined;
  };

  const kwokStages = path.join(binDir, 'kwok-stages.yaml');
  const kwokRole = path.join(binDir, 'kwok-role.yaml');
  const paths = {} as Partial<Record<Binary, string>>;
  for (const name of Object.keys(GO_PACKAGES) as Binary[]) {
    const spec: GoBinary = GO_PACKAGES[name];
    if ((bare && spec.controlPlane) || (only && !only.includes(name))) continue;
    const given = prebuilt(name);
    if (given) {
      paths[name] = given;
      continue;
    }
    const out = path.join(binDir, name);
    paths[name] = out;
    const stamp = `${out}.stamp`;
    const hash = sourceHash(name, version);
    const extras = name === 'kwok' ? [kwokStages, kwokRole] : [];
    if ([out, stamp, ...extras].every((f) => fs.existsSync(f)) && fs.readFileSync(stamp, 'utf8') === hash) continue;
    await goBuild(name, version, out);
    if (name === 'kwok') await copyKwokFiles(kwokStages, kwokRole);
    fs.writeFileSync(stamp, hash);
  }
  const apiserverVersion = assets && paths['kube-apiserver'] ? await reportedVersion(paths['kube-apiserver']) : version;
  return {
    version: apiserverVersion,
    kubeApiserver: paths['kube-apiserver']!,
    kubectl: paths.kubectl!,
    etcd: paths.etcd!,
    pki: paths.pki!,
    informer: paths.informer!,
    linearizability: paths.linearizability!,
    load: paths.load!,
    kubeControllerManager: paths['kube-controller-manager'],
    kubeScheduler: paths['kube-scheduler'],
    kwok: paths.kwok,
    e2eTest: paths['e2e.test'],
    ginkgo: paths.ginkgo,
    kwokStages,
    kwokRole,
  };
}

/**
 * Kubernetes' e2e test binary (e2e.test of k8s.io/kubernetes/test/e2e, the release testenv/go.mod
 * pins) and the ginkgo CLI, built once like the cluster's binaries (`up` builds them too, unless
 * bare); an environment that is already up does not rebuild, so the conformance runs ask here.
 */
export function ensureConformanceBinaries(): Promise<{ e2eTest: string; ginkgo: string }> {
  return withLock(async () => {
    const bins = await ensureBinaries(false);
    return { e2eTest: bins.e2eTest!, ginkgo: bins.ginkgo! };
  });
}

/** KWOK's stages and role as its release ships them, from the module the binary was built from. */
async function copyKwokFiles(stages: string, role: string): Promise<void> {
  const dir = (await run('go', ['list', '-m', '-f', '{{.Dir}}', 'sigs.k8s.io/kwok'], { cwd: KWOK_MODULE_DIR, env: { ...process.env, GOTOOLCHAIN: 'local' } })).trim();
  const read = (rel: string): string => fs.readFileSync(path.join(dir, rel), 'utf8');
  fs.writeFileSync(
    stages,
    [`# KWOK's options (test/env/testenv.ts)\n${JSON.stringify(KWOK_CONFIGURATION)}\n`, ...KWOK_STAGES.map((f) => `# ${f} (sigs.k8s.io/kwok)\n${read(f).replace(/^---\n/, '')}`)].join('---\n'),
  );
  fs.writeFileSync(role, read(KWOK_ROLE));
}

async function goBuild(name: Binary, version: string, out: string): Promise<void> {
  const { module, pkg } = GO_PACKAGES[name];
  const upstream = !pkg.startsWith('./');
  log(`building ${name}${upstream ? ` ${name === 'kwok' || name === 'ginkgo' ? '' : `${version} `}(minutes when the Go build cache is cold)` : ''}`);
  const started = Date.now();
  const elapsed = (): string => `${Math.round((Date.now() - started) / 1000)}s`;
  const heartbeat = setInterval(() => log(`  still building ${name} (${elapsed()})`), 30_000);
  try {
    const tmp = `${out}.tmp`;
    const spec: GoBinary = GO_PACKAGES[name];
    const args = buildArgs(name, version);
    if (spec.test) args.splice(0, 1, 'test', '-c', '-vet=off');
    await run('go', [...args, '-o', tmp, pkg], {
      cwd: module,
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
function run(cmd: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv; input?: string } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: opts.cwd, env: opts.env, stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'inherit'] });
    if (opts.input !== undefined) child.stdin!.end(opts.input);
    let stdout = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout += d));
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
    const child = spawn(p.bin, p.args, { detached: true, stdio: ['ignore', fd, fd], cwd: DIR, env: { ...process.env, ...p.env } });
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

/**
 * True if the pid is alive and still runs our command (a recycled pid or a zombie is not ours):
 * its program, and its first argument, which tells the supervised processes apart (all are node).
 */
function alive(p: Proc): boolean {
  if (!p.pid) return false;
  try {
    process.kill(p.pid, 0);
  } catch {
    return false;
  }
  try {
    const argv = fs.readFileSync(`/proc/${p.pid}/cmdline`, 'utf8').split('\0');
    return argv[0] === p.bin && (p.args.length === 0 || argv[1] === p.args[0]);
  } catch {
    return process.platform !== 'linux'; // no /proc elsewhere: trust kill(0)
  }
}

/**
 * SIGTERM, then SIGKILL to its whole process group if it has not exited in time. Each process
 * started here leads its own group (detached), so a supervisor's component goes with it.
 */
async function terminate(p: Proc, name: string, graceMs = 5000): Promise<void> {
  const kill = (target: number, sig: NodeJS.Signals): void => {
    try {
      process.kill(target, sig);
    } catch {
      // already gone
    }
  };
  if (alive(p) && p.pid) {
    log(`stopping ${name} (pid ${p.pid})`);
    const pid = p.pid;
    kill(pid, 'SIGTERM');
    for (let i = 0; i < graceMs / 100 && alive(p); i++) await sleep(100);
    if (alive(p)) {
      log(`${name} did not exit within ${graceMs / 1000}s of SIGTERM; sending SIGKILL`);
      kill(-pid, 'SIGKILL');
      for (let i = 0; i < 50 && alive(p); i++) await sleep(100);
    }
  }
  // A supervisor killed from outside leaves its component running, still in its process group.
  const stray = strayComponent(p);
  if (stray) {
    log(`stopping ${name}, left running by its supervisor (pid ${stray})`);
    kill(stray, 'SIGKILL');
  }
}

/** The pid of a supervised component whose supervisor is gone, if it still runs. */
function strayComponent(p: Proc): number | null {
  if (p.args[0] !== SUPERVISOR || !p.pid || alive(p)) return null;
  let child: number;
  try {
    child = (JSON.parse(fs.readFileSync(p.args[1]!, 'utf8')) as { pid: number }).pid;
  } catch {
    return null;
  }
  try {
    // Ours only if it runs the component's program in the supervisor's process group (field 5 of
    // /proc/PID/stat, after the parenthesized command, which may itself hold spaces).
    const program = fs.readFileSync(`/proc/${child}/cmdline`, 'utf8').split('\0')[0];
    const stat = fs.readFileSync(`/proc/${child}/stat`, 'utf8');
    const pgrp = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
    return program === p.args[3] && pgrp === p.pid ? child : null;
  } catch {
    return null;
  }
}

function waitReady(state: State): Promise<void> {
  return waitFor('kube-apiserver /readyz', [state.etcd, state.apiserver], async () => (await readyz(state)) === 200);
}

/** Polls `ok` until true; fails fast with the log tail when a process dies, or after the timeout. */
async function waitFor(what: string | (() => string), procs: Proc[], ok: () => Promise<boolean>, timeoutMs = READY_TIMEOUT_MS): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const name = (): string => (typeof what === 'string' ? what : what());
  for (;;) {
    if (await ok()) return;
    const dead = procs.find((p) => !alive(p));
    if (dead) throw new Error(`${path.basename(dead.log, '.log')} exited while waiting for ${name()}\n${tail(dead.log)}`);
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs / 1000}s waiting for ${name()}\n${procs.map((p) => tail(p.log)).join('\n')}`);
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

// One connection pool for testenv's own requests to the apiserver (as admin).
let apiAgent: https.Agent | undefined;

/** A request to the apiserver as admin; the body is JSON. */
function api(state: State, method: string, urlPath: string, body?: unknown): Promise<{ status: number; body: string }> {
  apiAgent ??= new https.Agent({ keepAlive: true, maxSockets: 32, ca: fs.readFileSync(path.join(PKI, 'ca.crt')) });
  const agent = apiAgent;
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = https.request(
      `${state.server}${urlPath}`,
      {
        method,
        agent,
        timeout: 30_000,
        headers: {
          authorization: `Bearer ${state.adminToken}`,
          accept: 'application/json',
          ...(payload ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (d: string) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${urlPath}: no answer in 30 s`)));
    req.on('error', reject);
    req.end(payload);
  });
}

function closeApi(): void {
  apiAgent?.destroy();
  apiAgent = undefined;
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
    closeApi();
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
