import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeStatus, encodeStatusAs, newBadRequest, newNotFound, newServiceUnavailable } from '../../src/api/status.ts';
import { negotiateErrorMediaType } from '../../src/api/negotiation.ts';
import { forbidden } from '../../src/auth/authorize.ts';

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

test('an error is written in whatever the client negotiates, byte for byte as kube-apiserver 1.37 writes it', () => {
  // GET /api/v1/namespaces?timeout=a%3Cb with each Accept header, as the apiserver answered.
  const s = newBadRequest('invalid timeout specified in the request URL - time: invalid duration "a<b"');
  const b64 = (how: Parameters<typeof encodeStatusAs>[1]) => encodeStatusAs(s, how).body.toString('base64');
  assert.equal(b64({ media: 'json', pretty: false }), 'eyJraW5kIjoiU3RhdHVzIiwiYXBpVmVyc2lvbiI6InYxIiwibWV0YWRhdGEiOnt9LCJzdGF0dXMiOiJGYWlsdXJlIiwibWVzc2FnZSI6ImludmFsaWQgdGltZW91dCBzcGVjaWZpZWQgaW4gdGhlIHJlcXVlc3QgVVJMIC0gdGltZTogaW52YWxpZCBkdXJhdGlvbiBcImFcdTAwM2NiXCIiLCJyZWFzb24iOiJCYWRSZXF1ZXN0IiwiY29kZSI6NDAwfQo=');
  const pretty = 'ewogICJraW5kIjogIlN0YXR1cyIsCiAgImFwaVZlcnNpb24iOiAidjEiLAogICJtZXRhZGF0YSI6IHt9LAogICJzdGF0dXMiOiAiRmFpbHVyZSIsCiAgIm1lc3NhZ2UiOiAiaW52YWxpZCB0aW1lb3V0IHNwZWNpZmllZCBpbiB0aGUgcmVxdWVzdCBVUkwgLSB0aW1lOiBpbnZhbGlkIGR1cmF0aW9uIFwiYVx1MDAzY2JcIiIsCiAgInJlYXNvbiI6ICJCYWRSZXF1ZXN0IiwKICAiY29kZSI6IDQwMAp9';
  assert.equal(b64({ media: 'json', pretty: true }), pretty);
  // Accept: text/html: nothing acceptable, and the original error is not hidden behind a 406.
  assert.equal(b64('not-acceptable'), pretty);
  assert.equal(b64({ media: 'yaml', pretty: false }), 'YXBpVmVyc2lvbjogdjEKY29kZTogNDAwCmtpbmQ6IFN0YXR1cwptZXNzYWdlOiAnaW52YWxpZCB0aW1lb3V0IHNwZWNpZmllZCBpbiB0aGUgcmVxdWVzdCBVUkwgLSB0aW1lOiBpbnZhbGlkIGR1cmF0aW9uICJhPGIiJwptZXRhZGF0YToge30KcmVhc29uOiBCYWRSZXF1ZXN0CnN0YXR1czogRmFpbHVyZQo=');
  assert.equal(b64({ media: 'protobuf', pretty: false }), 'azhzAAoMCgJ2MRIGU3RhdHVzEm0KBgoAEgAaABIHRmFpbHVyZRpLaW52YWxpZCB0aW1lb3V0IHNwZWNpZmllZCBpbiB0aGUgcmVxdWVzdCBVUkwgLSB0aW1lOiBpbnZhbGlkIGR1cmF0aW9uICJhPGIiIgpCYWRSZXF1ZXN0MJADGgAiAA==');
  // A long message folds past column 80; details, as bob's refusal to get configmap x"y.
  const long = newBadRequest('invalid timeout specified in the request URL - time: invalid duration "aaaaaaaaaaaaaaaaaaaaaaaaaaaa bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb cccccccccccccccccccccccccccccccc dddd"');
  assert.equal(
    encodeStatusAs(long, { media: 'yaml', pretty: false }).body.toString(),
    'apiVersion: v1\ncode: 400\nkind: Status\nmessage: \'invalid timeout specified in the request URL - time: invalid duration "aaaaaaaaaaaaaaaaaaaaaaaaaaaa\n  bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb cccccccccccccccccccccccccccccccc dddd"\'\nmetadata: {}\nreason: BadRequest\nstatus: Failure\n',
  );
  const bob = { username: 'bob', uid: '', groups: [], extra: {} };
  const refusal = forbidden(bob, { verb: 'get', group: '', resource: 'configmaps', namespace: 'default', name: 'x"y' }, '');
  assert.equal(
    encodeStatus(refusal).toString(),
    '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps \\"x\\\\\\"y\\" is forbidden: User \\"bob\\" cannot get resource \\"configmaps\\" in API group \\"\\" in the namespace \\"default\\"","reason":"Forbidden","details":{"name":"x\\"y","kind":"configmaps"},"code":403}\n',
  );
  assert.equal(
    encodeStatusAs(refusal, { media: 'yaml', pretty: false }).body.toString(),
    'apiVersion: v1\ncode: 403\ndetails:\n  kind: configmaps\n  name: x"y\nkind: Status\nmessage: \'configmaps "x\\"y" is forbidden: User "bob" cannot get resource "configmaps"\n  in API group "" in the namespace "default"\'\nmetadata: {}\nreason: Forbidden\nstatus: Failure\n',
  );
  assert.equal(
    encodeStatusAs(refusal, { media: 'protobuf', pretty: false }).body.toString('base64'),
    'azhzAAoMCgJ2MRIGU3RhdHVzErABCgYKABIAGgASB0ZhaWx1cmUadmNvbmZpZ21hcHMgInhcInkiIGlzIGZvcmJpZGRlbjogVXNlciAiYm9iIiBjYW5ub3QgZ2V0IHJlc291cmNlICJjb25maWdtYXBzIiBpbiBBUEkgZ3JvdXAgIiIgaW4gdGhlIG5hbWVzcGFjZSAiZGVmYXVsdCIiCUZvcmJpZGRlbioXCgN4InkSABoKY29uZmlnbWFwcygAMgAwkwMaACIA',
  );
});

test('errors are negotiated with the default endpoint restrictions: no conversions, pretty as asked', () => {
  const q = (s = '') => new URLSearchParams(s);
  assert.deepEqual(negotiateErrorMediaType(undefined, q(), undefined), { media: 'json', pretty: false });
  assert.deepEqual(negotiateErrorMediaType('application/json', q(), 'curl/8'), { media: 'json', pretty: true });
  assert.deepEqual(negotiateErrorMediaType('application/json', q('pretty=true'), undefined), { media: 'json', pretty: true });
  assert.deepEqual(negotiateErrorMediaType('application/yaml;q=0.5, application/json', q(), undefined), { media: 'json', pretty: false });
  assert.deepEqual(negotiateErrorMediaType('application/vnd.kubernetes.protobuf', q('pretty=1'), undefined), { media: 'protobuf', pretty: false });
  assert.deepEqual(negotiateErrorMediaType('application/json;as=Table;v=v1;g=meta.k8s.io, application/yaml', q(), undefined), { media: 'yaml', pretty: false });
  assert.equal(negotiateErrorMediaType('application/json;as=Table;v=v1;g=meta.k8s.io', q(), undefined), 'not-acceptable');
  assert.equal(negotiateErrorMediaType('text/html', q(), undefined), 'not-acceptable');
});
