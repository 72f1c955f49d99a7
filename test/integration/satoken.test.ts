// Service-account tokens verified by Levee itself must get exactly the apiserver's verdict and
// user: every token here goes to a TokenReview of the real apiserver and to Levee's verifier
// (with Levee's own credentials, discovery and cache of service accounts and pods). Whatever Levee
// accepts, the apiserver accepts as the same user; whatever Levee cannot prove it leaves to the
// apiserver, for the reason the test expects. Tokens the apiserver would never issue (expired,
// not yet valid, within the leeway, duplicate claims) are signed here with the test environment's
// service-account signing key, so the apiserver judges them too.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { createPrivateKey, sign } from 'node:crypto';
import type { Agent } from 'undici';
import { loadEnv, type TestEnv } from '../env/testenv.ts';
import { startLevee, writeKubeconfig, type LeveeProcess } from '../support/levee.ts';
import { kubectl } from '../support/kubectl.ts';
import { agentFor, get, send, suffix } from '../support/http.ts';
import { createNamespace, createNodes, deleteNodes, NO_SCHEDULER } from '../support/cluster.ts';
import { ServiceAccountTokenVerifier, type FallbackReason, type LocalVerdict } from '../../src/auth/satoken.ts';
import { withAuthenticatedGroup, type UserInfo } from '../../src/api/user.ts';
import { Cache } from '../../src/cache/cache.ts';
import { createLogger } from '../../src/log/logger.ts';
import { GatewayMetrics } from '../../src/metrics/metrics.ts';
import { getJson } from '../../src/upstream/client.ts';
import { loadUpstream } from '../../src/upstream/credentials.ts';
import { UpstreamPools } from '../../src/upstream/pools.ts';

const run = suffix();
const ns = `satoken-${run}`;
const node = `satoken-node-${run}`;
const RBAC_MANIFEST = resolve(import.meta.dirname, '../../deploy/rbac.yaml');

let env: TestEnv;
let agent: Agent;
let leveeKubeconfig: string;
let pools: UpstreamPools;
let cache: Cache;
let verifier: ServiceAccountTokenVerifier;
let levee: LeveeProcess | undefined;

interface Review {
  authenticated: boolean;
  user?: UserInfo;
  audiences?: string[];
  error?: string;
}

async function tokenReview(token: string): Promise<Review> {
  const res = await send('POST', `${env.server}/apis/authentication.k8s.io/v1/tokenreviews`, agent, env.tokens.admin, {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenReview',
    spec: { token },
  });
  assert.equal(res.status, 201, res.body);
  const s = (JSON.parse(res.body) as { status: Review & { user?: Partial<UserInfo> } }).status;
  if (!s.authenticated) return { authenticated: false, error: s.error ?? '' };
  const u = s.user!;
  return {
    authenticated: true,
    user: withAuthenticatedGroup({ username: u.username, uid: u.uid ?? '', groups: u.groups ?? [], extra: u.extra ?? {} }),
    audiences: s.audiences ?? [],
  };
}

async function create(path: string, body: unknown): Promise<{ metadata: { name: string; uid: string } }> {
  const res = await send('POST', env.server + path, agent, env.tokens.admin, body);
  assert.equal(res.status, 201, `${path}: ${res.body}`);
  return JSON.parse(res.body) as { metadata: { name: string; uid: string } };
}

async function tokenFor(sa: string, spec: Record<string, unknown> = {}): Promise<string> {
  const res = await send('POST', `${env.server}/api/v1/namespaces/${ns}/serviceaccounts/${sa}/token`, agent, env.tokens.admin, {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: { expirationSeconds: 3600, ...spec },
  });
  assert.equal(res.status, 201, res.body);
  return (JSON.parse(res.body) as { status: { token: string } }).status.token;
}

function podRef(p: { metadata: { name: string; uid: string } }): Record<string, unknown> {
  return { boundObjectRef: { kind: 'Pod', apiVersion: 'v1', name: p.metadata.name, uid: p.metadata.uid } };
}

/** A token as the apiserver would sign it, from another's header and claims changed by `edit`, or from raw JSON. */
function resign(token: string, edit: (claims: Record<string, unknown>) => Record<string, unknown> | string): string {
  const [header, payload] = token.split('.');
  const claims = JSON.parse(Buffer.from(payload!, 'base64url').toString()) as Record<string, unknown>;
  const edited = edit(claims);
  const body = Buffer.from(typeof edited === 'string' ? edited : JSON.stringify(edited)).toString('base64url');
  const key = createPrivateKey(readFileSync(join(dirname(env.caFile), 'sa.key')));
  return `${header}.${body}.${sign('sha256', Buffer.from(`${header}.${body}`), key).toString('base64url')}`;
}

