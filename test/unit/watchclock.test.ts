import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WatchClock, type Sleeper } from '../../src/watch/clock.ts';
import { CacheWatcher } from '../../src/watch/watcher.ts';
import { WatcherRegistry } from '../../src/watch/registry.ts';
import { Store } from '../../src/store/store.ts';
import { objectKey, type CachedObject } from '../../src/store/object.ts';
import { parseLabelSelector } from '../../src/selectors/labels.ts';
import { parseFieldSelector } from '../../src/selectors/fields.ts';
import type { CachedResource } from '../../src/cache/cache.ts';
import { RecordedResponse } from '../support/recordedresponse.ts';
import { watchEnded } from '../support/watchstream.ts';

class At implements Sleeper {
  slot = -1;
  wakeAt: number;
  readonly name: string;
  readonly #log: string[];
  constructor(wakeAt: number, name: string, log: string[]) {
    this.wakeAt = wakeAt;
    this.name = name;
    this.#log = log;
  }
  wake(): void {
    this.#log.push(this.name);
  }
}

test('the clock wakes each sleeper once it is due, earliest first, and never a cancelled one', () => {
  let now = 0;
  const clock = new WatchClock(() => now);
  const log: string[] = [];
  const times = [50, 10, 40, 30, 20, 60, 70, 5];
  const sleepers = times.map((t) => new At(t, `s${t}`, log));
  for (const s of sleepers) clock.schedule(s);
  clock.cancel(sleepers[2]!); // s40
  const s30 = sleepers[3]!;
  s30.wakeAt = 65;
  clock.schedule(s30);
  assert.equal(clock.size, 7);

  now = 3; // 1 ms short of s5 once the timer resolution is allowed for
  clock.tick();
  assert.deepEqual(log, []);
  now = 20;
  clock.tick();
  assert.deepEqual(log, ['s5', 's10', 's20']);
  now = 100;
  clock.tick();
  assert.deepEqual(log, ['s5', 's10', 's20', 's50', 's60', 's30', 's70']);
  assert.equal(clock.size, 0);
  assert.equal(sleepers.every((s) => s.slot === -1), true);
});

test('the clock keeps its order through many schedules and cancels', () => {
  let now = 0;
  const clock = new WatchClock(() => now, { wakesPerTurn: Infinity });
  const log: string[] = [];
  const live = new Map<string, At>();
  let seed = 7;
  const rand = (n: number): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
  for (let i = 0; i < 2000; i++) {
    const s = new At(rand(10_000), `s${i}`, log);
    clock.schedule(s);
    live.set(s.name, s);
    if (rand(3) === 0) {
      const victim = [...live.values()][rand(live.size)]!;
      clock.cancel(victim);
      live.delete(victim.name);
    }
  }
  now = 10_000;
  clock.tick();
  const expected = [...live.values()].sort((a, b) => a.wakeAt - b.wakeAt).map((s) => s.wakeAt);
  assert.deepEqual(log.map((n) => live.get(n)!.wakeAt), expected);
});

test("sleepers due together wake a bounded number per turn, with the event loop's I/O between", async () => {
  const clock = new WatchClock(undefined, { wakesPerTurn: 100 });
  const log: string[] = [];
  const at = clock.now() + 5;
  const sleepers = Array.from({ length: 1000 }, (_, i) => new At(at, `s${i}`, log));
  for (const s of sleepers) clock.schedule(s);
  // Asked for in the first turn that wakes any: a socket's data would be read in the same place.
  let firstTurn = -1;
  let between = -1;
  const first = sleepers[0]!;
  first.wake = () => {
    log.push(first.name);
    firstTurn = log.length;
    setImmediate(() => (between = log.length));
  };
  while (log.length < sleepers.length) await new Promise((resolve) => setTimeout(resolve, 5));
  assert.equal(firstTurn, 1);
  assert.equal(between, 100, 'the first turn woke 100, then the loop went on');
  assert.deepEqual(new Set(log).size, 1000, 'every sleeper woke, once');
  assert.equal(clock.size, 0);
});

test('the clock arms a real timer for its earliest sleeper', async () => {
  const clock = new WatchClock();
  const log: string[] = [];
  const late = new At(clock.now() + 10_000, 'late', log);
  const soon = new At(clock.now() + 20, 'soon', log);
  clock.schedule(late);
  clock.schedule(soon);
  await new Promise((resolve) => setTimeout(resolve, 80));
  assert.deepEqual(log, ['soon']);
  // Nothing left to wait for: no timer keeps the process alive.
  clock.cancel(late);
  assert.equal(clock.size, 0);
});

