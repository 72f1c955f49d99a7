import { test } from 'node:test';
import assert from 'node:assert/strict';
import { downstreamResponseHeaders, upstreamRequestHeaders } from '../../src/upstream/headers.ts';

test('request headers keep repeated values apart and drop hop-by-hop, pseudo, Host and Expect', () => {
  const raw = [
    ':method', 'GET',
    ':path', '/api/v1/pods',
    'Host', 'levee:8443',
    'Connection', 'keep-alive, X-Hop',
    'Keep-Alive', 'timeout=5',
    'X-Hop', 'gone',
    'Transfer-Encoding', 'chunked',
    'TE', 'trailers',
    'Expect', '100-continue',
    'Accept', 'application/json',
    'Impersonate-Group', 'a',
    'Impersonate-Group', 'b',
    'Authorization', 'Bearer t',
  ];
  assert.deepEqual(upstreamRequestHeaders(raw), [
    'Accept', 'application/json',
    'Impersonate-Group', 'a',
    'Impersonate-Group', 'b',
    'Authorization', 'Bearer t',
  ]);
  assert.deepEqual(upstreamRequestHeaders(raw, (name) => name === 'authorization').includes('Authorization'), false);
});

test('response headers lose everything that would break an HTTP/2 response', () => {
  const out = downstreamResponseHeaders({
    'content-type': 'application/json',
    'transfer-encoding': 'chunked',
    connection: 'keep-alive, x-private',
    'keep-alive': 'timeout=5',
    'x-private': '1',
    'audit-id': 'abc',
    'set-cookie': ['a=1', 'b=2'],
    upgrade: 'h2c',
  });
  assert.deepEqual(out, { 'content-type': 'application/json', 'audit-id': 'abc', 'set-cookie': ['a=1', 'b=2'] });
});