const nowSeconds = (): number => Math.floor(Date.now() / 1000);

async function waitFor(what: string, check: () => Promise<boolean> | boolean, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * The apiserver remembers a token it accepted for 10 s (its token authenticator's success cache):
 * until then it still accepts a token whose object is gone, and so does Levee, which leaves such a
 * token to it.
 */
async function apiserverRefuses(token: string): Promise<void> {
  await waitFor('the apiserver to refuse the token', async () => !(await tokenReview(token)).authenticated, 20_000);
}

/**
 * The property under test: a token Levee verifies is one the apiserver accepts as the same user; a
 * token it leaves to the apiserver is left for the expected reason; the apiserver's own verdict is
 * the expected one.
 */
async function judge(label: string, token: string, expected: { apiserver: boolean; local: 'verified' | FallbackReason }): Promise<{ local: LocalVerdict; review: Review }> {
  const [review, local] = [await tokenReview(token), await verifier.verify(token)];
  assert.equal(review.authenticated, expected.apiserver, `${label}: apiserver said ${JSON.stringify(review)}`);
  if (local.verified) {
    assert.ok(review.authenticated, `${label}: Levee accepted a token the apiserver refuses (${review.error})`);
    assert.deepEqual(local.user, review.user, `${label}: Levee's user differs from the TokenReview's`);
  }
  assert.equal(local.verified ? 'verified' : local.reason, expected.local, `${label}: Levee's verdict`);
  return { local, review };
}

before(async () => {
  env = loadEnv();
  agent = agentFor(env.caFile);
  const applied = await kubectl(env.kubectl, env.kubeconfig, ['apply', '-f', RBAC_MANIFEST]);
  assert.equal(applied.code, 0, applied.stderr);
  const leveeToken = (
    JSON.parse(
      (
        await send('POST', `${env.server}/api/v1/namespaces/levee/serviceaccounts/levee/token`, agent, env.tokens.admin, {
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenRequest',
          spec: { expirationSeconds: 3600 },
        })
      ).body,
    ) as { status: { token: string } }
  ).status.token;
  leveeKubeconfig = writeKubeconfig(env.server, env.caFile, leveeToken);
  await createNamespace(env, agent, ns);
  await createNodes(env, agent, [node]);
  for (const sa of ['agent', 'doomed', 'agent-2', 'agent-3', 'agent-4']) await create(`/api/v1/namespaces/${ns}/serviceaccounts`, { metadata: { name: sa } });
  // The agents may list configmaps in the namespace, so Levee answers them from its cache.
  await create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`, {
    metadata: { name: 'configmap-reader' },
    rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'watch'] }],
  });
  await create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
    metadata: { name: 'agents-read' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'configmap-reader' },
    subjects: [{ kind: 'Group', name: `system:serviceaccounts:${ns}`, apiGroup: 'rbac.authorization.k8s.io' }],
  });

  // Levee's verifier, with Levee's credentials, against the real apiserver and Levee's cache.
  pools = new UpstreamPools(loadUpstream({ kind: 'kubeconfig', path: leveeKubeconfig }));
  cache = new Cache(pools, ['serviceaccounts', 'pods'], createLogger('silent'), new GatewayMetrics().cache);
  cache.start();
  verifier = new ServiceAccountTokenVerifier({ fetch: (path, accept) => getJson(pools, path, undefined, accept), objects: (r) => cache.lookup('', r)?.store });
  verifier.start();
  await waitFor('cache synced', () => cache.synced);
});

after(async () => {
  verifier?.stop();
  await levee?.stop();
  await cache?.stop();
  await pools?.close();
  await send('DELETE', `${env.server}/api/v1/namespaces/${ns}`, agent, env.tokens.admin);
  await deleteNodes(env, agent, [node]);
  await agent?.close();
});

const pod = (name: string, onNode: boolean): unknown => ({
  metadata: { name },
  // A pod on no node stays so: no scheduler of this name runs.
  spec: { serviceAccountName: 'agent', containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10' }], ...(onNode ? { nodeName: node } : { schedulerName: NO_SCHEDULER }) },
});

test("Levee's verdict and user for service-account tokens are the apiserver's TokenReview's", async () => {
  const plain = await tokenFor('agent');
  // Until a TokenReview has shown the apiserver's API audiences, no token is proven.
  const { review } = await judge('plain token, audiences not learned yet', plain, { apiserver: true, local: 'audience-unknown' });
  assert.ok(review.audiences!.length > 0, 'the TokenReview names the audiences');
  verifier.learnAudiences(review.audiences!);
  await judge('plain token', plain, { apiserver: true, local: 'verified' });

  const onNode = await create(`/api/v1/namespaces/${ns}/pods`, pod('on-node', true));
  const bound = await judge('pod-bound token (pod on a node)', await tokenFor('agent', podRef(onNode)), { apiserver: true, local: 'verified' });
  assert.ok(bound.local.verified);
  const extra = bound.local.user.extra;
  assert.deepEqual(Object.keys(extra).sort(), [
    'authentication.kubernetes.io/credential-id',
    'authentication.kubernetes.io/node-name',
    'authentication.kubernetes.io/node-uid',
    'authentication.kubernetes.io/pod-name',
    'authentication.kubernetes.io/pod-uid',
  ]);
  const loose = await create(`/api/v1/namespaces/${ns}/pods`, pod('loose', false));
  await judge('pod-bound token (pod on no node)', await tokenFor('agent', podRef(loose)), { apiserver: true, local: 'verified' });

  const issuer = (JSON.parse(Buffer.from(plain.split('.')[1]!, 'base64url').toString()) as { iss: string }).iss;
  await judge('token for another audience', await tokenFor('agent', { audiences: ['somewhere-else'] }), { apiserver: false, local: 'audience' });
  await judge('token for the API and another audience', await tokenFor('agent', { audiences: ['somewhere-else', issuer] }), { apiserver: true, local: 'verified' });
  await judge('shortest-lived token the apiserver issues', await tokenFor('agent', { expirationSeconds: 600 }), { apiserver: true, local: 'verified' });

  // Time, as go-jose's one-minute leeway has it.
  const at = (exp: number, nbf?: number) => (c: Record<string, unknown>) => ({ ...c, exp, iat: Math.min(exp, nowSeconds()) - 600, nbf: nbf ?? Math.min(exp, nowSeconds()) - 600 });
  await judge('expired two minutes ago', resign(plain, at(nowSeconds() - 120)), { apiserver: false, local: 'expired' });
  await judge('expired within the leeway', resign(plain, at(nowSeconds() - 20)), { apiserver: true, local: 'verified' });
  await judge('valid from two minutes on', resign(plain, at(nowSeconds() + 3600, nowSeconds() + 120)), { apiserver: false, local: 'not-yet-valid' });
  await judge('valid from within the leeway', resign(plain, at(nowSeconds() + 3600, nowSeconds() + 20)), { apiserver: true, local: 'verified' });
  await judge('no exp claim', resign(plain, ({ exp: _, ...c }) => c), { apiserver: true, local: 'claims' });
  await judge('no audience (legacy)', resign(plain, ({ aud: _, ...c }) => c), { apiserver: true, local: 'legacy' });
  await judge('another issuer', resign(plain, (c) => ({ ...c, iss: 'https://elsewhere' })), { apiserver: false, local: 'issuer' });
  await judge('duplicate claims', resign(plain, (c) => JSON.stringify(c).replace('{', '{"exp":1,')), { apiserver: false, local: 'not-a-jwt' });
  await judge('service account UID of another', resign(plain, (c) => {
    const k = c['kubernetes.io'] as { serviceaccount: { uid: string } };
    return { ...c, 'kubernetes.io': { ...k, serviceaccount: { ...k.serviceaccount, uid: '00000000-0000-0000-0000-000000000000' } } };
  }), { apiserver: false, local: 'service-account' });

  const [h, p, s] = plain.split('.');
  const flipped = `${h}.${p}.${s!.slice(0, 10)}${s![10] === 'A' ? 'B' : 'A'}${s!.slice(11)}`;
  await judge('tampered signature', flipped, { apiserver: false, local: 'signature' });
  await judge('tampered claims', `${h}.${Buffer.from(Buffer.from(p!, 'base64url').toString().replace('"agent"', '"agent-2"')).toString('base64url')}.${s}`, { apiserver: false, local: 'signature' });
  await judge('a static token', env.tokens.alice, { apiserver: true, local: 'not-a-jwt' });

  // Bound to objects Levee does not check itself: the apiserver decides.
  const secret = await create(`/api/v1/namespaces/${ns}/secrets`, { metadata: { name: 'bound' } });
  await judge('secret-bound token', await tokenFor('agent', { boundObjectRef: { kind: 'Secret', apiVersion: 'v1', name: 'bound', uid: secret.metadata.uid } }), { apiserver: true, local: 'bound-object-kind' });
  const n = JSON.parse((await get(`${env.server}/api/v1/nodes/${node}`, agent, env.tokens.admin)).body) as { metadata: { uid: string } };
  await judge('node-bound token', await tokenFor('agent', { boundObjectRef: { kind: 'Node', apiVersion: 'v1', name: node, uid: n.metadata.uid } }), { apiserver: true, local: 'bound-object-kind' });

  // A deleted service account ends its tokens; Levee sees it through its cache.
  const doomed = await tokenFor('doomed');
  await judge('token of a service account about to be deleted', doomed, { apiserver: true, local: 'verified' });
  assert.equal((await send('DELETE', `${env.server}/api/v1/namespaces/${ns}/serviceaccounts/doomed`, agent, env.tokens.admin)).status, 200);
  await waitFor('the deletion in the cache', async () => !(await verifier.verify(doomed)).verified);
  await apiserverRefuses(doomed);
  await judge('token of a deleted service account', doomed, { apiserver: false, local: 'service-account' });

  // A pod deleted at once ends its tokens; a pod in graceful deletion keeps them until a minute
  // past its deletion timestamp.
  const gone = await tokenFor('agent', podRef(loose));
  assert.equal((await send('DELETE', `${env.server}/api/v1/namespaces/${ns}/pods/loose`, agent, env.tokens.admin)).status, 200);
  await waitFor('the deletion in the cache', async () => !(await verifier.verify(gone)).verified);
  await apiserverRefuses(gone);
  await judge('token bound to a deleted pod', gone, { apiserver: false, local: 'pod' });
  const draining = await tokenFor('agent', podRef(onNode));
  const del = await send('DELETE', `${env.server}/api/v1/namespaces/${ns}/pods/on-node`, agent, env.tokens.admin, { kind: 'DeleteOptions', apiVersion: 'v1', gracePeriodSeconds: 30 });
  assert.equal(del.status, 200, del.body);
  await judge('token bound to a pod in graceful deletion', draining, { apiserver: true, local: 'verified' });
  const recreated = await tokenFor('agent', podRef(await create(`/api/v1/namespaces/${ns}/pods`, pod('loose', false))));
  await waitFor('the new pod in the cache', async () => (await verifier.verify(recreated)).verified);
  await judge('token bound to the earlier pod of the same name', gone, { apiserver: false, local: 'pod' });
});

test('through Levee, service-account tokens cost one TokenReview in all; refused ones get the apiserver\'s 401', async () => {
  const l = await startLevee({
    kubeconfig: leveeKubeconfig,
    tls: env.leveeServing,
    // One thread: each thread learns the audiences from a review of its own (README, "Workers").
    extra: ['--workers', '1', '--cache', 'configmaps,pods', '--authentication-local-serviceaccount-tokens', '--authorization-local-rbac'],
  });
  levee = l;
  await waitFor('levee ready', async () => (await get(`${l.url.origin}/readyz`, agent)).status === 200, 30_000);
  const path = `/api/v1/namespaces/${ns}/configmaps?resourceVersion=0`;
  const tokens = [await tokenFor('agent'), await tokenFor('agent-2'), await tokenFor('agent-3'), await tokenFor('agent-4')];
  // Agents restarting together: the first token's review teaches the audiences, the others wait for it.
  const answers = await Promise.all(tokens.map((t) => get(l.url.origin + path, agent, t)));
  for (const a of answers) assert.equal(a.status, 200, a.body);
  for (const t of tokens) assert.equal((await get(l.url.origin + path, agent, t)).status, 200);

  const [h, p, s] = tokens[0]!.split('.');
  const refused = [
    `${h}.${p}.${s!.slice(0, -4)}AAAA`,
    resign(tokens[0]!, (c) => ({ ...c, exp: nowSeconds() - 120 })),
    await tokenFor('agent', { audiences: ['somewhere-else'] }),
  ];
  for (const t of refused) {
    const [direct, through] = [await get(env.server + path, agent, t), await get(l.url.origin + path, agent, t)];
    assert.equal(direct.status, 401);
    assert.equal(through.status, direct.status);
    assert.deepEqual(JSON.parse(through.body), JSON.parse(direct.body));
  }

  const metrics = (await get(`${l.url.origin}/metrics`, agent, env.tokens.admin)).body;
  const value = (line: RegExp): number => Number(line.exec(metrics)?.[1] ?? NaN);
  assert.equal(value(/^levee_token_reviews_total (\d+)$/m), 1 + refused.length, metrics);
  // The first token is reviewed (it teaches the audiences) and is known from that review after; the
  // others are verified locally each time they come.
  assert.equal(value(/^levee_serviceaccount_tokens_verified_locally_total (\d+)$/m), 2 * (tokens.length - 1));
  assert.equal(value(/^levee_serviceaccount_tokens_fallback_total\{reason="signature"\} (\d+)$/m), 1);
  assert.equal(value(/^levee_serviceaccount_tokens_fallback_total\{reason="expired"\} (\d+)$/m), 1);
  assert.equal(value(/^levee_serviceaccount_tokens_fallback_total\{reason="audience"\} (\d+)$/m), 1);
  assert.ok(!l.output().includes(tokens[0]!.split('.')[2]!), 'a token reached the logs');
});
