// Writing protobuf from JSON by the Go types' rules; byte-for-byte agreement with the apiserver is
// tested against the real one (test/integration/protobuf.test.ts). These pin the edges it may not meet.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BinaryReader, WireType } from '@bufbuild/protobuf/wire';
import { encodeMessage, goDuration, goJson, parseObject, Unrepresentable } from '../../src/represent/protobuf/encode.ts';
import { messageOfKind, OBJECT_META } from '../../src/represent/protobuf/schema.ts';
import { watchFrame, watchFrameParts, wrap } from '../../src/represent/protobuf/objects.ts';

/** field number → the values written for it, as raw bytes or varints. */
function fieldsOf(bytes: Uint8Array): Map<number, Array<Uint8Array | bigint>> {
  const r = new BinaryReader(bytes);
  const out = new Map<number, Array<Uint8Array | bigint>>();
  while (r.pos < r.len) {
    const [num, wire] = r.tag();
    const v = wire === WireType.LengthDelimited ? r.bytes() : BigInt(r.uint64());
    out.set(num, [...(out.get(num) ?? []), v]);
  }
  return out;
}

test('fields that are not pointers are written even when the JSON leaves them out; pointers only when set', () => {
  const meta = fieldsOf(encodeMessage(OBJECT_META, { name: 'a' }));
  assert.deepEqual(Buffer.from(meta.get(1)![0] as Uint8Array).toString(), 'a');
  // generateName, namespace and the other strings, generation and creationTimestamp: always.
  for (const n of [2, 3, 4, 5, 6, 7, 8]) assert.ok(meta.has(n), `field ${n}`);
  // deletionTimestamp and deletionGracePeriodSeconds are pointers.
  assert.ok(!meta.has(9) && !meta.has(10));
  const deleting = fieldsOf(encodeMessage(OBJECT_META, { name: 'a', deletionGracePeriodSeconds: 0 }));
  assert.deepEqual(deleting.get(10), [0n], 'a pointer to zero is set');
});

test('map entries are sorted by their keys\' UTF-8 bytes', () => {
  const meta = fieldsOf(encodeMessage(OBJECT_META, { labels: { b: '1', 'é': '2', a: '3', Z: '4' } }));
  const keys = meta.get(11)!.map((e) => Buffer.from(fieldsOf(e as Uint8Array).get(1)![0] as Uint8Array).toString());
  assert.deepEqual(keys, ['Z', 'a', 'b', 'é']);
});

test('an embedded struct is written nested, from the enclosing JSON object', () => {
  const probe = fieldsOf(encodeMessage('k8s.io/api/core/v1.Probe', { httpGet: { path: '/', port: 80 }, periodSeconds: 5 }));
  const handler = fieldsOf(probe.get(1)![0] as Uint8Array);
  assert.ok(handler.has(2), 'httpGet inside the ProbeHandler');
  assert.deepEqual(probe.get(4), [5n]);
});

test('JSON the layout does not describe is refused, not guessed', () => {
  assert.throws(() => encodeMessage(OBJECT_META, { name: 'a', shinyNewField: true }), Unrepresentable);
  assert.throws(() => encodeMessage(OBJECT_META, { name: 7 }), Unrepresentable);
  assert.throws(() => encodeMessage(OBJECT_META, { creationTimestamp: '2026-11-25T07:15:00+01:00' }), Unrepresentable);
  assert.throws(() => goJson({ b: 1, 10: 2 }), Unrepresentable, 'integer-like keys lose their order in JavaScript');
});

test('int64 values beyond 2^53 keep every digit', () => {
  const o = parseObject(Buffer.from('{"a":9007199254740993,"b":1.5,"c":12}'));
  assert.equal(o.a, 9007199254740993n);
  assert.equal(o.b, 1.5);
  assert.equal(o.c, 12);
  const meta = fieldsOf(encodeMessage(OBJECT_META, parseObject(Buffer.from('{"generation":9007199254740993}'))));
  assert.deepEqual(meta.get(7), [9007199254740993n]);
});

