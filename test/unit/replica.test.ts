// The feed and a replica over a real MessageChannel: the replica's store follows the owner's
// (list, events, bookmarks, relists, a resource dropped), and the objects' bytes are the owner's
// memory, not copies.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MessageChannel } from 'node:worker_threads';
import { CacheFeed, type FeedMessage, type FeedSource } from '../../src/cache/feed.ts';
import { ReplicaCache } from '../../src/cache/replica.ts';
import type { CacheObserver } from '../../src/cache/cache.ts';
import type { CachedResource } from '../../src/cache/view.ts';
import { ConsistencyProof } from '../../src/cache/consistency.ts';
import { sharedCopy } from '../../src/reflector/decode.ts';
import { Store } from '../../src/store/store.ts';
import { objectKey, type CachedObject } from '../../src/store/object.ts';
import { WatcherRegistry } from '../../src/watch/registry.ts';
import { GatewayMetrics } from '../../src/metrics/metrics.ts';
import { createLogger } from '../../src/log/logger.ts';
import type { UpstreamPools } from '../../src/upstream/pools.ts';
import type { ResourceInfo } from '../../src/api/resource.ts';

const info: ResourceInfo = { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true, prefix: '/api/v1' };
// Neither side sends a request in these tests: the proof is made, never asked.
const noPools = {} as UpstreamPools;

function obj(name: string, rv: number, labels: Record<string, string> = {}): CachedObject {
  return { key: objectKey('ns', name), namespace: 'ns', name, resourceVersion: rv, labels, fields: {}, item: sharedCopy(Buffer.from(`{"metadata":{"name":"${name}"}}`)), typed: true };
}

/** An owner with one resource whose store the test writes to, as its reflector would. */
function owner(): { source: FeedSource; store: Store; drop: () => void; waiting: string[] } {
  const store = new Store();
  const waiting: string[] = [];
  const observers = new Set<CacheObserver>();
  const resource: CachedResource = {
    name: 'configmaps',
    info,
    store,
    reflector: { watchListSupported: true, canProbe: true, bookmarkSoon: () => Promise.resolve(), stop: () => Promise.resolve() },
    consistency: undefined as unknown as ConsistencyProof,
    consistentReads: 'verify',
    watchers: new WatcherRegistry(store),
  };
  const source: FeedSource = {
    observe(o) {
      observers.add(o);
      o.running(resource);
      return () => observers.delete(o);
    },
    get synced() {
      return store.synced;
    },
    waiting: () => [...waiting],
    unsynced: () => [],
  };
  return { source, store, drop: () => observers.forEach((o) => o.dropped(resource)), waiting };
}

/**
 * A feed of the owner and a replica at the other end of a real MessageChannel; `onPost` sees each
 * batch the feed posts, when it posts it.
 */
function connect(source: FeedSource, onPost?: (batch: FeedMessage[]) => void): { feed: CacheFeed; replica: ReplicaCache } {
  const feed = new CacheFeed(source);
  const { port1, port2 } = new MessageChannel();
  if (onPost) {
    const post = port1.postMessage.bind(port1);
    port1.postMessage = (batch: FeedMessage[]) => {
      onPost(batch);
      post(batch);
    };
  }
  feed.attach(port1);
  const replica = new ReplicaCache(port2, noPools, createLogger('silent'), new GatewayMetrics().cache);
  replica.start();
  return { feed, replica };
}

async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
  await new Promise((r) => setTimeout(r, 20));
}

test('a replica follows the owner: list, events, bookmarks and relists, with the same bytes in shared memory', async () => {
  const { source, store, drop } = owner();
  store.replace([obj('a', 5), obj('b', 6)], 10);
  const { feed, replica } = connect(source);
  try {
    await settle();
    const r = replica.lookup('', 'configmaps');
    assert.ok(r, 'the resource reached the replica');
    assert.equal(r.store.resourceVersion, 10);
    assert.deepEqual([...r.store.tree.values()].map((o) => o.key), ['/ns/a', '/ns/b']);
    assert.equal(replica.synced, true);

    store.apply('MODIFIED', obj('a', 11, { app: 'x' }));
    store.apply('ADDED', obj('c', 12));
    store.apply('DELETED', obj('b', 13));
    store.bookmark(20);
    await settle();
    assert.deepEqual([...r.store.tree.values()].map((o) => `${o.name}@${o.resourceVersion}`), ['a@11', 'c@12']);
    assert.equal(r.store.resourceVersion, 20);
    assert.deepEqual(r.store.events.size, 3, 'the replica keeps its own event window for resumed watches');

    // Held once: the replica's bytes are a view of the owner's memory.
    const mine = store.get('/ns/a')!.item;
    const theirs = r.store.get('/ns/a')!.item;
    assert.ok(theirs.buffer instanceof SharedArrayBuffer);
    assert.equal(theirs.toString(), mine.toString());
    mine[2] = 'M'.charCodeAt(0);
    assert.equal(theirs[2], 'M'.charCodeAt(0), 'a write to the owner\'s bytes shows in the replica: the same memory');

    store.replace([obj('z', 30)], 30);
    await settle();
    assert.deepEqual([...r.store.tree.values()].map((o) => o.key), ['/ns/z']);
    assert.equal(r.store.resourceVersion, 30);

    drop();
    await settle();
    assert.equal(replica.lookup('', 'configmaps'), undefined, 'a dropped resource is gone from the replica');
  } finally {
    feed.close();
    await replica.stop();
  }
});

