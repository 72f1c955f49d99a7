import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConsistencyProof, type BookmarkSource } from '../../src/cache/consistency.ts';
import { Store } from '../../src/store/store.ts';

/** A revision source whose LISTs the test answers by hand, each with the next revision. */
function lists(): { source: () => Promise<number>; starts: bigint[]; answer: () => void; pending: () => number } {
  const starts: bigint[] = [];
  const waiting: (() => void)[] = [];
  let revision = 100;
  return {
    starts,
    source: () => {
      starts.push(process.hrtime.bigint());
      const rv = ++revision;
      return new Promise<number>((resolve) => waiting.push(() => resolve(rv)));
    },
    answer: () => waiting.shift()!(),
    pending: () => waiting.length,
  };
}

const noBookmarks: BookmarkSource = { canProbe: false, bookmarkSoon: () => Promise.resolve() };
const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

test('readers that arrive while a LIST is in flight share the next one, never the earlier one', async () => {
  const l = lists();
  const proof = new ConsistencyProof(l.source, new Store(), noBookmarks, 0);
  const first = proof.current(process.hrtime.bigint());
  // Arrived after the first LIST began: it may have missed a write these readers saw complete.
  const later = Array.from({ length: 5 }, () => proof.current(process.hrtime.bigint()));
  await tick();
  assert.equal(l.starts.length, 1);
  l.answer();
  assert.equal(await first, 101);
  await new Promise((r) => setTimeout(r, 5));
  assert.equal(l.starts.length, 2, 'one more LIST for the five, not five');
  l.answer();
  assert.deepEqual(await Promise.all(later), [102, 102, 102, 102, 102]);
});

test('a reader that arrived before the LIST in flight began shares it', async () => {
  const l = lists();
  const proof = new ConsistencyProof(l.source, new Store(), noBookmarks, 0);
  const arrived = process.hrtime.bigint();
  const a = proof.current(process.hrtime.bigint());
  const b = proof.current(arrived);
  l.answer();
  assert.deepEqual(await Promise.all([a, b]), [101, 101]);
  assert.equal(l.starts.length, 1);
});

test('once the spacing has passed, the next LIST begins when the one in flight is answered, not at a later timer', async () => {
  const l = lists();
  const spacingMs = 10;
  const proof = new ConsistencyProof(l.source, new Store(), noBookmarks, spacingMs);
  const first = proof.current(process.hrtime.bigint());
  const later = proof.current(process.hrtime.bigint());
  await new Promise((r) => setTimeout(r, spacingMs + 5));
  assert.equal(l.starts.length, 1);
  // A timer set now, as the answer comes, runs in the event loop's next timers phase: a next LIST
  // waiting for a timer of its own would not have begun by then.
  l.answer();
  const startsAtTimer = await new Promise<number>((r) => setTimeout(() => r(l.starts.length), 0));
  assert.equal(await first, 101);
  assert.equal(startsAtTimer, 2, 'the next LIST had not begun by the next timer');
  l.answer();
  assert.equal(await later, 102);
});

test('LISTs begin no closer together than the spacing, however readers arrive', async () => {
  const l = lists();
  const spacingMs = 30;
  const proof = new ConsistencyProof(l.source, new Store(), noBookmarks, spacingMs);
  const answered: Promise<number>[] = [];
  // A steady stream of readers, each LIST answered at once: without the spacing every reader
  // arriving after the last answer would begin one.
  for (let i = 0; i < 40; i++) {
    answered.push(proof.current(process.hrtime.bigint()));
    await new Promise((r) => setTimeout(r, 2));
    while (l.pending() > 0) l.answer();
  }
  let settled = false;
  const all = Promise.all(answered).then(() => (settled = true));
  while (!settled) {
    await new Promise((r) => setTimeout(r, 5));
    while (l.pending() > 0) l.answer();
  }
  await all;
  assert.ok(l.starts.length >= 2 && l.starts.length < 40, `${l.starts.length} LISTs for 40 readers`);
  for (let i = 1; i < l.starts.length; i++) {
    const gapMs = Number(l.starts[i]! - l.starts[i - 1]!) / 1e6;
    assert.ok(gapMs >= spacingMs - 1, `LIST ${i} began ${gapMs.toFixed(1)} ms after the one before`);
  }
});

test('the proof holds once the store reaches the revision, and fails when it cannot', async () => {
  const l = lists();
  const store = new Store();
  store.replace([], 50);
  let probes = 0;
  const bookmarks: BookmarkSource = {
    canProbe: true,
    bookmarkSoon: () => {
      probes++;
      // The apiserver's bookmark: its cache's revision, at or past the LIST's.
      store.bookmark(101);
      return Promise.resolve();
    },
  };
  const proof = new ConsistencyProof(l.source, store, bookmarks, 0);
  const proven = proof.prove(process.hrtime.bigint(), 1000);
  l.answer();
  assert.equal(await proven, true);
  assert.equal(probes, 1);

  const stuck = new ConsistencyProof(l.source, store, noBookmarks, 0);
  const unproven = stuck.prove(process.hrtime.bigint(), 20);
  l.answer(); // 102, past the store, which nothing brings further
  assert.equal(await unproven, 'consistency-unproven');
});

test('a proof and a wait for a resourceVersion end by their bound when the LIST never answers', { timeout: 10_000 }, async () => {
  const l = lists();
  const store = new Store();
  store.replace([], 50);
  // The LIST went out over a connection gone silent: it is answered only after both bounds.
  const proof = new ConsistencyProof(l.source, store, noBookmarks, 0);
  const proven = proof.prove(process.hrtime.bigint(), 30);
  const reached = proof.reach(60, 30);
  const late = setTimeout(() => {
    while (l.pending() > 0) l.answer();
  }, 2000);
  try {
    assert.deepEqual(await Promise.all([proven, reached]), ['consistency-probe-failed', false]);
  } finally {
    clearTimeout(late);
  }
  // The LIST is still shared by whoever arrives while it is in flight.
  assert.equal(l.pending(), 1);
  l.answer();
});
