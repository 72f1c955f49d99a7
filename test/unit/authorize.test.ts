// What Levee asks the apiserver when it authorizes a cached answer: the request's selectors travel
// in the SubjectAccessReview as the request's own text, decisions are cached per selector, the
// question for every name keeps them, and watches are re-checked with them.
import { mock, test } from 'node:test';
import assert from 'node:assert/strict';
import { decisionKey, subjectAccessReviewSpec, SubjectAccessReviewer, UndecidedError } from '../../src/auth/authorize.ts';
import type { ResourceAttributes } from '../../src/api/attributes.ts';
import type { AccessGuard, Admission } from '../../src/auth/guard.ts';
import type { Credential } from '../../src/auth/authenticate.ts';
import { WatchReauthorizer } from '../../src/auth/watchrecheck.ts';
import type { UserInfo } from '../../src/api/user.ts';
import type { UpstreamPools } from '../../src/upstream/pools.ts';

const node: UserInfo = { username: 'system:node:node-a', uid: '', groups: ['system:nodes', 'system:authenticated'], extra: {} };
const listPods: ResourceAttributes = { verb: 'list', group: '', version: 'v1', resource: 'pods', namespace: '', name: '' };

/** A stand-in for Levee's upstream connection: records each review posted, answers with `decide`. */
type LocalRbac = NonNullable<ConstructorParameters<typeof SubjectAccessReviewer>[1]['localRbac']>;
function reviewer(
  decide: (spec: Record<string, unknown>) => Record<string, unknown>,
  localRbac?: LocalRbac,
): { reviewer: SubjectAccessReviewer; specs: Array<Record<string, unknown>> } {
  const specs: Array<Record<string, unknown>> = [];
  const pools = {
    upstream: { pathPrefix: '', ownCredentials: () => Promise.resolve({}) },
    get: () => ({
      request: (opts: { path: string; body: string }) => {
        assert.equal(opts.path, '/apis/authorization.k8s.io/v1/subjectaccessreviews');
        const review = JSON.parse(opts.body) as { spec: Record<string, unknown> };
        specs.push(review.spec);
        const answer = JSON.stringify({ ...review, status: decide(review.spec) });
        return Promise.resolve({ statusCode: 201, body: { text: () => Promise.resolve(answer) } });
      },
    }),
  } as unknown as UpstreamPools;
  return { reviewer: new SubjectAccessReviewer(pools, { allowedTtlMs: 60_000, deniedTtlMs: 60_000, localRbac }), specs };
}

/** The Node authorizer's rule for pods: list and watch only with the node's own spec.nodeName. */
function nodeAuthorizer(spec: Record<string, unknown>): Record<string, unknown> {
  const ra = spec.resourceAttributes as { verb: string; name?: string; fieldSelector?: { rawSelector?: string } };
  if (ra.fieldSelector?.rawSelector?.split(',').includes('spec.nodeName=node-a')) return { allowed: true };
  if (ra.name === 'pod-a') return { allowed: true };
  return { allowed: false, reason: 'node: can only list/watch pods with spec.nodeName field selector' };
}

test('selectors go into the review as rawSelector, the request\'s own text; empty ones are left out', () => {
  const spec = subjectAccessReviewSpec(node, { ...listPods, verb: 'watch', fieldSelector: 'spec.nodeName=node-a,status.phase!=Failed', labelSelector: 'app in (web),tier>1' });
  assert.deepEqual(spec, {
    user: 'system:node:node-a',
    groups: ['system:nodes', 'system:authenticated'],
    resourceAttributes: {
      verb: 'watch',
      group: '',
      version: 'v1',
      resource: 'pods',
      // Unparsed and unreordered: the apiserver parses it as its authorization filter parses the
      // request (a label "tier>1" has no form among `requirements`).
      fieldSelector: { rawSelector: 'spec.nodeName=node-a,status.phase!=Failed' },
      labelSelector: { rawSelector: 'app in (web),tier>1' },
    },
  });
  // The apiserver's validation refuses a selector with neither rawSelector nor requirements.
  const none = subjectAccessReviewSpec(node, { ...listPods, fieldSelector: '', labelSelector: '' }).resourceAttributes as Record<string, unknown>;
  assert.ok(!('fieldSelector' in none) && !('labelSelector' in none), JSON.stringify(none));
  assert.ok(!('fieldSelector' in (subjectAccessReviewSpec(node, listPods).resourceAttributes as Record<string, unknown>)));
});

