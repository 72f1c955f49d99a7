import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BookmarkProbes } from '../../src/reflector/probes.ts';

/** Probes the test settles by hand, on a clock it moves (node:test's mock timers). */
function harness(opts: { busy?: () => boolean; canProbe?: () => boolean } = {}) {
  const open: (() => void)[] = [];
  const startedAt: number[] = [];
  const probes = new BookmarkProbes({
    open: () => {
      startedAt.push(Date.now());
      return new Promise<void>((resolve) => open.push(resolve));
    },
    canProbe: opts.canProbe ?? (() => true),
    busy: opts.busy ?? (() => false),
    spacingMs: 1000,
    lingerMs: 5000,
    now: () => Date.now(),
  });
  return { probes, open, startedAt };
}

const flush = (): Promise<void> => new Promise((r) => setImmediate(r));

test('a reader begins a probe at once; readers within the spacing share it and settle with it', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 });
  const h = harness();
  let settled = 0;
  void h.probes.soon().then(() => settled++);
  t.mock.timers.tick(300);
  void h.probes.soon().then(() => settled++);
  assert.deepEqual(h.startedAt, [0]);
  h.open[0]!();
  await flush();
  assert.equal(settled, 2);
  h.probes.stop();
});

test('while readers keep asking, a probe begins every spacing, ripe for the next one; after the linger none', (t) => {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 });
  const h = harness();
  void h.probes.soon();
  for (let i = 0; i < 8; i++) t.mock.timers.tick(1000);
  // One reader at 0: probes at 0..5 s (the linger), none after.
  assert.deepEqual(h.startedAt, [0, 1000, 2000, 3000, 4000, 5000]);
  // A reader now begins one at once, and the cadence again.
  void h.probes.soon();
  t.mock.timers.tick(1000);
  assert.deepEqual(h.startedAt.slice(6), [8000, 9000]);
  h.probes.stop();
  t.mock.timers.tick(5000);
  assert.equal(h.startedAt.length, 8);
});

test('a busy store gets no speculative probe, but a waiting reader gets one every spacing and a new reader one at once', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 });
  const h = harness({ busy: () => true });
  void h.probes.soon(); // probe at 0
  h.open[0]!();
  await flush();
  t.mock.timers.tick(2500);
  assert.deepEqual(h.startedAt, [0], 'nobody waits and the store moves by itself');
  void h.probes.soon(); // at 2500: at once, though a skipped cadence looked at 2000
  assert.deepEqual(h.startedAt, [0, 2500]);
  t.mock.timers.tick(1000);
  assert.deepEqual(h.startedAt, [0, 2500, 3500], 'a reader still waits: the cadence goes on');
  h.probes.stop();
});

test('stop settles every waiting reader and begins nothing more', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 });
  let canProbe = true;
  const h = harness({ canProbe: () => canProbe });
  let settled = false;
  void h.probes.soon().then(() => (settled = true));
  h.probes.stop();
  await flush();
  assert.equal(settled, true);
  t.mock.timers.tick(3000);
  assert.deepEqual(h.startedAt, [0]);
  canProbe = false;
  const h2 = harness({ canProbe: () => canProbe });
  await h2.probes.soon(); // a relisting store: settles at once, nothing begun
  assert.deepEqual(h2.startedAt, []);
});
