import { test } from 'node:test';
import assert from 'node:assert/strict';
import { beginsWithState, consistentReadsFor, decidingRule, parseConsistentReadsFor, ruleMatches, type Rule } from '../../src/flow/rules.ts';
import { parseRequestInfo } from '../../src/api/requestinfo.ts';

const user = (username: string, groups: string[] = []) => ({ username, uid: '', groups, extra: {} });
const info = (method: string, url: string) => ({ info: parseRequestInfo(method, url) });
const known = (u: ReturnType<typeof user> | undefined) => () => Promise.resolve(u);

test('rules match on verb, resource, path and who, every field given must match', () => {
  const r = (match: Rule['match']): Rule => ({ name: 'r', match, action: 'deny' });
  const listPods = info('GET', '/api/v1/namespaces/a/pods');
  assert.equal(ruleMatches(r({}), listPods, undefined), true);
  assert.equal(ruleMatches(r({ verbs: ['list'] }), listPods, undefined), true);
  assert.equal(ruleMatches(r({ verbs: ['watch'] }), listPods, undefined), false);
  assert.equal(ruleMatches(r({ resources: ['pods'] }), listPods, undefined), true);
  assert.equal(ruleMatches(r({ resources: ['pods'] }), info('GET', '/api/v1/namespaces/a/pods/p/log'), undefined), true);
  assert.equal(ruleMatches(r({ resources: ['pods/log'] }), listPods, undefined), false);
  assert.equal(ruleMatches(r({ resources: ['deployments.apps'] }), info('GET', '/apis/apps/v1/deployments'), undefined), true);
  assert.equal(ruleMatches(r({ resources: ['deployments'] }), info('GET', '/apis/apps/v1/deployments'), undefined), false, 'a bare name is the core group');
  assert.equal(ruleMatches(r({ paths: ['/openapi/*'] }), info('GET', '/openapi/v3/api/v1'), undefined), true);
  assert.equal(ruleMatches(r({ paths: ['/openapi/*'] }), listPods, undefined), false);
  assert.equal(ruleMatches(r({ groups: ['system:nodes'] }), listPods, user('system:node:n1', ['system:nodes'])), true);
  assert.equal(ruleMatches(r({ groups: ['system:nodes'] }), listPods, undefined), false, 'an unknown user matches no subject');
  assert.equal(ruleMatches(r({ users: ['bob'], groups: ['x'] }), listPods, user('bob')), true, 'subjects are alternatives');
  assert.equal(ruleMatches(r({ serviceAccounts: ['kube-system:*'] }), listPods, user('system:serviceaccount:kube-system:agent')), true);
  assert.equal(ruleMatches(r({ serviceAccounts: ['kube-system:agent'] }), listPods, user('system:serviceaccount:default:agent')), false);
});

test('the first rule with an action decides; consistentReads rules are a separate choice', async () => {
  const rules: Rule[] = [
    { name: 'reads-from-cache', match: { groups: ['system:nodes'] }, consistentReads: 'cache' },
    { name: 'admins-pass', match: { groups: ['system:masters'] }, action: 'allow' },
    { name: 'no-secrets', match: { resources: ['secrets'] }, action: 'deny' },
    { name: 'busy-only', match: { verbs: ['list'] }, consistentReads: 'cache', when: 'upstream-busy' },
  ];
  const secrets = info('GET', '/api/v1/secrets');
  assert.equal((await decidingRule(rules, secrets, known(user('root', ['system:masters']))))?.name, 'admins-pass');
  assert.equal((await decidingRule(rules, secrets, known(user('bob'))))?.name, 'no-secrets');
  assert.equal(await decidingRule(rules, info('GET', '/api/v1/pods'), known(user('bob'))), undefined);
  assert.equal(await consistentReadsFor(rules, info('GET', '/api/v1/pods'), known(user('system:node:n', ['system:nodes'])), false), 'cache');
  assert.equal(await consistentReadsFor(rules, info('GET', '/api/v1/pods'), known(user('bob')), false), undefined);
  assert.equal(await consistentReadsFor(rules, info('GET', '/api/v1/pods'), known(user('bob')), true), 'cache');
});

test('the user is looked up only when a rule that could decide names subjects', async () => {
  let lookups = 0;
  const lookup = () => {
    lookups++;
    return Promise.resolve(user('bob'));
  };
  const rules: Rule[] = [
    { name: 'nodes-no-secrets', match: { groups: ['system:nodes'], resources: ['secrets'] }, action: 'deny' },
    { name: 'no-configmap-writes', match: { resources: ['configmaps'], verbs: ['create'] }, action: 'reject' },
  ];
  assert.equal(await decidingRule(rules, info('GET', '/api/v1/pods'), lookup), undefined);
  assert.equal((await decidingRule(rules, info('POST', '/api/v1/namespaces/a/configmaps'), lookup))?.name, 'no-configmap-writes');
  assert.equal(lookups, 0, 'no rule that names subjects applied to these requests');
  assert.equal(await decidingRule(rules, info('GET', '/api/v1/secrets'), lookup), undefined);
  assert.equal(lookups, 1);
  assert.equal((await decidingRule(rules, info('GET', '/api/v1/secrets'), known(user('system:node:n', ['system:nodes']))))?.name, 'nodes-no-secrets');
});

test('`list` also names an informer\'s start: a watch that begins with the current state', () => {
  const r: Rule = { name: 'r', match: { verbs: ['list'], resources: ['secrets'] }, action: 'deny' };
  const watch = (query: string) => {
    const url = `/api/v1/secrets?watch=true&${query}`;
    const i = parseRequestInfo('GET', url);
    return { info: i, beginsWithState: beginsWithState(i, new URL(url, 'http://x').searchParams) };
  };
  // client-go 1.35+: a consistent watch-list, with or without a resourceVersion.
  assert.equal(ruleMatches(r, watch('sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true'), undefined), true);
  assert.equal(ruleMatches(r, watch('sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=10'), undefined), true);
  // A legacy watch from 0 or nothing sends the state as ADDED events too.
  assert.equal(ruleMatches(r, watch('resourceVersion=0'), undefined), true);
  assert.equal(ruleMatches(r, watch(''), undefined), true);
  // An informer resuming after its list only follows changes: that is a watch, not a list.
  assert.equal(ruleMatches(r, watch('resourceVersion=10'), undefined), false);
  assert.equal(ruleMatches(r, watch('sendInitialEvents=false&resourceVersionMatch=NotOlderThan&resourceVersion=10'), undefined), false);
  // `watch` names every watch; `list` still names a LIST.
  assert.equal(ruleMatches({ ...r, match: { verbs: ['watch'] } }, watch('sendInitialEvents=true&resourceVersionMatch=NotOlderThan'), undefined), true);
  assert.equal(ruleMatches(r, info('GET', '/api/v1/secrets'), undefined), true);
});

test('--consistent-reads-for becomes a rule; names may hold colons', () => {
  assert.deepEqual(parseConsistentReadsFor('group:system:nodes=cache').match, { groups: ['system:nodes'] });
  assert.deepEqual(parseConsistentReadsFor('serviceaccount:kube-system:*=forward').match, { serviceAccounts: ['kube-system:*'] });
  assert.equal(parseConsistentReadsFor('user:system:admin=verify').consistentReads, 'verify');
  for (const bad of ['user:alice', 'alice=cache', 'user:=cache', 'user:alice=sometimes', 'robot:x=cache', 'serviceaccount:x=cache']) {
    assert.throws(() => parseConsistentReadsFor(bad), Error, bad);
  }
});
