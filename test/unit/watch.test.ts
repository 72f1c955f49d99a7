import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventWindow, type StoreEvent } from '../../src/store/events.ts';
import { deliveredAs, type WatchFilter } from '../../src/watch/watcher.ts';
import { objectKey, type CachedObject } from '../../src/store/object.ts';
import { parseLabelSelector } from '../../src/selectors/labels.ts';
import { parseFieldSelector } from '../../src/selectors/fields.ts';
import { eventLine } from '../../src/watch/encode.ts';
import { RecentFrames } from '../../src/watch/recentframes.ts';
import type { ResourceInfo } from '../../src/api/resource.ts';

function obj(name: string, rv: number, labels: Record<string, string>): CachedObject {
  return { key: objectKey('n', name), namespace: 'n', name, resourceVersion: rv, labels, fields: {}, item: Buffer.from('{}'), typed: true };
}
function ev(type: StoreEvent['type'], o: CachedObject, prev?: CachedObject, at = 0): StoreEvent {
  return { type, object: o, prev, resourceVersion: o.resourceVersion, at };
}

test('selector transitions as the apiserver\'s cacher delivers them', () => {
  const f: WatchFilter = { namespace: 'n', labels: parseLabelSelector('app=a'), fields: parseFieldSelector(''), resourceVersion: 0 };
  const a = obj('x', 2, { app: 'a' });
  const b = obj('x', 3, { app: 'b' });
  assert.equal(deliveredAs(f, ev('ADDED', a)), 'ADDED');
  assert.equal(deliveredAs(f, ev('ADDED', b)), undefined);
  assert.equal(deliveredAs(f, ev('MODIFIED', b, a)), 'DELETED');
  assert.equal(deliveredAs(f, ev('MODIFIED', a, b)), 'ADDED');
  assert.equal(deliveredAs(f, ev('MODIFIED', a, a)), 'MODIFIED');
  assert.equal(deliveredAs(f, ev('DELETED', a, a)), 'DELETED');
  assert.equal(deliveredAs(f, ev('DELETED', b, b)), undefined);
  assert.equal(deliveredAs({ ...f, namespace: 'other' }, ev('ADDED', a)), undefined);
});

test('the event window keeps 75 s of events and knows where it can resume from', () => {
  const w = new EventWindow({ minAgeMs: 1000, maxEvents: 3 });
  w.reset(10);
  assert.deepEqual(w.since(10), []);
  assert.equal(w.since(9), undefined);
  for (let rv = 11; rv <= 14; rv++) w.push(ev('ADDED', obj(`o${rv}`, rv, {}), undefined, rv));
  // Four events, room for three: the oldest (11) left, so a watch from 11 on is still complete.
  assert.equal(w.resumableFrom, 11);
  assert.deepEqual(w.since(11)!.map((e) => e.resourceVersion), [12, 13, 14]);
  assert.equal(w.since(10), undefined);
  w.push(ev('ADDED', obj('late', 20, {}), undefined, 5000));
  // Older than a second: only the newest stays.
  assert.deepEqual(w.since(14)!.map((e) => e.resourceVersion), [20]);
  assert.equal(w.since(13), undefined);
});

test('an event\'s frame is shared within its dispatch and not kept with the event window', () => {
  const info = { group: '', version: 'v1', resource: 'pods', kind: 'Pod', namespaced: true } as unknown as ResourceInfo;
  const first = ev('MODIFIED', obj('x', 2, {}));
  const line = eventLine(info, first, 'MODIFIED');
  // Every watcher the event is offered to gets the one line.
  assert.equal(eventLine(info, first, 'MODIFIED'), line);
  assert.ok(line.toString().startsWith('{"type":"MODIFIED","object":{"kind":"Pod","apiVersion":"v1"'));
  // Later events push it out: the window keeps the event, but its line is made again if asked.
  for (let rv = 3; rv < 3 + 100; rv++) eventLine(info, ev('MODIFIED', obj(`o${rv}`, rv, {})), 'MODIFIED');
  const again = eventLine(info, first, 'MODIFIED');
  assert.notEqual(again, line);
  assert.deepEqual(again, line);
});

test('recent frames keep the last events only, the longest seen dropped first', () => {
  const frames = new RecentFrames<string>(2);
  const [a, b, c] = [ev('ADDED', obj('a', 1, {})), ev('ADDED', obj('b', 2, {})), ev('ADDED', obj('c', 3, {}))];
  frames.set(a, 'json ADDED', 'A');
  frames.set(a, 'protobuf ADDED', 'A/pb');
  frames.set(b, 'json ADDED', 'B');
  frames.set(c, 'json ADDED', 'C');
  assert.equal(frames.size, 2);
  assert.equal(frames.get(a, 'json ADDED'), undefined);
  assert.equal(frames.get(a, 'protobuf ADDED'), undefined);
  assert.equal(frames.get(b, 'json ADDED'), 'B');
  assert.equal(frames.get(c, 'json ADDED'), 'C');
  assert.equal(frames.get(c, 'protobuf ADDED'), undefined);
});