test('the decision cache tells selectors apart, and no value runs into the next', () => {
  const own = decisionKey(node, { ...listPods, fieldSelector: 'spec.nodeName=node-a' });
  assert.notEqual(own, decisionKey(node, listPods));
  assert.notEqual(own, decisionKey(node, { ...listPods, fieldSelector: 'spec.nodeName=node-b' }));
  assert.notEqual(own, decisionKey(node, { ...listPods, labelSelector: 'spec.nodeName=node-a' }));
  assert.notEqual(decisionKey(node, { ...listPods, fieldSelector: 'a\u0000b', labelSelector: 'c' }), decisionKey(node, { ...listPods, fieldSelector: 'a', labelSelector: 'b\u0000c' }));
  // No selector and an empty one are the same question.
  assert.equal(decisionKey(node, listPods), decisionKey(node, { ...listPods, fieldSelector: '', labelSelector: '' }));
});

test('a node may list its own pods: each selector is its own review, cached on its own', async () => {
  const { reviewer: r, specs } = reviewer(nodeAuthorizer);
  assert.equal((await r.authorizeForName(node, { ...listPods, fieldSelector: 'spec.nodeName=node-a' })).allowed, true);
  const other = await r.authorizeForName(node, { ...listPods, fieldSelector: 'spec.nodeName=node-b' });
  assert.deepEqual(other, { allowed: false, reason: 'node: can only list/watch pods with spec.nodeName field selector' });
  assert.equal(specs.length, 3, 'the broad question (denied), then each selector');
  // The broad question as a request of its own is asked again: its denial refuses this client, so
  // it is kept as briefly as any denial, where as a hint before a narrower question it is kept long.
  assert.equal((await r.authorizeForName(node, listPods)).allowed, false);
  assert.equal(specs.length, 4);
  await r.authorizeForName(node, { ...listPods, fieldSelector: 'spec.nodeName=node-a' });
  await r.authorizeForName(node, { ...listPods, fieldSelector: 'spec.nodeName=node-b' });
  await r.authorizeForName(node, listPods);
  assert.equal(specs.length, 4, 'answers are reused for the same selector');
});

test('broader questions first: every object, then every name with the selectors, then the name', async () => {
  const { reviewer: r, specs } = reviewer(nodeAuthorizer);
  // A kubelet's informer on one pod: LIST by metadata.name, which names the object.
  const byName = { ...listPods, namespace: 'ns', name: 'pod-a', fieldSelector: 'metadata.name=pod-a' };
  assert.equal((await r.authorizeForName(node, byName)).allowed, true);
  assert.deepEqual(
    specs.map((s) => s.resourceAttributes),
    [
      { verb: 'list', group: '', version: 'v1', resource: 'pods', namespace: 'ns' },
      { verb: 'list', group: '', version: 'v1', resource: 'pods', namespace: 'ns', fieldSelector: { rawSelector: 'metadata.name=pod-a' } },
      { verb: 'list', group: '', version: 'v1', resource: 'pods', namespace: 'ns', name: 'pod-a', fieldSelector: { rawSelector: 'metadata.name=pod-a' } },
    ],
  );
  // Allowed for every name by its selector: one review serves each name.
  specs.length = 0;
  const mine = { ...listPods, namespace: 'ns', fieldSelector: 'metadata.name=pod-x,spec.nodeName=node-a' };
  assert.equal((await r.authorizeForName(node, { ...mine, name: 'pod-x' })).allowed, true);
  assert.deepEqual(specs.map((s) => (s.resourceAttributes as { name?: string }).name), [undefined]);
});

