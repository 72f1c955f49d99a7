// A consistent watch-list served from the cache (serve/watch.ts): its initial events go out before
// the proof that the cache is as new as the apiserver, and only its end bookmark waits for it. And
// what a watch starts with (a watch-list's initial state, or the events since a resourceVersion)
// is written as the client reads it, however large.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Store } from '../../src/store/store.ts';
import { objectKey, type CachedObject } from '../../src/store/object.ts';
import { WatcherRegistry } from '../../src/watch/registry.ts';
import { WatchClock } from '../../src/watch/clock.ts';
import { parseLabelSelector } from '../../src/selectors/labels.ts';
import { parseFieldSelector } from '../../src/selectors/fields.ts';
import { serveWatch } from '../../src/serve/watch.ts';
import type { CacheWatcher } from '../../src/watch/watcher.ts';
import type { CachedResource } from '../../src/cache/cache.ts';
import type { WatchPlan } from '../../src/serve/decide.ts';
import type { Unproven } from '../../src/cache/consistency.ts';
import { RecordedResponse } from '../support/recordedresponse.ts';
import { watchEnded } from '../support/watchstream.ts';

function obj(name: string, rv: number): CachedObject {
  return { key: objectKey('n', name), namespace: 'n', name, resourceVersion: rv, labels: {}, fields: {}, item: Buffer.from(`{"metadata":{"name":"${name}","resourceVersion":"${rv}"}}`), typed: true };
}


interface WatchLine {
  type: string;
  object: { metadata?: { name?: string; resourceVersion?: string; annotations?: Record<string, string> }; code?: number; reason?: string; message?: string; details?: { causes?: Array<{ reason: string }> } };
}

const delivered = (res: RecordedResponse): string[] =>
  res.lines.map((l) => {
    const e = JSON.parse(l) as WatchLine;
    if (e.type === 'ERROR') return `ERROR ${e.object.code} ${e.object.reason}`;
    const end = e.object.metadata?.annotations?.['k8s.io/initial-events-end'] === 'true' ? ' end' : '';
    return `${e.type} ${e.object.metadata?.name ?? ''}@${e.object.metadata?.resourceVersion}${end}`;
  });

/** A cached resource whose proof the test settles: it learns `revision`, then ends as told. */
function setup(): { store: Store; r: CachedResource; clock: WatchClock; at: (ms: number) => void; results: string[]; settle: (revision: number, outcome: true | Unproven) => void; proofTimeoutMs: () => number | undefined } {
  const store = new Store();
  store.replace([obj('a', 10), obj('b', 11)], 12);
  let settle!: (revision: number, outcome: true | Unproven) => void;
  let proofTimeoutMs: number | undefined;
  const consistency = {
    prove: (_arrivedAt: bigint, timeoutMs: number, onRevision?: (rv: number) => void): Promise<true | Unproven> =>
      new Promise((resolve) => {
        proofTimeoutMs = timeoutMs;
        settle = (revision, outcome) => {
          onRevision?.(revision);
          resolve(outcome);
        };
      }),
  };
  const info = { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true, prefix: '/api/v1' };
  let now = 0;
  const clock = new WatchClock(() => now, { unref: true });
  const r = { name: 'configmaps', info, store, watchers: new WatcherRegistry(store, clock), consistency } as unknown as CachedResource;
  return { store, r, clock, at: (ms) => (now = ms), results: [], settle: (revision, outcome) => settle(revision, outcome), proofTimeoutMs: () => proofTimeoutMs };
}

const plan: WatchPlan = {
  namespace: '',
  labels: parseLabelSelector(''),
  fields: parseFieldSelector(''),
  resourceVersion: 0,
  initial: 'consistent',
  initialEventsEnd: true,
  allowBookmarks: true,
  timeoutSeconds: 10,
  representation: { as: 'object', media: 'json' },
};

async function start(s: ReturnType<typeof setup>, res: RecordedResponse): Promise<CacheWatcher> {
  const observer = { consistentRead: (_r: string, result: string) => void s.results.push(result), consistentBytes: () => undefined };
  const served = await serveWatch(s.r, plan, res, process.hrtime.bigint(), observer);
  assert.ok(!('forward' in served), 'forwarded');
  return served as CacheWatcher;
}

const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

// A server that waited for the proof first would never answer here: the test settles the proof
// only after the answer began. The timeout turns that into a failure rather than a hang.
test('a consistent watch-list sends its initial events at once, and its end bookmark once the store is proven as new as the apiserver', { timeout: 10_000 }, async () => {
  const s = setup();
  const res = new RecordedResponse();
  const watcher = await start(s, res);
  // The proof is under way: the state as the store holds it has gone out, with no bookmark.
  assert.equal(res.statusCode, 200);
  assert.deepEqual(delivered(res), ['ADDED a@10', 'ADDED b@11']);
  // What changes meanwhile follows, as the apiserver sends changes before its end bookmark; a
  // bookmark due meanwhile is not sent ahead of the end of the initial events.
  s.store.apply('MODIFIED', obj('a', 13));
  s.store.apply('ADDED', obj('c', 14));
  watcher.bookmark();
  assert.deepEqual(delivered(res).slice(2), ['MODIFIED a@13', 'ADDED c@14']);
  // The deadline (10 s) begins once the initial events end, as the apiserver's begins after its
  // wait for a fresh cache: a proof that takes longer does not end the watch.
  s.at(12_000);
  s.clock.tick();
  assert.equal(res.ended, false);
  // The apiserver is at 15; its bookmark brings the store to 20, and the proof holds.
  s.store.bookmark(20);
  s.settle(15, true);
  await turn();
  assert.deepEqual(delivered(res).slice(4), ['BOOKMARK @20 end']);
  assert.deepEqual(s.results, ['verified']);
  // Then an ordinary watch: events, and plain bookmarks.
  s.store.apply('DELETED', obj('b', 21));
  watcher.bookmark();
  assert.deepEqual(delivered(res).slice(5), ['DELETED b@21', 'BOOKMARK @21']);
  s.at(21_998);
  s.clock.tick();
  assert.equal(res.ended, false);
  s.at(22_000);
  s.clock.tick();
  assert.equal(await watchEnded(watcher), 200);
  assert.ok(res.ended);
});

