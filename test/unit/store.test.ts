import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { spawnSync } from 'node:child_process';
import { Store } from '../../src/store/store.ts';
import { answersAtLeast, listLive, scan } from '../../src/store/query.ts';
import { objectKey, type CachedObject } from '../../src/store/object.ts';
import { parseLabelSelector } from '../../src/selectors/labels.ts';
import { parseFieldSelector } from '../../src/selectors/fields.ts';

function obj(ns: string, name: string, rv: number, labels: Record<string, string> = {}, node = ''): CachedObject {
  return { key: objectKey(ns, name), namespace: ns, name, resourceVersion: rv, labels, fields: { 'spec.nodeName': node, 'metadata.name': name }, item: Buffer.from(`{"n":"${name}","rv":${rv}}`), typed: true };
}

const all = { labels: parseLabelSelector(''), fields: parseFieldSelector('') };

test('keys sort as etcd sorts them, and namespace ranges are contiguous', () => {
  const s = new Store();
  s.replace([obj('a', 'x', 1), obj('a-b', 'y', 1), obj('a', 'a', 1), obj('b', 'z', 1)], 5);
  assert.deepEqual(scan(s.tree, { ...all, namespace: '', limit: 0 }).items.map((o) => o.key), ['/a-b/y', '/a/a', '/a/x', '/b/z']);
  assert.deepEqual(scan(s.tree, { ...all, namespace: 'a', limit: 0 }).items.map((o) => o.key), ['/a/a', '/a/x']);
});

test('pages: a continue whenever objects remain, a count only without selectors', () => {
  const s = new Store();
  s.replace([obj('n', 'a', 1, { app: 'x' }), obj('n', 'b', 1), obj('n', 'c', 1, { app: 'x' }), obj('n', 'd', 1)], 5);
  const p1 = scan(s.tree, { ...all, namespace: 'n', limit: 2 });
  assert.deepEqual([p1.items.map((o) => o.name), p1.lastKey, p1.remaining], [['a', 'b'], '/n/b', 2]);
  const sel = { labels: parseLabelSelector('app=x'), fields: parseFieldSelector('') };
  const p2 = scan(s.tree, { ...sel, namespace: 'n', limit: 2 });
  // Both matches fit, yet objects remain in the range: the apiserver still answers a continue.
  assert.deepEqual([p2.items.map((o) => o.name), p2.lastKey, p2.remaining], [['a', 'c'], '/n/c', undefined]);
  const p3 = scan(s.tree, { ...sel, namespace: 'n', limit: 2, startKey: '/n/c\u0000' });
  assert.deepEqual([p3.items.length, p3.lastKey], [0, undefined]);
});

test('indexes answer selective lists in key order and follow every change', () => {
  const s = new Store({ fieldIndexes: ['spec.nodeName'] });
  const objs = [];
  for (let i = 0; i < 100; i++) objs.push(obj(`ns${i % 3}`, `p${String(i).padStart(3, '0')}`, 1, { app: `a${i % 10}` }, `node-${i % 20}`));
  s.replace(objs, 10);
  const q = { labels: parseLabelSelector(''), fields: parseFieldSelector('spec.nodeName=node-3'), namespace: '', limit: 0 };
  const viaIndex = listLive(s, q).items.map((o) => o.key);
  assert.deepEqual(viaIndex, scan(s.tree, q).items.map((o) => o.key));
  assert.equal(viaIndex.length, 5);
  s.apply('MODIFIED', obj('ns0', 'p003', 11, { app: 'a3' }, 'node-9'));
  s.apply('DELETED', obj('ns1', 'p043', 12, {}, 'node-3'));
  // In key order: namespace first (/ns0/p063 before /ns2/p023).
  assert.deepEqual(listLive(s, q).items.map((o) => o.name), ['p063', 'p023', 'p083']);
  assert.deepEqual(listLive(s, q).items, scan(s.tree, q).items);
  const byLabel = { labels: parseLabelSelector('app=a3'), fields: parseFieldSelector(''), namespace: 'ns0', limit: 0 };
  assert.deepEqual(listLive(s, byLabel).items.map((o) => o.name), scan(s.tree, byLabel).items.map((o) => o.name));
});

test('snapshots give the exact state at any resourceVersion in the window', () => {
  let now = 0;
  const s = new Store({ now: () => now, snapshotWindowMs: 1000 });
  s.replace([obj('n', 'a', 1)], 10);
  s.apply('ADDED', obj('n', 'b', 11));
  s.apply('DELETED', obj('n', 'a', 12));
  const names = (rv: number) => [...s.snapshotAt(rv)!.tree.values()].map((o) => o.name);
  assert.deepEqual(names(10), ['a']);
  assert.deepEqual(names(11), ['a', 'b']);
  assert.deepEqual(names(12), ['b']);
  assert.equal(s.snapshotAt(9), undefined);
  assert.equal(s.snapshotAt(13), undefined);
  now = 5000;
  s.apply('ADDED', obj('n', 'c', 13));
  // Older snapshots age out: their states are no longer known.
  assert.equal(s.snapshotAt(11), undefined);
  assert.deepEqual(names(13), ['b', 'c']);
});

