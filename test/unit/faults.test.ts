// Regression tests for what test/integration/faults.test.ts found in Levee, each on the one piece
// of code at fault.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { runInNewContext } from 'node:vm';
import { setFlagsFromString } from 'node:v8';
import { EventWindow } from '../../src/store/events.ts';
import { Store } from '../../src/store/store.ts';
import { objectKey, type CachedObject } from '../../src/store/object.ts';
import { CacheWatcher } from '../../src/watch/watcher.ts';
import { WatcherRegistry } from '../../src/watch/registry.ts';
import { WatchClock } from '../../src/watch/clock.ts';
import { TimeoutResponse } from '../../src/http/timeoutwriter.ts';
import { parseLabelSelector } from '../../src/selectors/labels.ts';
import { parseFieldSelector } from '../../src/selectors/fields.ts';
import type { CachedResource } from '../../src/cache/cache.ts';
import { RecordedResponse } from '../support/recordedresponse.ts';
import { watchEnded } from '../support/watchstream.ts';

function obj(name: string, rv: number, bytes = 16): CachedObject {
  return { key: objectKey('n', name), namespace: 'n', name, resourceVersion: rv, labels: {}, fields: {}, item: Buffer.from(`{"metadata":{"name":"${name}","resourceVersion":"${rv}"},"pad":"${'x'.repeat(bytes)}"}`), typed: true };
}

test('an event that left the window is garbage at once, not kept until the array is compacted', async () => {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const w = new EventWindow({ minAgeMs: 1000 });
  const refs: Array<WeakRef<CachedObject>> = [];
  // A burst of big objects, then quiet: fewer than the 1,024 evictions that compact the array.
  for (let rv = 1; rv <= 100; rv++) {
    const o = obj(`big-${rv}`, rv, 100_000);
    refs.push(new WeakRef(o));
    w.push({ type: 'MODIFIED', object: o, prev: undefined, resourceVersion: rv, at: rv });
  }
  w.push({ type: 'MODIFIED', object: obj('small', 101), prev: undefined, resourceVersion: 101, at: 10_000 });
  assert.equal(w.size, 1);
  await new Promise((r) => setImmediate(r));
  gc();
  const alive = refs.flatMap((r, i) => (r.deref() === undefined ? [] : [i + 1]));
  assert.ok(alive.length <= 1, `evicted events are still reachable: ${alive.join(' ')}`);
  assert.deepEqual(w.since(100)!.map((e) => e.resourceVersion), [101]);
});


function resource(store: Store): CachedResource {
  const info = { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true, prefix: '/api/v1' };
  return { name: 'configmaps', info, store, watchers: new WatcherRegistry(store, new WatchClock(() => 0)) } as unknown as CachedResource;
}

const delivered = (res: RecordedResponse): string[] =>
  res.lines.map((l) => {
    const e = JSON.parse(l) as { type: string; object: { metadata: { name?: string; resourceVersion: string } } };
    return `${e.type} ${e.object.metadata.name ?? ''}@${e.object.metadata.resourceVersion}`;
  });

test('a relist sends its differences in resourceVersion order, then a bookmark; a watch without bookmarks is ended instead', async () => {
  const store = new Store();
  // Keys in one order (a < b < c < d), resourceVersions in another.
  store.replace([obj('a', 10), obj('b', 11), obj('c', 12)], 12);
  const r = resource(store);
  const all = { namespace: '', labels: parseLabelSelector(''), fields: parseFieldSelector(''), resourceVersion: 12 };
  const withBookmarks = new RecordedResponse();
  const w = new CacheWatcher(r, all, withBookmarks, { timeoutMs: 600_000, bookmarks: true });
  w.start();
  const without = new RecordedResponse();
  const v = new CacheWatcher(r, all, without, { timeoutMs: 600_000, bookmarks: false });
  v.start();

  // The upstream watch lost its window: a relist at 40 finds a changed at 31, b gone, d new at 20.
  store.replace([obj('a', 31), obj('c', 12), obj('d', 20)], 40);

  // Sorted, a client never sees a resourceVersion go back: in key order it saw a@31, then d@20.
  const got = delivered(withBookmarks);
  assert.deepEqual(got.slice(0, 3), ['ADDED d@20', 'MODIFIED a@31', 'DELETED b@40']);
  assert.match(got[3]!, /^BOOKMARK @40$/);
  // Without bookmarks the client could not learn that it is at 40: it is ended, resumes from 12,
  // older than the window now, which the apiserver answers (events or 410 Gone).
  assert.deepEqual([without.lines, without.ended, await watchEnded(v)], [[], true, 200]);
  assert.equal(r.watchers.size, 1);
  w.close();
});

class PlainResponse extends EventEmitter {
  headersSent = false;
  destroyed = false;
  writableFinished = false;
  statusCode = 200;
  body = '';
  writeHead(code: number): this {
    this.statusCode = code;
    this.headersSent = true;
    return this;
  }
  write(chunk: Buffer | string): boolean {
    this.headersSent = true;
    this.body += chunk.toString();
    return true;
  }
  end(chunk?: Buffer | string): this {
    if (chunk) this.body += chunk.toString();
    this.writableFinished = true;
    this.emit('finish');
    this.emit('close');
    return this;
  }
  destroy(): this {
    this.destroyed = true;
    this.emit('close');
    return this;
  }
}

test('a request past its deadline is answered 504 if nothing was written, cut if something was, and later writes go nowhere', async () => {
  const answer = (res: { writeHead(c: number): unknown; end(b: string): unknown }): void => {
    res.writeHead(504);
    res.end('timeout');
  };
  // Waiting on something that never comes (a review over a silent connection).
  const idle = new PlainResponse();
  const t = new TimeoutResponse(idle, 20, answer);
  t.waiting();
  await new Promise((r) => setTimeout(r, 60));
  assert.deepEqual([idle.statusCode, idle.body, t.timedOut, t.destroyed], [504, 'timeout', true, true]);
  t.writeHead(200);
  assert.equal(t.write('late'), false);
  t.end('late');
  t.destroy();
  assert.deepEqual([idle.statusCode, idle.body, idle.destroyed], [504, 'timeout', false]);

  // Halfway through an answer: cut, never ended as if whole.
  const begun = new PlainResponse();
  const u = new TimeoutResponse(begun, 20, answer);
  u.writeHead(200);
  u.write('{"items":[');
  u.waiting();
  await new Promise((r) => setTimeout(r, 60));
  assert.deepEqual([begun.destroyed, begun.writableFinished, begun.body], [true, false, '{"items":[']);

  // In time: nothing happens at the deadline.
  const quick = new PlainResponse();
  const q = new TimeoutResponse(quick, 20, answer);
  q.writeHead(200);
  q.end('ok');
  q.waiting();
  await new Promise((r) => setTimeout(r, 60));
  assert.deepEqual([quick.statusCode, quick.body, quick.destroyed, q.timedOut], [200, 'ok', false, false]);
});

test('the deadline counts from the request, not from its first wait', async () => {
  const late = new PlainResponse();
  const t = new TimeoutResponse(late, 100, (res) => res.end('timeout'));
  // Busy past the deadline without waiting: nothing can interrupt it, and nothing does.
  await new Promise((r) => setTimeout(r, 150));
  assert.equal(t.timedOut, false);
  // Its first wait finds the deadline passed: answered at once, not 100 ms later.
  t.waiting();
  await new Promise((r) => setTimeout(r, 50));
  assert.deepEqual([t.timedOut, late.body], [true, 'timeout']);
});
