import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeStatus, newNotFound, newServiceUnavailable } from '../../src/api/status.ts';

test('Status bytes match the apiserver encoder: field order, omitted empty fields, trailing newline', () => {
  assert.equal(
    encodeStatus(newNotFound({ group: '', resource: 'pods' }, 'p')).toString(),
    '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \\"p\\" not found","reason":"NotFound","details":{"name":"p","kind":"pods"},"code":404}\n',
  );
  assert.equal(
    encodeStatus(newNotFound({ group: 'apps', resource: 'deployments' }, 'd')).toString(),
    '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"deployments.apps \\"d\\" not found","reason":"NotFound","details":{"name":"d","group":"apps","kind":"deployments"},"code":404}\n',
  );
});

test('unavailable carries a retry hint', () => {
  const s = newServiceUnavailable('down', 3);
  assert.equal(s.code, 503);
  assert.equal(s.reason, 'ServiceUnavailable');
  assert.equal(s.details?.retryAfterSeconds, 3);
});