test('a resource dropped and marked waiting in one turn reaches the replica as both at once, not a status poll later', async () => {
  const { source, store, drop, waiting } = owner();
  store.replace([obj('a', 5)], 10);
  const { feed, replica } = connect(source);
  try {
    await settle();
    assert.ok(replica.lookup('', 'configmaps'));
    assert.deepEqual(replica.waiting(), []);
    // As the cache does when a CRD is deleted: drop the resource, then mark it waiting to exist.
    drop();
    waiting.push('configmaps');
    // Well within the 250 ms the status is otherwise polled at.
    await settle();
    assert.equal(replica.lookup('', 'configmaps'), undefined);
    assert.deepEqual(replica.waiting(), ['configmaps']);
  } finally {
    feed.close();
    await replica.stop();
  }
});

test('the changes of one run of code are posted together at its end, not a turn later', async () => {
  const { source, store } = owner();
  store.replace([obj('a', 5)], 10);
  // The owner's watchers listen before the feed exists, as the cache's registry does.
  const order: string[] = [];
  store.listen({ event: (e) => order.push(`owner ${e.object.name}`), replaced: () => undefined, progressed: () => undefined });
  const { feed, replica } = connect(source, (batch) => order.push(`post ${batch.map((m) => (m.t === 'event' ? m.object.name : m.t)).join(',')}`));
  try {
    await settle();
    order.length = 0;
    // One chunk of the upstream watch: three events in one run of code.
    store.apply('MODIFIED', obj('a', 11));
    store.apply('ADDED', obj('b', 12));
    store.apply('ADDED', obj('c', 13));
    assert.deepEqual(order, ['owner a', 'owner b', 'owner c'], 'the owner\'s watchers first');
    await Promise.resolve();
    assert.deepEqual(order.slice(3), ['post a,b,c'], 'then all three in one message, at the end of the run, not a turn later');
    await settle();
    const r = replica.lookup('', 'configmaps')!;
    assert.deepEqual([...r.store.tree.values()].map((o) => `${o.name}@${o.resourceVersion}`), ['a@11', 'b@12', 'c@13']);
    assert.equal(r.store.resourceVersion, 13);
  } finally {
    feed.close();
    await replica.stop();
  }
});

test('a change after a relist in the same turn waits behind it, to the end of the turn', async () => {
  const { source, store } = owner();
  store.replace([obj('a', 5)], 10);
  const batches: string[][] = [];
  const { feed, replica } = connect(source, (batch) => batches.push(batch.map((m) => m.t)));
  try {
    await settle();
    batches.length = 0;
    store.replace([obj('x', 20)], 20);
    store.apply('ADDED', obj('y', 21));
    await Promise.resolve();
    assert.deepEqual(batches, [], 'the change did not overtake the relist');
    await settle();
    assert.deepEqual(batches, [['replace', 'event']]);
    const r = replica.lookup('', 'configmaps')!;
    assert.deepEqual([...r.store.tree.values()].map((o) => o.name), ['x', 'y']);
  } finally {
    feed.close();
    await replica.stop();
  }
});

test('a bookmark asked by a replica is the owner reflector\'s, and the events it brings arrive before the answer', async () => {
  const { source, store } = owner();
  store.replace([obj('a', 5)], 10);
  const { feed, replica } = connect(source);
  try {
    await settle();
    const r = replica.lookup('', 'configmaps')!;
    // The owner's reflector, asked for a bookmark, applies an event and then a bookmark.
    let probed = 0;
    const resource = await new Promise<CachedResource>((resolve) => source.observe({ running: resolve, dropped: () => undefined }));
    resource.reflector.bookmarkSoon = () => {
      probed++;
      store.apply('ADDED', obj('late', 40));
      store.bookmark(45);
      return Promise.resolve();
    };
    await r.reflector.bookmarkSoon();
    assert.equal(probed, 1);
    assert.equal(r.store.resourceVersion, 45, 'the bookmark reached the replica before the answer');
    assert.ok(r.store.get('/ns/late'));
  } finally {
    feed.close();
    await replica.stop();
  }
});
