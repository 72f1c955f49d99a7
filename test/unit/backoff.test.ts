import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Backoff } from '../../src/reflector/backoff.ts';

test('waits double up to the cap, each jittered within its upper half', () => {
  const low = new Backoff(800, 30_000, () => 0);
  const high = new Backoff(800, 30_000, () => 0.999999);
  const lows = Array.from({ length: 8 }, () => low.next());
  const highs = Array.from({ length: 8 }, () => high.next());
  assert.deepEqual(lows, [400, 800, 1600, 3200, 6400, 12800, 15000, 15000]);
  for (const [i, h] of highs.entries()) assert.equal(Math.round(h), [800, 1600, 3200, 6400, 12800, 25600, 30000, 30000][i]);
  low.reset();
  assert.equal(low.next(), 400);
});
