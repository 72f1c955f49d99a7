import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventWindow, type StoreEvent } from '../../src/store/events.ts';
import { deliveredAs, type WatchFilter } from '../../src/watch/watcher.ts';
import { objectKey, type CachedObject } from '../../src/store/object.ts';
import { parseLabelSelector } from '../../src/selectors/labels.ts';
import { parseFieldSelector } from '../../src/selectors/fields.ts';

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
