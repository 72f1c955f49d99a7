import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeContinue, encodeContinue } from '../../src/serve/continuetoken.ts';

test('tokens have the apiserver\'s format, byte for byte', () => {
  // A token the apiserver issued for /api/v1/namespaces/kube-system/configmaps?limit=1.
  const fromApiserver = 'eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTM1NCwic3RhcnQiOiIvZXh0ZW5zaW9uLWFwaXNlcnZlci1hdXRoZW50aWNhdGlvblx1MDAwMCJ9';
  assert.equal(encodeContinue(1354, '/extension-apiserver-authentication'), fromApiserver);
  assert.deepEqual(decodeContinue(fromApiserver), { resourceVersion: 1354, start: '/extension-apiserver-authentication\u0000' });
});

test('tokens Levee cannot serve are refused, so the apiserver answers them', () => {
  const enc = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  assert.equal(decodeContinue('%%%'), undefined);
  assert.equal(decodeContinue(enc({ v: 'meta.k8s.io/v2', rv: 5, start: '/a' })), undefined);
  // rv -1: the apiserver's token after compaction, a consistent read it must answer itself.
  assert.equal(decodeContinue(enc({ v: 'meta.k8s.io/v1', rv: -1, start: '/a' })), undefined);
  assert.equal(decodeContinue(enc({ v: 'meta.k8s.io/v1', rv: 5, start: 'a' })), undefined);
  assert.equal(decodeContinue(Buffer.from('not json').toString('base64url')), undefined);
});

test('tokens the apiserver refuses, or reads otherwise than Levee would, are left to it', () => {
  const valid = encodeContinue(12, '/cm-3');
  const enc = (text: string) => Buffer.from(text).toString('base64url');
  assert.deepEqual(decodeContinue(valid), { resourceVersion: 12, start: '/cm-3\u0000' });
  // RawURLEncoding: padding is an illegal character, and 4n+1 characters are no encoding at all
  // (Node would decode both, dropping what does not fit).
  assert.equal(decodeContinue(`${valid}=`), undefined);
  const whole = encodeContinue(12, '/cm-300');
  assert.equal(Buffer.from(`${whole}A`, 'base64url').equals(Buffer.from(whole, 'base64url')), true);
  assert.equal(decodeContinue(`${whole}A`), undefined);
  // A start key path.Clean would change: "continue key is not valid: /a/../b".
  for (const start of ['/a/../b', '/../x', '//cm-1', '/cm-1/', '/./cm-1', '/cm-1/.']) {
    assert.equal(decodeContinue(enc(JSON.stringify({ v: 'meta.k8s.io/v1', rv: 12, start }))), undefined, start);
  }
  assert.deepEqual(decodeContinue(enc('{"v":"meta.k8s.io/v1","rv":12,"start":"/"}')), { resourceVersion: 12, start: '/' });
  // 12.0 is no int64 to encoding/json; fields in another order, another case, or with spaces are
  // the apiserver's to read.
  for (const text of [
    '{"v":"meta.k8s.io/v1","rv":12.0,"start":"/cm-3\\u0000"}',
    '{"v":"meta.k8s.io/v1","rv":1.2e1,"start":"/cm-3\\u0000"}',
    '{"rv":12,"v":"meta.k8s.io/v1","start":"/cm-3\\u0000"}',
    '{"V":"meta.k8s.io/v1","rv":12,"start":"/cm-3\\u0000"}',
    '{"v": "meta.k8s.io/v1","rv":12,"start":"/cm-3\\u0000"}',
    '{"v":"meta.k8s.io/v1","rv":12,"start":"/cm-3\\u0000","x":1}',
  ]) {
    assert.equal(decodeContinue(enc(text)), undefined, text);
  }
});
