import { test } from 'node:test';
import assert from 'node:assert/strict';
import { consistentReadsFor, decidingRule, parseConsistentReadsFor, ruleMatches, type Rule } from '../../src/config/rules.ts';
import { parseRequestInfo } from '../../src/serve/requestinfo.ts';

const user = (username: string, groups: string[] = []) => ({ username, uid: '', groups, extra: {} });
const info = (method: string, url: string) => parseRequestInfo(method, url);

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

test('the first rule with an action decides; consistentReads rules are a separate choice', () => {
  const rules: Rule[] = [
    { name: 'reads-from-cache', match: { groups: ['system:nodes'] }, consistentReads: 'cache' },
    { name: 'admins-pass', match: { groups: ['system:masters'] }, action: 'allow' },
    { name: 'no-secrets', match: { resources: ['secrets'] }, action: 'deny' },
    { name: 'busy-only', match: { verbs: ['list'] }, consistentReads: 'cache', when: 'upstream-busy' },
  ];
  const secrets = info('GET', '/api/v1/secrets');
  assert.equal(decidingRule(rules, secrets, user('root', ['system:masters']))?.name, 'admins-pass');
  assert.equal(decidingRule(rules, secrets, user('bob'))?.name, 'no-secrets');
  assert.equal(decidingRule(rules, info('GET', '/api/v1/pods'), user('bob')), undefined);
  assert.equal(consistentReadsFor(rules, info('GET', '/api/v1/pods'), user('system:node:n', ['system:nodes']), false), 'cache');
  assert.equal(consistentReadsFor(rules, info('GET', '/api/v1/pods'), user('bob'), false), undefined);
  assert.equal(consistentReadsFor(rules, info('GET', '/api/v1/pods'), user('bob'), true), 'cache');
});

test('--consistent-reads-for becomes a rule; names may hold colons', () => {
  assert.deepEqual(parseConsistentReadsFor('group:system:nodes=cache').match, { groups: ['system:nodes'] });
  assert.deepEqual(parseConsistentReadsFor('serviceaccount:kube-system:*=forward').match, { serviceAccounts: ['kube-system:*'] });
  assert.equal(parseConsistentReadsFor('user:system:admin=verify').consistentReads, 'verify');
  for (const bad of ['user:alice', 'alice=cache', 'user:=cache', 'user:alice=sometimes', 'robot:x=cache', 'serviceaccount:x=cache']) {
    assert.throws(() => parseConsistentReadsFor(bad), Error, bad);
  }
});
