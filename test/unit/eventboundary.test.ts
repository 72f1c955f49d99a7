import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ChunkEventBoundary, eventBoundaryFor, JsonEventBoundary, LengthPrefixedEventBoundary } from '../../src/upstream/eventboundary.ts';

test('JSON watch streams end between lines', () => {
  const b = new JsonEventBoundary();
  assert.equal(b.atBoundary, true);
  b.advance(Buffer.from('{"type":"ADDED","object":{}}\n{"type":"MOD'));
  assert.equal(b.atBoundary, false);
  // The rest of the event, then the start of another: cut after the newline.
  const next = Buffer.from('IFIED","object":{}}\n{"type":"DELETED"');
  assert.equal(b.firstEnd(next), next.indexOf('\n') + 1);
  b.advance(Buffer.from('IFIED","object":{}}\n'));
  assert.equal(b.atBoundary, true);
  assert.equal(b.firstEnd(Buffer.from('{"type":"BOOKMARK"}\n')), 0);
  b.advance(Buffer.from('{"type":"BOOK'));
  assert.equal(b.firstEnd(Buffer.from('MARK"')), -1);
});

test('pretty JSON watch streams end only before an event at the start of a line', () => {
  const b = new JsonEventBoundary();
  b.advance(Buffer.from('{\n  "type": "ADDED",\n'));
  // A newline followed by indentation is inside the event.
  const rest = Buffer.from('  "object": {}\n}\n{\n  "type": "MODIFIED"');
  assert.equal(b.firstEnd(rest), rest.indexOf('}\n{') + 2);
  // Indented lines after a chunk that ended on a newline are still the same event.
  assert.equal(b.firstEnd(Buffer.from('  "object": {}\n}')), -1);
});

function frame(bytes: number): Buffer {
  const f = Buffer.alloc(4 + bytes, 7);
  f.writeUInt32BE(bytes, 0);
  return f;
}

test('protobuf watch streams end after whole length-prefixed frames', () => {
  const b = new LengthPrefixedEventBoundary();
  assert.equal(b.atBoundary, true);
  const two = Buffer.concat([frame(10), frame(5)]);
  b.advance(two.subarray(0, 2));
  assert.equal(b.atBoundary, false);
  // Looking ahead does not move the tracker.
  assert.equal(b.firstEnd(two.subarray(2)), 12);
  assert.equal(b.firstEnd(two.subarray(2)), 12);
  b.advance(two.subarray(2, 20));
  assert.equal(b.atBoundary, false);
  assert.equal(b.firstEnd(two.subarray(20, 22)), -1);
  assert.equal(b.firstEnd(two.subarray(20)), 3);
  b.advance(two.subarray(20));
  assert.equal(b.atBoundary, true);
  b.advance(frame(0).subarray(0, 3));
  assert.equal(b.firstEnd(Buffer.from([0])), 1);
});

test('the tracker follows the content type', () => {
  assert.ok(eventBoundaryFor('application/json') instanceof JsonEventBoundary);
  assert.ok(eventBoundaryFor('application/json;stream=watch') instanceof JsonEventBoundary);
  assert.ok(eventBoundaryFor('application/vnd.kubernetes.protobuf;stream=watch') instanceof LengthPrefixedEventBoundary);
  assert.ok(eventBoundaryFor('application/cbor-seq') instanceof ChunkEventBoundary);
  assert.ok(eventBoundaryFor(undefined) instanceof ChunkEventBoundary);
});
