// The configuration file on a running Levee: its rules refuse what they name with the apiserver's
// kind of answer, and a change to the file applies new rules and flow-control limits without a
// restart (a broken change is refused and the running configuration kept).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, writeFileSync, renameSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { Agent, request } from 'undici';
import { readFileSync } from 'node:fs';
import { loadEnv, type TestEnv } from '../env/testenv.ts';
import { startLevee, type LeveeProcess } from '../support/levee.ts';
import { send, suffix } from '../support/http.ts';
import { createNamespace } from '../support/cluster.ts';
import { waitFor, waitReady } from '../support/wait.ts';
import { tempDir } from '../support/tempdir.ts';

let env: TestEnv;
let agent: Agent;
let levee: LeveeProcess;
const ns = `config-${suffix()}`;
const dir = tempDir('levee-config-');
const configFile = join(dir, 'levee.yaml');

function writeConfig(text: string): void {
  // As a ConfigMap volume updates: a new file moved into place.
  writeFileSync(`${configFile}.new`, text);
  renameSync(`${configFile}.new`, configFile);
}

const RULES = `apiVersion: levee.dev/v1alpha1
kind: Configuration
cache:
  resources: [configmaps]
flowControl:
  maxRequestsInflight: 50
rules:
  - name: admins-pass
    match: { groups: [system:masters] }
    action: allow
  - name: no-secrets
    match: { resources: [secrets] }
    action: deny
  - name: slow-down-bob
    match: { users: [bob] }
    action: reject
    retryAfterSeconds: 7
`;

async function get(path: string, token: string): Promise<{ status: number; body: string; retryAfter: string | undefined }> {
  const res = await request(levee.url.origin + path, { dispatcher: agent, headers: { authorization: `Bearer ${token}`, accept: 'application/json' } });
  return { status: res.statusCode, body: await res.body.text(), retryAfter: res.headers['retry-after'] as string | undefined };
}

before(async () => {
  env = loadEnv();
  agent = new Agent({ connect: { ca: readFileSync(env.caFile) }, allowH2: false });
  await createNamespace(env, agent, ns);
  writeConfig(RULES);
  levee = await startLevee({ kubeconfig: env.kubeconfig, tls: env.leveeServing, extra: ['--config', configFile] });
});

after(async () => {
  await levee?.stop();
  await send('DELETE', `${env.server}/api/v1/namespaces/${ns}`, agent, env.tokens.admin);
  await agent.close();
});

test('rules deny with a Forbidden Status, reject with 429 and their Retry-After, and allow ahead of both', async () => {
  const denied = await get(`/api/v1/namespaces/${ns}/secrets`, env.tokens.alice);
  assert.equal(denied.status, 403);
  assert.deepEqual(JSON.parse(denied.body), {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message: `secrets is forbidden: User "alice" cannot list resource "secrets" in API group "" in the namespace "${ns}": denied by Levee rule "no-secrets"`,
    reason: 'Forbidden',
    details: { kind: 'secrets' },
    code: 403,
  });
  const rejected = await get(`/api/v1/namespaces/${ns}/configmaps`, env.tokens.bob);
  assert.equal(rejected.status, 429);
  assert.equal(rejected.retryAfter, '7');
  assert.equal((JSON.parse(rejected.body) as { reason: string }).reason, 'TooManyRequests');
  assert.equal((await get(`/api/v1/namespaces/${ns}/secrets`, env.tokens.admin)).status, 200, 'admins-pass comes first');
});