test('a consistent watch-list whose proof does not come ends with the apiserver\'s 504 after its initial events', { timeout: 10_000 }, async () => {
  const s = setup();
  const res = new RecordedResponse();
  const watcher = await start(s, res);
  s.settle(15, 'consistency-unproven');
  assert.equal(await watchEnded(watcher), 200);
  assert.deepEqual(delivered(res), ['ADDED a@10', 'ADDED b@11', 'ERROR 504 Timeout']);
  const error = JSON.parse(res.lines.at(-1)!) as WatchLine;
  assert.equal(error.object.message, 'Too large resource version: 15, current: 12');
  assert.deepEqual(error.object.details?.causes?.map((c) => c.reason), ['ResourceVersionTooLarge']);
  assert.ok(res.ended);
  assert.deepEqual(s.results, ['failed']);
});

// A 504 now would send the client back for its whole initial state a second later; a healthy
// upstream watch brings the store past any revision within the apiserver's periodic bookmark, about
// a minute, even if every probe failed.
test('a consistent watch-list whose initial events have gone out waits for its proof past the apiserver\'s periodic bookmark, not 3 s', { timeout: 10_000 }, async () => {
  const s = setup();
  const watcher = await start(s, new RecordedResponse());
  const bound = s.proofTimeoutMs();
  assert.ok(bound !== undefined && bound > 61_250, `proof bound ${bound} ms`);
  s.settle(15, true);
  watcher.close();
});

/** A client that reads only when told: past 64 KiB unread, write() asks to wait, and 'drain' comes with read(). */
class SlowClient extends RecordedResponse {
  unread = 0;
  override write(chunk: Buffer | string): boolean {
    super.write(chunk);
    this.unread += chunk.length;
    return this.unread < 64 * 1024;
  }
  read(): void {
    this.unread = 0;
    this.emit('drain');
  }
  /** Reads as the watch writes, until `lines` lines have come or it has ended. */
  async readUntil(lines: number): Promise<void> {
    for (let i = 0; i < 1000 && !this.ended && this.lines.length < lines; i++) {
      this.read();
      await turn();
    }
  }
}

// 512 KiB each: 48 of them are 24 MiB, past the 16 MiB of unsent events that close a watcher whose
// client does not keep up.
const value = 'x'.repeat(512 * 1024);
const large = (name: string, rv: number): CachedObject => ({ ...obj(name, rv), item: Buffer.from(JSON.stringify({ metadata: { name, resourceVersion: String(rv) }, data: { v: value } })) });
const padded = (i: number): string => `o${String(i).padStart(2, '0')}`;

test('a watch-list\'s initial state larger than a watcher may queue goes out whole as the client reads it, then its end bookmark, then what changed meanwhile', { timeout: 10_000 }, async () => {
  const s = setup();
  s.store.replace(Array.from({ length: 48 }, (_, i) => large(padded(i), 100 + i)), 200);
  const res = new SlowClient();
  // Served as a consistent read (the cache policy): its initial state's bytes are counted once sent.
  const counted: number[] = [];
  const observer = { consistentRead: () => undefined, consistentBytes: (_r: string, _s: string, bytes: number) => void counted.push(bytes) };
  const served = await serveWatch(s.r, { ...plan, initial: 'any', consistentRead: true }, res, process.hrtime.bigint(), observer);
  assert.ok(!('forward' in served), 'forwarded');
  // The client has read nothing yet: a batch is out, the rest waits for it.
  assert.ok(res.lines.length < 48, `${res.lines.length} lines written before the client read any`);
  s.store.apply('MODIFIED', large('o00', 201));
  await res.readUntil(50);
  assert.equal(res.ended, false, `the watch ended after ${res.lines.length} lines`);
  assert.deepEqual(delivered(res), [...Array.from({ length: 48 }, (_, i) => `ADDED ${padded(i)}@${100 + i}`), 'BOOKMARK @200 end', 'MODIFIED o00@201']);
  assert.deepEqual(counted, [res.lines.slice(0, 48).reduce((n, l) => n + Buffer.byteLength(l) + 1, 0)]);
  (served as CacheWatcher).close();
});

test('a watch from a resourceVersion with more changes since than a watcher may queue gets them all as the client reads them, then what follows', { timeout: 10_000 }, async () => {
  const s = setup();
  for (let i = 0; i < 48; i++) s.store.apply('ADDED', large(padded(i), 13 + i));
  const res = new SlowClient();
  const observer = { consistentRead: () => undefined, consistentBytes: () => undefined };
  const served = await serveWatch(s.r, { ...plan, initial: undefined, initialEventsEnd: false, resourceVersion: 12 }, res, process.hrtime.bigint(), observer);
  assert.ok(!('forward' in served), 'forwarded');
  assert.ok(res.lines.length < 48, `${res.lines.length} lines written before the client read any`);
  s.store.apply('DELETED', obj('a', 61));
  await res.readUntil(49);
  assert.equal(res.ended, false, `the watch ended after ${res.lines.length} lines`);
  assert.deepEqual(delivered(res), [...Array.from({ length: 48 }, (_, i) => `ADDED ${padded(i)}@${13 + i}`), 'DELETED a@61']);
  (served as CacheWatcher).close();
});
