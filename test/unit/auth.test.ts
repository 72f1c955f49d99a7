import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { PeerCertificate } from 'node:tls';
import { impersonationChecks, impersonationHeaders, ImpersonationError } from '../../src/auth/impersonation.ts';
import { bearerToken } from '../../src/auth/tokenreview.ts';
import { userFromCertificate } from '../../src/auth/x509.ts';
import { forbidden } from '../../src/auth/authorize.ts';
import { ReviewCache } from '../../src/auth/reviewcache.ts';
import { ReviewLimiter, ReviewRejectedError } from '../../src/auth/reviewlimit.ts';
import { splitServiceAccount, userKey, withAuthenticatedGroup } from '../../src/api/user.ts';
import { parseDuration } from '../../src/config/duration.ts';
import { ruleAllows } from '../../src/auth/rbac.ts';

test('bearer tokens are read as the apiserver reads them', () => {
  assert.equal(bearerToken('Bearer abc'), 'abc');
  assert.equal(bearerToken('bearer abc'), 'abc');
  assert.equal(bearerToken('  Bearer abc  '), 'abc');
  assert.equal(bearerToken('Bearer abc def'), 'abc');
  assert.equal(bearerToken('Bearer  abc'), '', 'two spaces leave an empty token, which the apiserver rejects');
  assert.equal(bearerToken('Basic dXNlcjpwYXNz'), undefined);
  assert.equal(bearerToken('Bearer'), undefined);
  assert.equal(bearerToken(undefined), undefined);
});

test('a client certificate names the user in CN and the groups in O', () => {
  const cert = (subject: Record<string, string | string[]>) => ({ subject }) as unknown as PeerCertificate;
  assert.deepEqual(userFromCertificate(cert({ CN: 'alice' })), { username: 'alice', uid: '', groups: ['system:authenticated'], extra: {} });
  assert.deepEqual(userFromCertificate(cert({ CN: 'node', O: ['system:nodes', 'x'] }))?.groups, ['system:nodes', 'x', 'system:authenticated']);
  assert.deepEqual(userFromCertificate(cert({ CN: 'admin', O: 'system:masters' }))?.groups, ['system:masters', 'system:authenticated']);
  assert.equal(userFromCertificate(cert({ O: 'x' })), undefined);
});

test('user helpers: authenticated group, service accounts, cache keys', () => {
  assert.deepEqual(withAuthenticatedGroup({ username: 'system:anonymous', uid: '', groups: ['system:unauthenticated'], extra: {} }).groups, ['system:unauthenticated']);
  assert.deepEqual(splitServiceAccount('system:serviceaccount:ns:sa'), { namespace: 'ns', name: 'sa' });
  assert.equal(splitServiceAccount('system:serviceaccount:ns'), undefined);
  assert.equal(splitServiceAccount('alice'), undefined);
  const a = userKey({ username: 'u', uid: '', groups: ['g'], extra: { b: ['1'], a: ['2'] } });
  assert.equal(a, userKey({ username: 'u', uid: '', groups: ['g'], extra: { a: ['2'], b: ['1'] } }));
  assert.notEqual(a, userKey({ username: 'u', uid: '', groups: ['g', 'h'], extra: { a: ['2'], b: ['1'] } }));
});

test('impersonation headers become the checks of the apiserver\'s impersonation filter', () => {
  assert.deepEqual(impersonationChecks(['Accept', 'x']), []);
  const checks = impersonationChecks([
    'Impersonate-User', 'system:serviceaccount:ns:sa',
    'Impersonate-Group', 'g1',
    'impersonate-group', 'g2',
    'Impersonate-Extra-Acme.com%2FProject', 'p',
    'Impersonate-Uid', 'u-1',
  ]);
  assert.deepEqual(checks.map((c) => [c.group, c.resource, c.subresource, c.namespace, c.name]), [
    ['', 'serviceaccounts', '', 'ns', 'sa'],
    ['', 'groups', '', '', 'g1'],
    ['', 'groups', '', '', 'g2'],
    ['authentication.k8s.io', 'userextras', 'acme.com/project', '', 'p'],
    ['authentication.k8s.io', 'uids', '', '', 'u-1'],
  ]);
  assert.ok(checks.every((c) => c.verb === 'impersonate'));
  assert.throws(() => impersonationChecks(['Impersonate-Group', 'g']), ImpersonationError);
});