test('a changed file applies new rules and limits without a restart; a broken one is refused', async () => {
  const seats = async (): Promise<number> => {
    const m = /levee_flowcontrol_seats\{class="read",stage="requests"\} (\d+)/.exec((await get('/metrics', env.tokens.admin)).body);
    return Number(m?.[1]);
  };
  assert.equal(await seats(), 50);
  writeConfig(RULES.replace('maxRequestsInflight: 50', 'maxRequestsInflight: 60').replace(/ {2}- name: no-secrets[\s\S]*$/, ''));
  const deadline = Date.now() + 15_000;
  while ((await seats()) !== 60) {
    assert.ok(Date.now() < deadline, 'the new limit never applied');
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.equal((await get(`/api/v1/namespaces/${ns}/secrets`, env.tokens.alice)).status, 403, 'now the apiserver refuses alice itself');
  assert.doesNotMatch((await get(`/api/v1/namespaces/${ns}/secrets`, env.tokens.alice)).body, /Levee rule/);
  assert.equal((await get(`/api/v1/namespaces/${ns}/configmaps`, env.tokens.bob)).status, 403, 'bob is no longer rejected by a rule');
  writeConfig('flowControl: { maxRequestsInflight: lots }\n');
  const logged = Date.now() + 15_000;
  while (!/configuration changed but is not valid; keeping the running one/.test(levee.output())) {
    assert.ok(Date.now() < logged, 'the broken file was not reported');
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.match(levee.output(), /flowControl\.maxRequestsInflight/);
  assert.equal(await seats(), 60);
});

/** A Levee of its own with `config`, for a test that needs other rules or limits. */
async function withLevee(config: string, body: (l: LeveeProcess) => Promise<void>): Promise<void> {
  const file = join(tempDir('levee-config-'), 'levee.yaml');
  writeFileSync(file, config);
  const l = await startLevee({ kubeconfig: env.kubeconfig, tls: env.leveeServing, extra: ['--config', file] });
  try {
    await body(l);
  } finally {
    await l.stop();
  }
}

async function ask(l: LeveeProcess, path: string, token: string): Promise<{ status: number; body: string }> {
  const res = await request(l.url.origin + path, { dispatcher: agent, headers: { authorization: `Bearer ${token}`, accept: 'application/json' } });
  return { status: res.statusCode, body: await res.body.text() };
}

async function tokenReviews(l: LeveeProcess): Promise<number> {
  const res = await request(`${l.url.origin}/metrics`, { dispatcher: agent });
  return Number(/^levee_token_reviews_total (\d+)/m.exec(await res.body.text())?.[1]);
}

test('`list` in a rule also names an informer\'s start (a watch that begins with the state); a resumed watch is not a list', async () => {
  await withLevee(
    `cache: { resources: [configmaps] }
rules:
  - name: no-secret-lists
    match: { resources: [secrets], verbs: [list] }
    action: deny
`,
    async (l) => {
      const byRule = (a: { status: number; body: string }): boolean => a.status === 403 && a.body.includes('denied by Levee rule \\"no-secret-lists\\"');
      const base = `/api/v1/namespaces/${ns}/secrets`;
      assert.ok(byRule(await ask(l, base, env.tokens.admin)), 'LIST');
      // client-go 1.35+ informers start with a consistent watch-list; older ones watch from 0.
      assert.ok(byRule(await ask(l, `${base}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1`, env.tokens.admin)), 'watch-list');
      assert.ok(byRule(await ask(l, `${base}?watch=true&resourceVersion=0&timeoutSeconds=1`, env.tokens.admin)), 'legacy watch from 0');
      // An informer resuming from a resourceVersion follows changes only: the rule does not name it.
      const listed = await send('POST', `${env.server}/api/v1/namespaces/${ns}/configmaps`, agent, env.tokens.admin, { metadata: { name: `rv-${suffix()}` } });
      const rv = (JSON.parse(listed.body) as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
      const resumed = await ask(l, `${base}?watch=true&resourceVersion=${rv}&timeoutSeconds=1`, env.tokens.admin);
      assert.equal(resumed.status, 200, resumed.body);
      assert.equal((await ask(l, `${base}/nothing`, env.tokens.admin)).status, 404, 'a GET is not a list');
    },
  );
});

test('a forwarded request\'s token is not reviewed by Levee unless a rule names users; allow does not exempt from flow control', async () => {
  // One thread: each thread reviews a token it has not seen, and a connection may land on either
  // (README, "Workers").
  await withLevee(`cache: { resources: [configmaps] }\nworkers: 1\n`, async (l) => {
    for (let i = 0; i < 5; i++) assert.equal((await ask(l, `/api/v1/namespaces/${ns}/secrets`, env.tokens.admin)).status, 200);
    assert.equal(await tokenReviews(l), 0, 'forwarded requests are the apiserver\'s to authenticate');
    // An answer from the cache is Levee's to authorize: the token is reviewed then (once, then cached).
    for (let i = 0; i < 3; i++) assert.equal((await ask(l, `/api/v1/namespaces/${ns}/configmaps?resourceVersion=0`, env.tokens.alice)).status, 403);
    assert.equal(await tokenReviews(l), 1);
  });
  await withLevee(
    `cache: { resources: [configmaps] }
workers: 1
flowControl: { maxRequestsInflight: 1, queueLength: 1, queueWait: 2s }
rules:
  - name: alice-passes
    match: { users: [alice] }
    action: allow
`,
    async (l) => {
      // The rule names a user, so each client's token is reviewed once to match it.
      const burst = await Promise.all(Array.from({ length: 40 }, () => ask(l, `/api/v1/namespaces/${ns}/secrets`, env.tokens.alice)));
      const codes = burst.map((a) => a.status);
      // 403: forwarded, and the apiserver's answer (alice may not list secrets there).
      assert.ok(codes.every((c) => c === 403 || c === 429), codes.join(','));
      assert.ok(codes.includes(429), `allow exempted alice from flow control: ${codes.join(',')}`);
      assert.equal(await tokenReviews(l), 1);
    },
  );
});

test('every example in config/ starts against the real apiserver, syncs, serves from its cache and exits cleanly', async () => {
  const dir = resolve(import.meta.dirname, '../../config');
  const examples = readdirSync(dir).filter((f) => f.endsWith('.yaml'));
  assert.ok(examples.length >= 3, examples.join(','));
  for (const f of examples) {
    const file = join(dir, f);
    const config = parseYaml(readFileSync(file, 'utf8')) as { tls?: { clientCAFile?: string }; authentication?: { mode?: string } };
    // Flags override the file: this cluster's kubeconfig and certificates, a free loopback port.
    const extra = ['--config', file, '--listen', '127.0.0.1:0'];
    if (config.tls?.clientCAFile) extra.push('--client-ca-file', env.caFile);
    const l = await startLevee({ kubeconfig: env.kubeconfig, tls: config.tls ? env.leveeServing : undefined, extra });
    try {
      await waitReady(l, agent, 60_000);
      // A trusted loopback client needs no credentials; elsewhere an admin's token.
      const token = config.authentication?.mode === 'trust-loopback' ? undefined : env.tokens.admin;
      const res = await request(`${l.url.origin}/api/v1/namespaces/${ns}/pods?resourceVersion=0`, {
        dispatcher: l.url.protocol === 'https:' ? agent : undefined,
        headers: { accept: 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      });
      const body = await res.body.text();
      assert.equal(res.statusCode, 200, `${f}: ${body}`);
      assert.equal((JSON.parse(body) as { kind: string }).kind, 'PodList', f);
      // The request's log line (written once the answer is sent) says where it was answered.
      await waitFor(`${f}: the request's log line`, () => /"path":"[^"]*\/pods","[^\n]*"source":"/.test(l.output()));
      assert.match(l.output(), /"path":"[^"]*\/pods","[^\n]*"source":"cache"/, `${f}: the read was not answered from the cache`);
    } finally {
      l.kill('SIGTERM');
      assert.deepEqual(await l.exited, { code: 0, signal: null }, `${f}:\n${l.output()}`);
    }
  }
});
