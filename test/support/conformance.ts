// Kubernetes' own e2e conformance tests (e2e.test of k8s.io/kubernetes/test/e2e, built by the test
// environment from the release it runs) against the test environment's cluster, directly and
// through a Levee. test/conformance/list.yaml says which of the sig-api-machinery, sig-apps and
// sig-node Conformance tests run and why each of the others does not; scripts/conformance.ts runs
// the whole list both ways, test/integration/conformance.test.ts the part marked `ci`.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { ensureConformanceBinaries, type TestEnv } from '../env/testenv.ts';
import { startLevee, type LeveeProcess } from './levee.ts';

export const LIST_FILE = path.resolve(import.meta.dirname, '../conformance/list.yaml');

export interface ListEntry {
  /** The spec's full name: its containers' texts and its own, as conformance.yaml's codename. */
  name: string;
  /** Also run by `npm test` (test/integration/conformance.test.ts). */
  ci?: boolean;
}
export interface Exclusion {
  name: string;
  /** Why it cannot pass on this cluster (simulated nodes: no container ever runs). */
  reason: string;
}
export interface ConformanceList {
  kubernetes: string;
  /** Ginkgo label filter that selects every test the list accounts for. */
  labelFilter: string;
  run: ListEntry[];
  excluded: Exclusion[];
}

export function loadList(file = LIST_FILE): ConformanceList {
  const list = YAML.parse(fs.readFileSync(file, 'utf8')) as ConformanceList;
  list.run ??= [];
  list.excluded ??= [];
  const seen = new Set<string>();
  for (const { name } of [...list.run, ...list.excluded]) {
    if (seen.has(name)) throw new Error(`${file}: "${name}" is listed twice`);
    seen.add(name);
  }
  return list;
}

export type SpecState = 'passed' | 'failed' | 'skipped' | 'pending' | 'panicked' | 'timedout' | 'interrupted' | 'aborted' | 'not run';

export interface SpecResult {
  name: string;
  state: SpecState;
  seconds: number;
  /** The failure's message and where, when it failed. */
  failure?: string;
}

export interface RunResult {
  /** What the tests talked to. */
  target: 'direct' | 'levee';
  server: string;
  seconds: number;
  specs: SpecResult[];
  counts: { passed: number; failed: number; skipped: number };
  /** Where the JUnit and JSON reports and the log are. */
  dir: string;
}

/** One regular expression per name, for ginkgo --focus: the whole name, nothing longer. */
export function focusFor(name: string): string {
  return `(^|\\s)${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`;
}

interface GinkgoSpecReport {
  ContainerHierarchyTexts: string[] | null;
  LeafNodeText: string;
  LeafNodeType: string;
  State: string;
  RunTime: number;
  Failure?: { Message?: string; Location?: { FileName?: string; LineNumber?: number } };
}

function readReport(file: string): SpecResult[] {
  const suites = JSON.parse(fs.readFileSync(file, 'utf8')) as Array<{ SpecReports: GinkgoSpecReport[] | null }>;
  const specs: SpecResult[] = [];
  for (const suite of suites) {
    for (const r of suite.SpecReports ?? []) {
      if (r.LeafNodeType !== 'It') continue;
      const result: SpecResult = {
        name: [...(r.ContainerHierarchyTexts ?? []), r.LeafNodeText].join(' '),
        state: r.State as SpecState,
        seconds: Math.round(r.RunTime / 1e7) / 100,
      };
      if (r.Failure?.Message) {
        const where = r.Failure.Location?.FileName ? ` (${r.Failure.Location.FileName.replace(/^.*k8s\.io\/kubernetes@[^/]+\//, '')}:${r.Failure.Location.LineNumber})` : '';
        result.failure = `${r.Failure.Message.trim().split('\n').slice(0, 6).join('\n')}${where}`;
      }
      specs.push(result);
    }
  }
  return specs;
}

