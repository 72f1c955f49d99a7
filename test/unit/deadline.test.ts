// The request deadline (`?timeout=`) as the apiserver reads it: url.ParseQuery's first value and
// time.ParseDuration, with the messages kube-apiserver 1.37 answers for each of these queries.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseGoDuration, requestedTimeout } from '../../src/api/deadline.ts';
import { goQueryFirst } from '../../src/api/query.ts';
import { decideRead } from '../../src/serve/decide.ts';
import { parseRequestInfo } from '../../src/api/requestinfo.ts';

test('a deadline the apiserver cannot read is its 400, in its words', () => {
  const refused: Array<[query: string, message: string]> = [
    ['timeout=abc', 'time: invalid duration "abc"'],
    ['timeout=1', 'time: missing unit in duration "1"'],
    ['timeout=1e3s', 'time: unknown unit "e" in duration "1e3s"'],
    ['timeout=9999999999h', 'time: invalid duration "9999999999h"'],
    ['timeout=2562048h', 'time: invalid duration "2562048h"'],
    ['timeout=9223372036854775808ns', 'time: invalid duration "9223372036854775808ns"'],
    // "+" is a space in a query.
    ['timeout=+1s', 'time: invalid duration " 1s"'],
    ['timeout=1%B5s', 'time: unknown unit "\\xb5s" in duration "1\\xb5s"'],
    ['timeout=.s', 'time: invalid duration ".s"'],
    ['timeout=1.5.5s', 'time: missing unit in duration "1.5.5s"'],
    ['timeout=1%22s', 'time: unknown unit "\\"s" in duration "1\\"s"'],
    ['timeout=1%0As', 'time: unknown unit "\\x0as" in duration "1\\x0as"'],
    ['timeout=%E2%82%AC', 'time: invalid duration "\\xe2\\x82\\xac"'],
    // A pair with a bad escape or a semicolon is dropped: the next one counts.
    ['timeout=x%ZZ&timeout=abc2', 'time: invalid duration "abc2"'],
    ['timeout=abc;&timeout=abc3', 'time: invalid duration "abc3"'],
  ];
  for (const [query, message] of refused) {
    const status = requestedTimeout(query);
    assert.equal(typeof status, 'object', query);
    assert.deepEqual(status, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: `invalid timeout specified in the request URL - ${message}`, reason: 'BadRequest', code: 400 }, query);
  }
});

test('a deadline it can read: milliseconds, or none for zero, negative or absent ones', () => {
  assert.equal(requestedTimeout('timeout=1h1m1s'), 3_661_000);
  assert.equal(requestedTimeout('timeout=1%C2%B5s'), 0.001);
  assert.equal(requestedTimeout('timeout=1%CE%BCs'), 0.001);
  assert.equal(requestedTimeout('timeout=0.000000001s'), 0.000001);
  assert.equal(requestedTimeout('timeout=2562047h'), 2562047 * 3_600_000);
  assert.equal(requestedTimeout('timeout=9223372036854775807ns'), 9223372036854.775);
  for (const query of ['', 'timeout=', 'timeout=0', 'timeout=-1s', 'timeout=-0', 'timeout=x%ZZ', 'timeout=1;s', 'limit=1']) {
    assert.equal(requestedTimeout(query), undefined, query);
  }
  assert.deepEqual(parseGoDuration(Buffer.from('1.5h')), { ns: 5_400_000_000_000n });
  assert.deepEqual(parseGoDuration(Buffer.from('.5m')), { ns: 30_000_000_000n });
  assert.deepEqual(goQueryFirst('a=1&timeout=%41+b&timeout=2', 'timeout'), Buffer.from('A b'));
});

test('a LIST with a deadline shorter than Levee may wait for its cache is the apiserver\'s', () => {
  const decide = (url: string) => {
    const q = url.indexOf('?');
    const d = decideRead(
      { info: parseRequestInfo('GET', url), query: new URLSearchParams(url.slice(q + 1)), accept: undefined, userAgent: undefined, impersonating: false },
      { cached: true, synced: true, namespaced: true, consistentReads: 'verify' },
    );
    return d.source === 'cache' ? 'cache' : d.reason;
  };
  assert.equal(decide('/api/v1/namespaces/a/pods?resourceVersion=0&timeout=1%C2%B5s'), 'parameter');
  assert.equal(decide('/api/v1/namespaces/a/pods?resourceVersion=0&timeout=2999ms'), 'parameter');
  assert.equal(decide('/api/v1/namespaces/a/pods?resourceVersion=0&timeout=3s'), 'cache');
  assert.equal(decide('/api/v1/namespaces/a/pods?resourceVersion=0&timeout=32s'), 'cache');
  assert.equal(decide('/api/v1/namespaces/a/pods?resourceVersion=0&timeout=0'), 'cache');
  assert.equal(decide('/api/v1/namespaces/a/pods?resourceVersion=0&timeout=-1s'), 'cache');
});