test('impersonating without a user name is refused with the apiserver\'s words for what was asked', () => {
  const refusal = (headers: string[]): string => {
    try {
      impersonationChecks(headers);
    } catch (err) {
      if (err instanceof ImpersonationError) return err.message;
    }
    return 'no refusal';
  };
  assert.equal(
    refusal(['Impersonate-Group', 'system:masters']),
    'requested &user.DefaultInfo{Name:"", UID:"", Groups:[]string{"system:masters"}, Extra:map[string][]string(nil)} without impersonating a user name',
  );
  assert.equal(
    refusal(['Impersonate-User', '', 'Impersonate-Uid', 'u"1', 'Impersonate-Extra-Scopes', 'view', 'impersonate-extra-%41cme', 'b', 'Impersonate-Extra-Scopes', 'edit', 'Impersonate-Group', 'a', 'Impersonate-Group', 'b']),
    'requested &user.DefaultInfo{Name:"", UID:"u\\"1", Groups:[]string{"a", "b"}, Extra:map[string][]string{"Acme":[]string{"b"}, "scopes":[]string{"view", "edit"}}} without impersonating a user name',
  );
});

test('impersonating a certificate\'s user names it, its groups and extras, but not system:authenticated', () => {
  assert.deepEqual(
    impersonationHeaders({ username: 'alice', uid: 'u1', groups: ['dev', 'system:authenticated'], extra: { 'acme.com/team': ['a'] } }),
    ['Impersonate-User', 'alice', 'Impersonate-Uid', 'u1', 'Impersonate-Group', 'dev', 'Impersonate-Extra-acme.com%2Fteam', 'a'],
  );
});

test('Forbidden messages are the apiserver\'s, for names, collections, scopes and subresources', () => {
  const alice = { username: 'alice', uid: '', groups: [], extra: {} };
  assert.equal(
    forbidden(alice, { verb: 'get', group: '', resource: 'configmaps', namespace: 'ns', name: 'cm' }, '').message,
    'configmaps "cm" is forbidden: User "alice" cannot get resource "configmaps" in API group "" in the namespace "ns"',
  );
  const list = forbidden(alice, { verb: 'list', group: 'apps', resource: 'deployments', namespace: '', name: '' }, 'no rule');
  assert.equal(list.message, 'deployments.apps is forbidden: User "alice" cannot list resource "deployments" in API group "apps" at the cluster scope: no rule');
  assert.deepEqual(list.details, { group: 'apps', kind: 'deployments' });
  assert.equal(list.code, 403);
  assert.equal(list.reason, 'Forbidden');
  assert.match(
    forbidden({ ...alice, username: '<b>' }, { verb: 'get', group: '', resource: 'pods', subresource: 'log', namespace: 'n', name: 'p' }, '').message,
    /User "&lt;b&gt;" cannot get resource "pods\/log"/,
  );
});

test('review answers are shared while asked, kept for their own TTL, and failures are not kept', async () => {
  const cache = new ReviewCache<{ ok: boolean }>({ positiveTtlMs: 60_000, negativeTtlMs: 0, positive: (v) => v.ok });
  let asked = 0;
  const review = (ok: boolean) => async () => {
    asked++;
    await new Promise((r) => setTimeout(r, 5));
    return { ok };
  };
  const [a, b] = await Promise.all([cache.get('k', review(true)), cache.get('k', review(true))]);
  assert.equal(asked, 1);
  assert.equal(a, b);
  await cache.get('k', review(true));
  assert.equal(asked, 1, 'a positive answer is reused');
  await cache.get('n', review(false));
  await cache.get('n', review(false));
  assert.equal(asked, 3, 'a negative TTL of 0 asks every time');
  await assert.rejects(cache.get('e', () => Promise.reject(new Error('down'))));
  assert.deepEqual(await cache.get('e', review(true)), { ok: true });
});

