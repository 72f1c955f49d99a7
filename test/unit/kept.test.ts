// What the cache keeps holds no memory beyond its own bytes (src/store/bytes.ts): a cached object,
// its protobuf message and metadata, and an event's frames. Small Buffers made the ordinary way
// are slices of Node's shared pool, and a kept slice keeps the whole pool alive.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ResourceInfo } from '../../src/api/resource.ts';
import { decoder } from '../../src/reflector/decode.ts';
import { WatchFramer } from '../../src/reflector/watchframe.ts';
import { joinBytes, joinKept, kept } from '../../src/store/bytes.ts';
import type { StoreEvent } from '../../src/store/events.ts';
import type { CachedObject } from '../../src/store/object.ts';
import { eventLine } from '../../src/watch/encode.ts';
import { JSON_METADATA_WATCH } from '../../src/watch/metadata.ts';
import { metadataMessage, objectMessage } from '../../src/represent/protobuf/objects.ts';
import { PROTOBUF_OBJECT_WATCH } from '../../src/watch/protobuf.ts';

const POD: ResourceInfo = { group: '', version: 'v1', resource: 'pods', kind: 'Pod', namespaced: true, prefix: '/api/v1' };

/** Holds no more memory than its bytes: its own buffer (or a view of one a few bytes longer). */
function ownsItsMemory(b: Buffer, what: string): void {
  assert.ok(b.buffer.byteLength - b.length <= 256, `${what}: ${b.length} bytes hold ${b.buffer.byteLength} bytes of memory`);
}

function podJson(name: string, rv: number): string {
  return JSON.stringify({
    kind: 'Pod',
    apiVersion: 'v1',
    metadata: { name, namespace: 'ns', resourceVersion: String(rv), labels: { app: 'a' } },
    spec: { nodeName: 'node-1', containers: [{ name: 'c', image: 'registry.example/app:1' }] },
  });
}

/** A MODIFIED event as a reflector reads it: one line of a chunk the network delivered. */
function fromWatch(name: string, rv: number, shared = false): CachedObject {
  const line = Buffer.from(`{"type":"MODIFIED","object":${podJson(name, rv)}}\n`);
  const chunk = Buffer.alloc(64 * 1024);
  line.copy(chunk);
  const [frame] = new WatchFramer().push(chunk.subarray(0, line.length));
  return decoder(POD, undefined, shared)(frame!.object);
}

test('small joins come out of the shared pool; joinKept and kept give memory of their own', () => {
  const parts = [Buffer.from('{"a":'), Buffer.from('1}')];
  // The premise: an ordinary small join is a slice of a pool many times its size.
  assert.ok(joinBytes(parts).buffer.byteLength > 1024);
  const own = joinKept(parts);
  assert.equal(own.toString(), '{"a":1}');
  ownsItsMemory(own, 'joinKept');
  const slice = Buffer.from('pooled bytes');
  assert.ok(slice.buffer.byteLength > 1024);
  const copy = kept(slice);
  assert.equal(copy.toString(), 'pooled bytes');
  ownsItsMemory(copy, 'kept(slice)');
  assert.equal(kept(copy), copy, 'bytes that own their memory are kept as they are');
});

test('a cached object keeps only its own bytes, in ordinary or shared memory', () => {
  const o = fromWatch('p', 5);
  assert.ok(o.item.toString().startsWith('{"metadata":{"name":"p"'));
  ownsItsMemory(o.item, 'object');
  const s = fromWatch('q', 6, true);
  assert.ok(s.item.buffer instanceof SharedArrayBuffer);
  assert.equal(s.item.buffer.byteLength, s.item.length);
});

test("an event's frames and an object's other forms keep only their own bytes", () => {
  const prev = fromWatch('p', 5);
  const object = fromWatch('p', 6);
  const event: StoreEvent = { type: 'MODIFIED', object, prev, resourceVersion: 6, at: 0 };
  const line = eventLine(POD, event, 'MODIFIED');
  assert.ok(line.toString().startsWith('{"type":"MODIFIED","object":{"kind":"Pod"'));
  ownsItsMemory(line, 'JSON line');
  // An object that left a watcher's selection goes as DELETED in its previous state.
  ownsItsMemory(eventLine(POD, event, 'DELETED'), 'JSON DELETED line');
  ownsItsMemory(JSON_METADATA_WATCH.v1.event(POD, event, 'MODIFIED')!, 'metadata line');
  ownsItsMemory(PROTOBUF_OBJECT_WATCH.event(POD, event, 'MODIFIED')!, 'protobuf frame');
  ownsItsMemory(objectMessage(POD, object)!, 'protobuf message');
  ownsItsMemory(metadataMessage(POD, object)!, 'protobuf metadata message');
});
