import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { parseConsistentReads, parseOptions, parseResourceOptions, UsageError } from '../../src/config/options.ts';
import { resolveUpstreamSource } from '../../src/upstream/credentials.ts';
import { isLoopback, parseListenAddress } from '../../src/http/listener.ts';
import { tempDir } from '../support/tempdir.ts';

test('defaults run on loopback in delegate mode', () => {
  const o = parseOptions([]);
  assert.notEqual(o, 'help');
  if (o === 'help') return;
  assert.equal(o.listen, '127.0.0.1:8443');
  assert.equal(o.auth, 'delegate');
  assert.equal(o.tlsCertFile, undefined);
  assert.equal(o.anonymous, false);
  assert.equal(o.tokenCacheTtlMs, 30_000);
  assert.equal(o.authorizationAllowedTtlMs, 10_000);
  assert.equal(o.authorizationDeniedTtlMs, 2_000);
  assert.equal(o.watchReauthorizeMs, 60_000);
});

test('security flags: modes, client CA with TLS only, durations named in errors', () => {
  const o = parseOptions(['--auth', 'none', '--anonymous-auth', '--authorization-cache-allowed-ttl', '1m30s', '--token-cache-ttl', '0']);
  assert.ok(o !== 'help');
  assert.equal(o.auth, 'none');
  assert.equal(o.anonymous, true);
  assert.equal(o.authorizationAllowedTtlMs, 90_000);
  assert.equal(o.tokenCacheTtlMs, 0);
  assert.throws(() => parseOptions(['--client-ca-file', 'ca.pem']), /--client-ca-file needs TLS/);
  assert.throws(() => parseOptions(['--watch-reauthorize-interval', 'soon']), /--watch-reauthorize-interval: "soon" is not a duration/);
});

test('bad options are usage errors that name the option', () => {
  assert.throws(() => parseOptions(['--auth', 'none-such']), (e: unknown) => e instanceof UsageError && /--auth/.test(e.message));
  assert.throws(() => parseOptions(['--tls-cert-file', 'c.pem']), /go together/);
  assert.throws(() => parseOptions(['--bogus']), UsageError);
  assert.throws(() => parseOptions(['--log-level', 'loud']), /--log-level/);
});

test('upstream source order: flag, $KUBECONFIG, in-cluster, ~/.kube/config', () => {
  const home = tempDir('levee-home-');
  const saved = process.env.HOME;
  process.env.HOME = home;
  try {
    assert.deepEqual(resolveUpstreamSource('/a', { KUBECONFIG: '/b' }), { kind: 'kubeconfig', path: '/a', context: undefined });
    assert.deepEqual(resolveUpstreamSource(undefined, { KUBECONFIG: ':/b:/c' }), { kind: 'kubeconfig', path: '/b', context: undefined });
    assert.deepEqual(resolveUpstreamSource(undefined, { KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' }), { kind: 'in-cluster' });
    assert.equal(resolveUpstreamSource(undefined, {}), undefined);
    mkdirSync(join(home, '.kube'));
    writeFileSync(join(home, '.kube', 'config'), '');
    assert.deepEqual(resolveUpstreamSource(undefined, {}), { kind: 'kubeconfig', path: join(home, '.kube', 'config'), context: undefined });
  } finally {
    process.env.HOME = saved;
  }
});

test('listen addresses and loopback', () => {
  assert.deepEqual(parseListenAddress('127.0.0.1:8443'), { host: '127.0.0.1', port: 8443 });
  assert.deepEqual(parseListenAddress('[::1]:0'), { host: '::1', port: 0 });
  assert.deepEqual(parseListenAddress(':9443'), { host: '0.0.0.0', port: 9443 });
  assert.throws(() => parseListenAddress('8443'), /host:port/);
  assert.throws(() => parseListenAddress('a:70000'), /range/);
  assert.equal(isLoopback('127.0.0.2'), true);
  assert.equal(isLoopback('::1'), true);
  assert.equal(isLoopback('localhost'), true);
  assert.equal(isLoopback('0.0.0.0'), false);
  assert.equal(isLoopback('10.0.0.1'), false);
});

test('consistent-read policy: a default and overrides by resource', () => {
  assert.deepEqual(parseConsistentReads('verify'), { default: 'verify', byResource: {} });
  assert.deepEqual(parseConsistentReads('forward, nodes=cache,endpointslices.discovery.k8s.io=verify'), {
    default: 'forward',
    byResource: { nodes: 'cache', 'endpointslices.discovery.k8s.io': 'verify' },
  });
  assert.throws(() => parseConsistentReads('pods=sometimes'), /--consistent-reads: "sometimes"/);
});

test('per-resource upstream selectors and indexes', () => {
  assert.deepEqual(parseResourceOptions(['pods=spec.nodeName=node-1'], ['configmaps=app in (a,b)'], ['pods=status.phase', 'pods=spec.schedulerName']), {
    pods: { fieldSelector: 'spec.nodeName=node-1', indexes: ['status.phase', 'spec.schedulerName'] },
    configmaps: { labelSelector: 'app in (a,b)' },
  });
  assert.throws(() => parseResourceOptions(['spec.nodeName'], [], []), /--cache-selector: "spec.nodeName" is not NAME=VALUE/);
  assert.throws(() => parseResourceOptions([], ['pods=a b c'], []), /--cache-label-selector pods:/);
});
