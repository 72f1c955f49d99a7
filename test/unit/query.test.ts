// The query as the apiserver reads it (Go's url.ParseQuery), not as URLSearchParams does.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { goQuery, goQueryFirst, goQueryPairs } from '../../src/api/query.ts';
import { parseRequestInfo } from '../../src/api/requestinfo.ts';

test('a pair holding a semicolon or a malformed escape is dropped, the rest kept', () => {
  const pairs = (raw: string) => [...goQuery(raw)];
  assert.deepEqual(pairs('watch=1;x=y&limit=2'), [['limit', '2']]);
  assert.deepEqual(pairs('a=%zz&a=1&b=%4'), [['a', '1']]);
  assert.deepEqual(pairs('labelSelector=app+in+(a%2Cb)&&x&=y'), [['labelSelector', 'app in (a,b)'], ['x', ''], ['', 'y']]);
  assert.deepEqual(pairs('k=%C3%A9&v=%ff'), [['k', 'é'], ['v', '\ufffd']]);
});

test('a watch parameter the apiserver drops makes no watch', () => {
  assert.equal(parseRequestInfo('GET', '/api/v1/pods?watch=1;x=y').verb, 'list');
  assert.equal(parseRequestInfo('GET', '/api/v1/pods?watch=%zz').verb, 'list');
  assert.equal(parseRequestInfo('GET', '/api/v1/pods?watch=%zz&watch=1').verb, 'watch');
  assert.equal(parseRequestInfo('GET', '/api/v1/pods?fieldSelector=metadata.name%3Dp;').name, '');
});

test('a plain query, read without unescaping, gives what reading its bytes gives', () => {
  // The read of every request takes a shortcut for queries with nothing to unescape; any query
  // must come out as url.ParseQuery's pairs, decoded as UTF-8.
  const viaBytes = (raw: string) => goQueryPairs(raw).map(([k, v]) => [k.toString('utf8'), v.toString('utf8')]);
  const chars = fc.constantFrom(...'aZ09=&&==-._~!$*(),/:@?%+;  é\u00ff'.split(''), '%41', '%2', '%zz');
  fc.assert(
    fc.property(fc.array(chars, { maxLength: 40 }), (parts) => {
      const raw = parts.join('');
      assert.deepEqual([...goQuery(raw)], viaBytes(raw));
    }),
    { numRuns: 5000 },
  );
});

test('a parameter is found by name whether written out or escaped, and absent otherwise', () => {
  assert.equal(goQueryFirst('limit=1&timeout=5s', 'timeout')?.toString(), '5s');
  assert.equal(goQueryFirst('%74imeout=7s', 'timeout')?.toString(), '7s');
  assert.equal(goQueryFirst('time+out=1s&limit=1', 'timeout'), undefined);
  assert.equal(goQueryFirst('time+out=1s', 'time out')?.toString(), '1s');
});

test('a parameter looked up by name is what reading every pair finds, whatever the query holds', () => {
  // The lookup skips reading the query when no name can be the one asked for; it must never skip one that is.
  const chars = fc.constantFrom(...'timeout=&&==;+ %'.split(''), '%74', '%2', 'timeout', 'timeout=', '%3D', 'a=b');
  const viaPairs = (raw: string, key: string) => goQueryPairs(raw).find(([k]) => k.toString('latin1') === key)?.[1];
  fc.assert(
    fc.property(fc.array(chars, { maxLength: 12 }), fc.constantFrom('timeout', 'time out', 'a'), (parts, key) => {
      const raw = parts.join('');
      assert.deepEqual(goQueryFirst(raw, key), viaPairs(raw, key));
    }),
    { numRuns: 5000 },
  );
});