test('reviews sent upstream are bounded: a few at once, fair queues behind them, a rejection past those', async () => {
  const limiter = new ReviewLimiter({ seats: 2, queues: 4, handSize: 1, queueLength: 2, maxWaitMs: 60_000 });
  let running = 0;
  let most = 0;
  const pending: Array<() => void> = [];
  const send = () =>
    new Promise<string>((resolve) => {
      running++;
      most = Math.max(most, running);
      pending.push(() => {
        running--;
        resolve('ok');
      });
    });
  // One client with many new tokens fills its own queue; its surplus is refused, not queued.
  const flood = Array.from({ length: 5 }, () => limiter.run('token:flood', send).catch((e: unknown) => e));
  await new Promise((r) => setImmediate(r));
  assert.equal(limiter.inFlight, 2);
  assert.equal(limiter.queued, 2);
  assert.ok((await flood[4]) instanceof ReviewRejectedError);
  assert.equal(limiter.rejected, 1);
  // Another client still gets in line, and everyone is served as seats come free.
  const other = limiter.run('token:other', send);
  while (pending.length > 0 || limiter.queued > 0) {
    pending.shift()?.();
    await new Promise((r) => setImmediate(r));
  }
  assert.equal(await other, 'ok');
  assert.deepEqual(await Promise.all(flood.slice(0, 4)), ['ok', 'ok', 'ok', 'ok']);
  assert.equal(most, 2, 'never more than the seats at once');
});

test('durations are read as Kubernetes flags write them', () => {
  assert.equal(parseDuration('0'), 0);
  assert.equal(parseDuration('500ms'), 500);
  assert.equal(parseDuration('1m30s'), 90_000);
  assert.equal(parseDuration('2h'), 7_200_000);
  assert.equal(parseDuration('1.5s'), 1500);
  for (const bad of ['', '10', 's', '1x', '1s2', '-1s']) assert.throws(() => parseDuration(bad), /not a duration/, bad);
});

test('RBAC rules match as the apiserver matches them', () => {
  const attrs = (verb: string, group: string, resource: string, subresource = '', name = '') => ({ verb, group, resource, subresource, namespace: 'ns', name });
  const rule = { verbs: ['get', 'list'], apiGroups: [''], resources: ['pods', 'pods/log'] };
  assert.equal(ruleAllows(rule, attrs('get', '', 'pods')), true);
  assert.equal(ruleAllows(rule, attrs('watch', '', 'pods')), false);
  assert.equal(ruleAllows(rule, attrs('get', 'apps', 'pods')), false);
  assert.equal(ruleAllows(rule, attrs('get', '', 'pods', 'log')), true);
  assert.equal(ruleAllows(rule, attrs('get', '', 'pods', 'exec')), false);
  assert.equal(ruleAllows({ verbs: ['*'], apiGroups: ['*'], resources: ['*/scale'] }, attrs('get', 'apps', 'deployments', 'scale')), true);
  assert.equal(ruleAllows({ verbs: ['*'], apiGroups: ['*'], resources: ['*/scale'] }, attrs('get', 'apps', 'deployments')), false);
  assert.equal(ruleAllows({ verbs: ['*'], apiGroups: ['*'], resources: ['*'] }, attrs('delete', 'x.io', 'things', 'status')), true);
  const named = { verbs: ['get'], apiGroups: [''], resources: ['configmaps'], resourceNames: ['a'] };
  assert.equal(ruleAllows(named, attrs('get', '', 'configmaps', '', 'a')), true);
  assert.equal(ruleAllows(named, attrs('get', '', 'configmaps', '', 'b')), false);
  assert.equal(ruleAllows(named, attrs('get', '', 'configmaps', '', '')), false, 'a name-limited rule does not grant the collection');
  const urls = { verbs: ['get'], nonResourceURLs: ['/healthz', '/apis/*'] };
  assert.equal(ruleAllows(urls, { verb: 'get', path: '/healthz' }), true);
  assert.equal(ruleAllows(urls, { verb: 'get', path: '/apis/apps/v1' }), true);
  assert.equal(ruleAllows(urls, { verb: 'get', path: '/api' }), false);
  assert.equal(ruleAllows(rule, { verb: 'get', path: '/healthz' }), false, 'a resource rule grants no path');
});
