import { test } from 'node:test';
import assert from 'node:assert/strict';
import { shouldTrim } from '../../src/heaptrim.ts';

const MB = 1024 * 1024;

test('empty heap left by a burst is given back once the loop is idle', () => {
  // 10,000 watches opened at once, then idle: 160 MB held, 93 MB used.
  assert.equal(shouldTrim({ total: 160 * MB, used: 93 * MB }, 0.01, 0, Infinity), true);
});

test('no trim while the loop is busy, more often than once a minute, or for little empty heap', () => {
  const fragmented = { total: 160 * MB, used: 93 * MB };
  assert.equal(shouldTrim(fragmented, 0.2, 0, Infinity), false);
  assert.equal(shouldTrim(fragmented, 0.01, 0, 30_000), false);
  assert.equal(shouldTrim({ total: 60 * MB, used: 50 * MB }, 0.01, 0, Infinity), false);
  // 20 MB empty of a 400 MB heap is ordinary slack, not a burst's leftovers.
  assert.equal(shouldTrim({ total: 400 * MB, used: 380 * MB }, 0.01, 0, Infinity), false);
});

test('no trim while requests or watch events are served, however light the loop', () => {
  // 10,000 watches receiving 1,000 events a second keep the loop under 5 % busy.
  assert.equal(shouldTrim({ total: 160 * MB, used: 93 * MB }, 0.03, 1, Infinity), false);
});
