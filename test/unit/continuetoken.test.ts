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