test('a client allowed to list everything is asked once, whatever selectors its watches carry', async () => {
  // One identity watching the pods of a thousand nodes: without the broad question first, a
  // thousand reviews at once, which the review bound turns into 429s.
  const reader: UserInfo = { username: 'reader', uid: '', groups: ['system:authenticated'], extra: {} };
  const { reviewer: r, specs } = reviewer((spec) => ({ allowed: spec.user === 'reader' }));
  for (let i = 0; i < 1000; i++) assert.equal((await r.authorizeForName(reader, { ...listPods, verb: 'watch', fieldSelector: `spec.nodeName=node-${i}` })).allowed, true);
  assert.equal(specs.length, 1);
  assert.equal((specs[0]!.resourceAttributes as { fieldSelector?: unknown }).fieldSelector, undefined);
});

test('system:masters is allowed without a review, as the apiserver\'s first authorizer allows it', async () => {
  const admin: UserInfo = { username: 'admin', uid: '', groups: ['system:masters', 'system:authenticated'], extra: {} };
  const { reviewer: r, specs } = reviewer(() => ({ allowed: false, reason: 'never asked' }));
  assert.deepEqual(await r.authorizeForName(admin, { ...listPods, verb: 'delete', namespace: 'kube-system', name: 'x' }), { allowed: true, reason: '' });
  assert.deepEqual(await r.authorize(admin, { verb: 'impersonate', group: '', version: 'v1', resource: 'users', namespace: '', name: 'bob' }), { allowed: true, reason: '' });
  assert.equal(specs.length, 0);
  // Anyone else is asked.
  assert.equal((await r.authorize(node, listPods)).allowed, false);
  assert.equal(specs.length, 1);
});

test('a selector the apiserver could not read leaves the answer to it, even when allowed', async () => {
  const { reviewer: r } = reviewer(() => ({ allowed: true, evaluationError: 'spec.resourceAttributes.fieldSelector ignored due to parse error' }));
  await assert.rejects(r.authorize(node, { ...listPods, fieldSelector: 'spec.nodeName=node-a' }), UndecidedError);
});

test('what local RBAC does not grant goes upstream with the selectors; what it grants is not asked', async () => {
  // RBAC ignores selectors, as the apiserver's does: it grants the list or it does not.
  let grants = false;
  const { reviewer: r, specs } = reviewer(nodeAuthorizer, { allows: () => grants } as unknown as LocalRbac);
  assert.equal((await r.authorize(node, { ...listPods, fieldSelector: 'spec.nodeName=node-a' })).allowed, true);
  assert.deepEqual((specs[0]!.resourceAttributes as { fieldSelector?: unknown }).fieldSelector, { rawSelector: 'spec.nodeName=node-a' });
  grants = true;
  assert.equal((await r.authorize(node, { ...listPods, fieldSelector: 'spec.nodeName=node-b' })).allowed, true);
  assert.equal(specs.length, 1);
  assert.equal(r.allowedLocally, 1);
});

test('a watch is re-authorized with the selectors it was admitted with', async () => {
  mock.timers.enable({ apis: ['setTimeout', 'Date'] });
  try {
    const asked: ResourceAttributes[] = [];
    let allowed = true;
    const guard = {
      admit: (_c: Credential, attrs: ResourceAttributes): Promise<Admission> => {
        asked.push(attrs);
        return Promise.resolve(allowed ? { allowed: true, user: node } : { allowed: false, status: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'no', reason: 'Forbidden', code: 403 } });
      },
    } as unknown as AccessGuard;
    const recheck = new WatchReauthorizer(guard, 1_000);
    const ended: string[] = [];
    const attrs = { ...listPods, verb: 'watch', fieldSelector: 'spec.nodeName=node-a', labelSelector: 'app=web' };
    recheck.add({ kind: 'x509', user: node } as unknown as Credential, attrs, { endWith: (status) => void ended.push(status.reason) });
    mock.timers.tick(2_000);
    await new Promise((r) => setImmediate(r));
    assert.ok(asked.length >= 1);
    for (const a of asked) assert.deepEqual([a.fieldSelector, a.labelSelector], ['spec.nodeName=node-a', 'app=web']);
    allowed = false;
    mock.timers.tick(2_000);
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(ended, ['Forbidden']);
    assert.equal(recheck.size, 0);
  } finally {
    mock.timers.reset();
  }
});
