// joinBytes: the parts in order, whether they live in shared or ordinary memory, empty parts
// and subarrays included, and a new buffer the parts do not share.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { joinBytes } from '../../src/store/bytes.ts';
import { sharedCopy } from '../../src/reflector/decode.ts';

// First in this file: until a shared copy is made, this thread copies parts with set(), after it
// with fill(); both ways are asked of the same parts.
test('joinBytes copies ordinary parts the same way before and after this thread holds shared bytes', () => {
  const pool = Buffer.from('xx{"metadata":{"name":"a"}}yy');
  const parts = [Buffer.from('{"items":['), pool.subarray(2, pool.length - 2), Buffer.from(','), Buffer.alloc(0), Buffer.from('{}'), Buffer.from(']}')];
  const want = '{"items":[{"metadata":{"name":"a"}},{}]}';
  assert.equal(joinBytes(parts).toString(), want);
  sharedCopy(Buffer.from('{}'));
  assert.equal(joinBytes(parts).toString(), want);
});

test('joinBytes copies shared and ordinary parts in order into a new buffer', () => {
  const object = sharedCopy(Buffer.from('{"metadata":{"name":"a"}}'));
  const parts = [Buffer.from('{"items":['), object.subarray(1), Buffer.alloc(0), Buffer.from(','), sharedCopy(Buffer.from('{}')), Buffer.from(']}')];
  const joined = joinBytes(parts);
  assert.equal(joined.toString(), '{"items":["metadata":{"name":"a"}},{}]}');
  assert.deepEqual(joined, Buffer.concat(parts));
  assert.ok(!(joined.buffer instanceof SharedArrayBuffer));
  object[2] = 0x4d; // the join is a copy: a later write to a part does not show in it
  assert.equal(joined.toString(), '{"items":["metadata":{"name":"a"}},{}]}');
});

test('joinBytes with the total given, and with nothing to join', () => {
  const parts = [Buffer.from('ab'), sharedCopy(Buffer.from('cd'))];
  assert.equal(joinBytes(parts, 4).toString(), 'abcd');
  assert.equal(joinBytes([]).length, 0);
  assert.equal(joinBytes([Buffer.alloc(0)]).length, 0);
});

test('joinBytes with parts of one byte, shared and ordinary, first, between and last', () => {
  const parts = [Buffer.from('['), sharedCopy(Buffer.from('1')), Buffer.from(','), sharedCopy(Buffer.from('22')), sharedCopy(Buffer.from(',')), Buffer.from('3'), Buffer.from(']')];
  assert.equal(joinBytes(parts).toString(), '[1,22,3]');
  assert.equal(joinBytes(parts.slice(1, 2)).toString(), '1');
});