/** Every spec the label filter selects, by a dry run of e2e.test (seconds). */
export async function selectedSpecs(labelFilter: string, kubeconfig: string): Promise<string[]> {
  const { e2eTest } = await ensureConformanceBinaries();
  const dir = fs.mkdtempSync(path.join(fs.realpathSync('/tmp'), 'levee-conformance-'));
  try {
    const report = path.join(dir, 'dry.json');
    await exec(e2eTest, [`--kubeconfig=${kubeconfig}`, '--provider=skeleton', '--ginkgo.dry-run', '--ginkgo.no-color', '--ginkgo.silence-skips', `--ginkgo.label-filter=${labelFilter}`, `--ginkgo.json-report=${report}`], path.join(dir, 'dry.log'));
    return readReport(report)
      .filter((s) => s.state !== 'skipped')
      .map((s) => s.name)
      .sort();
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Names the list does not account for (a new release's tests) and names it lists that the
 * release does not have (renamed or removed): both must be curated before the list is run.
 */
export function unaccounted(list: ConformanceList, selected: string[]): { missing: string[]; unknown: string[] } {
  const listed = new Set([...list.run, ...list.excluded].map((e) => e.name));
  const exists = new Set(selected);
  return { missing: selected.filter((n) => !listed.has(n)), unknown: [...listed].filter((n) => !exists.has(n)) };
}

export interface RunOptions {
  names: string[];
  target: 'direct' | 'levee';
  /** Kubeconfig of the cluster admin, pointing at the apiserver or at a Levee. */
  kubeconfig: string;
  server: string;
  dir: string;
  /** Ginkgo processes; specs marked Serial run alone at the end, on the first. */
  procs: number;
  /** The whole run's limit (ginkgo --timeout). */
  timeout?: string;
  /** Each line of e2e.test's output, for a live view. */
  onLine?: (line: string) => void;
}

/** Runs the named specs with ginkgo's CLI over e2e.test and reads its JSON report. */
export async function runSpecs(opts: RunOptions): Promise<RunResult> {
  const { e2eTest, ginkgo } = await ensureConformanceBinaries();
  fs.rmSync(opts.dir, { recursive: true, force: true });
  fs.mkdirSync(opts.dir, { recursive: true });
  const started = Date.now();
  const args = [
    ...(opts.procs > 1 ? ['-p', `--procs=${opts.procs}`] : []),
    '--no-color',
    '--silence-skips',
    `--timeout=${opts.timeout ?? '2h'}`,
    `--output-dir=${opts.dir}`,
    '--json-report=report.json',
    '--junit-report=junit.xml',
    ...opts.names.map((n) => `--focus=${focusFor(n)}`),
    e2eTest,
    '--',
    '--provider=skeleton',
    `--kubeconfig=${opts.kubeconfig}`,
    `--report-dir=${path.join(opts.dir, 'e2e')}`,
    // The run's own namespaces are deleted by the tests; nothing else of the cluster is touched.
    '--delete-namespace-on-failure=true',
  ];
  const code = await exec(ginkgo, args, path.join(opts.dir, 'e2e.log'), opts.onLine).catch((err: Error) => err);
  const reportFile = path.join(opts.dir, 'report.json');
  if (!fs.existsSync(reportFile)) throw new Error(`ginkgo wrote no report (${String(code)}); see ${path.join(opts.dir, 'e2e.log')}`);
  const byName = new Map(readReport(reportFile).map((s) => [s.name, s]));
  const specs = opts.names.map((name) => byName.get(name) ?? { name, state: 'not run' as const, seconds: 0 });
  const counts = { passed: 0, failed: 0, skipped: 0 };
  for (const s of specs) {
    if (s.state === 'passed') counts.passed++;
    else if (s.state === 'skipped' || s.state === 'pending') counts.skipped++;
    else counts.failed++;
  }
  return { target: opts.target, server: opts.server, seconds: Math.round((Date.now() - started) / 1000), specs, counts, dir: opts.dir };
}

/**
 * A Levee for the run, in front of the test environment's apiserver and configured as the control
 * plane's (a central gateway: TLS with the test CA's certificate, client certificates, service
 * account tokens verified locally, RBAC evaluated locally), and a kubeconfig that reaches the
 * cluster through it as the admin.
 */
export async function startRunLevee(env: TestEnv, dir: string): Promise<{ levee: LeveeProcess; kubeconfig: string; log: string }> {
  fs.mkdirSync(dir, { recursive: true });
  const log = path.join(dir, 'levee.log');
  const levee = await startLevee({
    logFile: log,
    kubeconfig: env.kubeconfig,
    tls: env.leveeServing,
    extra: ['--client-ca-file', env.caFile, '--authentication-local-serviceaccount-tokens', '--authorization-local-rbac'],
  });
  const kubeconfig = path.join(dir, 'levee.kubeconfig');
  fs.writeFileSync(kubeconfig, adminKubeconfig(env, levee.url.origin), { mode: 0o600 });
  return { levee, kubeconfig, log };
}

/** The admin's kubeconfig for `server` (the apiserver or a Levee), with the test CA. */
export function adminKubeconfig(env: TestEnv, server: string): string {
  return `${JSON.stringify(
    {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'levee-test', cluster: { server, 'certificate-authority': env.caFile } }],
      users: [{ name: 'admin', user: { token: env.tokens.admin } }],
      contexts: [{ name: 'levee-test', context: { cluster: 'levee-test', user: 'admin' } }],
      'current-context': 'levee-test',
    },
    null,
    2,
  )}\n`;
}

/** Specs whose outcome differs between the two runs (a pass on one side only, above all). */
export function differences(direct: RunResult, levee: RunResult): Array<{ name: string; direct: SpecState; levee: SpecState }> {
  const other = new Map(levee.specs.map((s) => [s.name, s.state]));
  return direct.specs
    .map((s) => ({ name: s.name, direct: s.state, levee: other.get(s.name) ?? ('not run' as const) }))
    .filter((d) => (d.direct === 'passed') !== (d.levee === 'passed') || (d.direct === 'skipped') !== (d.levee === 'skipped'));
}

/** Runs a program to completion, its output to `log` (and line by line to onLine); rejects on a non-zero exit. */
function exec(cmd: string, args: string[], log: string, onLine?: (line: string) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const out = fs.openSync(log, 'a');
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let pending = '';
    const write = (chunk: Buffer): void => {
      fs.writeSync(out, chunk);
      if (!onLine) return;
      pending += chunk.toString('utf8');
      const lines = pending.split('\n');
      pending = lines.pop()!;
      for (const line of lines) onLine(line);
    };
    child.stdout.on('data', write);
    child.stderr.on('data', write);
    child.on('error', (err) => {
      fs.closeSync(out);
      reject(err);
    });
    child.on('close', (code, signal) => {
      fs.closeSync(out);
      if (code === 0) resolve();
      else reject(new Error(`${path.basename(cmd)} exited with ${code ?? signal}`));
    });
  });
}