test('a wake-up further away than setTimeout can wait is kept, not brought forward', async () => {
  const clock = new WatchClock();
  const log: string[] = [];
  const warnings: string[] = [];
  const onWarning = (w: Error): void => void warnings.push(w.name);
  process.on('warning', onWarning);
  const far = new At(clock.now() + 40 * 24 * 3600 * 1000, 'far', log);
  clock.schedule(far);
  await new Promise((resolve) => setTimeout(resolve, 50));
  process.off('warning', onWarning);
  clock.cancel(far);
  assert.deepEqual([log, warnings], [[], []]);
});

function pod(name: string, rv: number, node: string): CachedObject {
  return { key: objectKey('n', name), namespace: 'n', name, resourceVersion: rv, labels: {}, fields: { 'spec.nodeName': node }, item: Buffer.from(`{"metadata":{"name":"${name}"}}`), typed: true };
}


function resource(clock: WatchClock): CachedResource {
  const store = new Store({ fieldIndexes: ['spec.nodeName'] });
  store.replace([pod('a', 5, 'node-1')], 5);
  const info = { group: '', version: 'v1', resource: 'pods', kind: 'Pod', namespaced: true, prefix: '/api/v1' };
  // Only what a watcher touches: its resource's kind, store and watchers.
  return { name: 'pods', info, store, watchers: new WatcherRegistry(store, clock) } as unknown as CachedResource;
}

const types = (res: RecordedResponse): string[] => res.lines.map((l) => (JSON.parse(l) as { type: string }).type);

test('a watcher bookmarks every minute and 2 s before its deadline, then ends at the deadline', async () => {
  let now = 1_000;
  const clock = new WatchClock(() => now);
  const r = resource(clock);
  const res = new RecordedResponse();
  const filter = { namespace: '', labels: parseLabelSelector(''), fields: parseFieldSelector('spec.nodeName=node-1'), resourceVersion: 5 };
  const w = new CacheWatcher(r, filter, res, { timeoutMs: 150_000, bookmarks: true });
  w.start();
  assert.equal(r.watchers.size, 1);

  now = 1_000 + 59_990;
  clock.tick();
  assert.deepEqual(types(res), []);
  now = 1_000 + 60_000;
  clock.tick();
  r.store.apply('MODIFIED', pod('a', 7, 'node-1'));
  now = 1_000 + 120_000;
  clock.tick();
  now = 1_000 + 148_000;
  clock.tick();
  assert.deepEqual(types(res), ['BOOKMARK', 'MODIFIED', 'BOOKMARK', 'BOOKMARK']);
  assert.equal((JSON.parse(res.lines[3]!) as { object: { metadata: { resourceVersion: string } } }).object.metadata.resourceVersion, '7');
  assert.equal(res.ended, false);

  now = 1_000 + 150_000;
  clock.tick();
  assert.equal(res.ended, true);
  assert.equal(await watchEnded(w), 200);
  assert.equal(r.watchers.size, 0);
  assert.equal(clock.size, 0);
  // Gone from the registry: later events reach nobody.
  r.store.apply('MODIFIED', pod('a', 8, 'node-1'));
  assert.equal(res.lines.length, 4);
});

test('a watcher without bookmarks only ends; one whose client leaves stops at once', async () => {
  let now = 0;
  const clock = new WatchClock(() => now);
  const r = resource(clock);
  const all = { namespace: '', labels: parseLabelSelector(''), fields: parseFieldSelector(''), resourceVersion: 5 };

  const quiet = new RecordedResponse();
  const q = new CacheWatcher(r, all, quiet, { timeoutMs: 120_000, bookmarks: false });
  q.start();
  const gone = new RecordedResponse();
  const g = new CacheWatcher(r, all, gone, { timeoutMs: 120_000, bookmarks: true });
  g.start();
  assert.deepEqual([r.watchers.size, clock.size], [2, 2]);

  gone.emit('close');
  assert.equal(await watchEnded(g), 200);
  assert.deepEqual([r.watchers.size, clock.size], [1, 1]);

  now = 119_000;
  clock.tick();
  assert.deepEqual([types(quiet), quiet.ended], [[], false]);
  now = 120_000;
  clock.tick();
  assert.equal(quiet.ended, true);
  assert.equal(await watchEnded(q), 200);
  assert.deepEqual([r.watchers.size, clock.size, types(gone)], [0, 0, []]);
});