test('times: seconds for Time, microseconds for MicroTime, nothing for null', () => {
  const ts = (json: unknown, type: 'creationTimestamp'): Map<number, Array<Uint8Array | bigint>> => fieldsOf(fieldsOf(encodeMessage(OBJECT_META, { [type]: json } as never)).get(8)![0] as Uint8Array);
  assert.deepEqual(ts('1970-01-02T00:00:01Z', 'creationTimestamp').get(1), [86401n]);
  assert.equal(ts(null, 'creationTimestamp').size, 0);
  const event = fieldsOf(encodeMessage(messageOfKind('events.k8s.io/v1', 'Event')!, { eventTime: '2026-11-25T07:15:00.123456Z' }));
  const micro = fieldsOf(event.get(2)![0] as Uint8Array);
  assert.deepEqual(micro.get(2), [123456000n]);
});

test('Go durations and Go\'s JSON', () => {
  assert.equal(goDuration('1h2m3.5s'), 3_723_500_000_000n);
  assert.equal(goDuration('-300ms'), -300_000_000n);
  assert.equal(goDuration('0s'), 0n);
  assert.throws(() => goDuration('1d'), Unrepresentable);
  assert.equal(goJson({ 'f:a': { '.': {}, 'k:{"x":"<&>"}': {} } }), '{"f:a":{".":{},"k:{\\"x\\":\\"\\u003c\\u0026\\u003e\\"}":{}}}');
});

test("an initial object's watch frame in parts is the whole frame's bytes, at every length's varint width", () => {
  for (const size of [0, 1, 100, 127, 128, 16_000, 16_383, 16_384, 2_100_000]) {
    const message = Buffer.alloc(size, 7);
    const parts = watchFrameParts('ADDED', 'v1', 'Pod', message);
    assert.ok(Buffer.concat(parts).equals(watchFrame('ADDED', wrap('v1', 'Pod', message))), `message of ${size} bytes`);
    assert.equal(parts[1], message, 'the message itself, not a copy');
  }
});

test("managedFields' fieldsV1 are written as the bytes that came, without being parsed", () => {
  const pod = messageOfKind('v1', 'Pod')!;
  const entry = (manager: string, fields: string): string =>
    `{"manager":"${manager}","operation":"Update","apiVersion":"v1","time":"2026-11-27T08:00:00Z","fieldsType":"FieldsV1","fieldsV1":${fields}}`;
  // Go's bytes: keys in its order (integer-like ones too, which JavaScript would move first), and
  // a string that holds the key's own text, escaped.
  const ordered = '{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"k:{\\"port\\":80}":{},"2":{},"1":{}}';
  const text = `{"metadata":{"name":"p","namespace":"n","annotations":{"note":"\\"fieldsV1\\":{\\"x\\"}"},"managedFields":[${entry('a', ordered)},${entry('b', '{"f:status":{"f:phase":{}}}')}]},"spec":{},"status":{}}`;
  const message = Buffer.from(encodeMessage(pod, parseObject(Buffer.from(text))));
  for (const raw of [ordered, '{"f:status":{"f:phase":{}}}']) assert.ok(message.includes(Buffer.from(raw)), raw);
  // Without integer-like keys it is exactly what parsing and writing them back gives.
  const plain = text.replace(ordered, '{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"k:{\\"port\\":80}":{}}');
  assert.ok(Buffer.from(encodeMessage(pod, parseObject(Buffer.from(plain)))).equals(Buffer.from(encodeMessage(pod, JSON.parse(plain) as Parameters<typeof encodeMessage>[1]))));
  // Parsed whole, they are refused: their order is lost.
  assert.throws(() => encodeMessage(pod, JSON.parse(text) as Parameters<typeof encodeMessage>[1]), Unrepresentable);
});

test('a fieldsV1 key anywhere but a managedFields entry leaves the object parsed whole', () => {
  for (const text of ['{"metadata":{"name":"p"},"spec":{"fieldsV1":{"a":1}}}', '{"metadata":{"name":"p"},"spec":{"x\\"fieldsV1":{"a":1}}}']) {
    assert.deepEqual(parseObject(Buffer.from(text)), JSON.parse(text));
  }
});