test('at most maxSnapshots states are kept, the newest ones', () => {
  const s = new Store({ now: () => 0, maxSnapshots: 3 });
  s.replace([], 10);
  for (let rv = 11; rv <= 20; rv++) s.apply('ADDED', obj('n', `o${rv}`, rv));
  for (let rv = 10; rv <= 17; rv++) assert.equal(s.snapshotAt(rv), undefined, `rv ${rv}`);
  for (let rv = 18; rv <= 20; rv++) assert.equal(s.snapshotAt(rv)!.tree.size, rv - 10, `rv ${rv}`);
});

test('waiting for a resourceVersion', async () => {
  const s = new Store();
  s.replace([], 5);
  assert.equal(await s.waitUntilFresh(5, 10), true);
  const later = s.waitUntilFresh(7, 1000);
  s.bookmark(7);
  assert.equal(await later, true);
  assert.equal(await s.waitUntilFresh(9, 20), false);
});

// A watch-list waits for its proof up to 65 s (serve/freshness.ts); at shutdown its connection is
// closed, and the wait alone must not keep the process from exiting for the rest of that time.
test('a wait for a resourceVersion does not keep the process alive', () => {
  const script = `import { Store } from ${JSON.stringify(new URL('../../src/store/store.ts', import.meta.url).href)};
const s = new Store();
s.replace([], 5);
void s.waitUntilFresh(7, 60_000);`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { timeout: 20_000, encoding: 'utf8' });
  assert.equal(r.signal, null, 'still running after 20 s');
  assert.equal(r.status, 0, r.stderr);
});

test('a LIST through an index is the scan of the same state, after any changes, asked any number of times', () => {
  // Index entries keep their key order between changes (src/store/index.ts); a single field term
  // is answered without reading the objects. Both must give exactly what a scan gives.
  fc.assert(
    fc.property(
      fc.array(
        fc.record({
          kind: fc.constantFrom('ADDED', 'MODIFIED', 'DELETED', 'LIST'),
          i: fc.integer({ min: 0, max: 199 }),
          node: fc.integer({ min: 0, max: 3 }),
          // Without an app label at times, so that updates add and drop the key as well as change its value.
          app: fc.option(fc.integer({ min: 0, max: 3 }), { nil: undefined, freq: 4 }),
          // A label few objects carry, so that its existence index is small enough to be used.
          rare: fc.integer({ min: 0, max: 3 }).map((n) => n === 0),
          ns: fc.constantFrom('', 'ns0', 'ns1'),
          selector: fc.constantFrom('node', 'node-and-app', 'node-not', 'app', 'app-exists', 'rare-exists'),
          limit: fc.constantFrom(0, 1, 3),
          from: fc.option(fc.integer({ min: 0, max: 199 }), { nil: undefined }),
        }),
        { minLength: 30, maxLength: 80 },
      ),
      (steps) => {
        const s = new Store({ fieldIndexes: ['spec.nodeName'] });
        const name = (i: number): [string, string] => [`ns${i % 3}`, `p${String(i).padStart(3, '0')}`];
        const objs = [];
        for (let i = 0; i < 200; i++) objs.push(obj(...name(i), 1, { app: `a${i % 10}`, ...(i % 10 === 0 && { rare: 'x' }) }, `node-${i % 20}`));
        s.replace(objs, 10);
        let rv = 10;
        for (const st of steps) {
          if (st.kind !== 'LIST') {
            const labels = { ...(st.app !== undefined && { app: `a${st.app}` }), ...(st.rare && { rare: 'x' }) };
            s.apply(st.kind, obj(...name(st.i), ++rv, labels, `node-${st.node}`));
            assert.equal(s.bytes, [...s.tree.values()].reduce((n, o) => n + o.item.length, 0));
            continue;
          }
          const fields = { node: `spec.nodeName=node-${st.node}`, 'node-and-app': `spec.nodeName=node-${st.node}`, 'node-not': `spec.nodeName=node-${st.node},metadata.name!=p000`, app: '', 'app-exists': '', 'rare-exists': '' }[st.selector];
          const labels = { node: '', 'node-and-app': `app=a${st.app ?? 0}`, 'node-not': '', app: `app=a${st.app ?? 0}`, 'app-exists': 'app', 'rare-exists': 'rare' }[st.selector];
          const q = {
            labels: parseLabelSelector(labels),
            fields: parseFieldSelector(fields),
            namespace: st.ns,
            limit: st.limit,
            startKey: st.from === undefined ? undefined : objectKey(...name(st.from)),
          };
          for (let again = 0; again < 2; again++) {
            const viaIndex = listLive(s, q);
            const scanned = scan(s.tree, q);
            assert.deepEqual(viaIndex.items.map((o) => [o.key, o.resourceVersion]), scanned.items.map((o) => [o.key, o.resourceVersion]));
            assert.equal(viaIndex.lastKey, scanned.lastKey);
          }
          // Whether the answer holds at least some bytes: what the page a scan gives holds.
          const page = scan(s.tree, { ...q, startKey: undefined }).items.reduce((n, o) => n + o.item.length, 0);
          for (const bytes of [1, 30, 100]) assert.equal(answersAtLeast(s, q, bytes), page >= bytes);
        }
      },
    ),
    { numRuns: 300 },
  );
});
