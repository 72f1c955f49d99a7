// What Levee writes of Tables and metadata-only answers itself: Go's JSON strings and numbers, its
// times and durations, an object's metadata as the apiserver's internal object has it, a Table's
// rows and envelope, and the watch events of both.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { goFloat, goMarshal, goString } from '../../src/represent/gojson.ts';
import { formatTime, parseTime, ZERO_TIME } from '../../src/represent/gotime.ts';
import { humanDuration } from '../../src/represent/table/duration.ts';
import { members, valueEnd } from '../../src/represent/jsonbytes.ts';
import { metadataListEnvelope, metadataOf, metadataOfJson } from '../../src/represent/metadata.ts';
import { encodeListMeta, rowBytes, tableEnvelope, writesTable } from '../../src/represent/table/encode.ts';
import { formatLabels, formatLabelSelector } from '../../src/represent/table/format.ts';
import { tableWatch } from '../../src/watch/table.ts';
import { JSON_METADATA_WATCH } from '../../src/watch/metadata.ts';
import { objectKey, toItem, typeMetaPrefix, type CachedObject } from '../../src/store/object.ts';
import type { ResourceInfo } from '../../src/api/resource.ts';
import type { StoreEvent } from '../../src/store/events.ts';

const S = 1000;
const M = 60 * S;
const H = 60 * M;
const D = 24 * H;

test('HumanDuration, boundary by boundary', () => {
  const cases: Array<[number, string]> = [
    [-3 * S, '<invalid>'],
    [-1.5 * S, '0s'],
    [0, '0s'],
    [119.9 * S, '119s'],
    [2 * M, '2m'],
    [2 * M + 5 * S, '2m5s'],
    [9 * M + 59 * S, '9m59s'],
    [10 * M + 30 * S, '10m'],
    [179 * M, '179m'],
    [3 * H, '3h'],
    [7 * H + 59 * M, '7h59m'],
    [8 * H + 30 * M, '8h'],
    [47 * H, '47h'],
    [2 * D, '2d'],
    [7 * D + 23 * H, '7d23h'],
    [8 * D, '8d'],
    [729 * D, '729d'],
    [730 * D, '2y'],
    [800 * D, '2y70d'],
    [8 * 365 * D, '8y'],
    [20 * 365 * D + 100 * D, '20y'],
  ];
  for (const [ms, want] of cases) assert.equal(humanDuration(ms), want, `${ms} ms`);
});

test('encoding/json\'s strings and floats', () => {
  assert.equal(goString('a<b>&c'), '"a\\u003cb\\u003e\\u0026c"');
  assert.equal(goString('q"\\\n\r\t\b\f\u0001\u001f'), '"q\\"\\\\\\n\\r\\t\\b\\f\\u0001\\u001f"');
  assert.equal(goString('\u2028\u2029 é 😀 \u007f'), '"\\u2028\\u2029 é 😀 \u007f"');
  assert.equal(goFloat(1e21), '1e+21');
  assert.equal(goFloat(1e-7), '1e-7');
  assert.equal(goFloat(123456789012345680), '123456789012345680');
  assert.equal(goFloat(-0), '-0');
  assert.equal(goMarshal({ b: [1n, 2.5, null, true], a: { 'é': 'x', Z: '<' } }), '{"a":{"Z":"\\u003c","é":"x"},"b":[1,2.5,null,true]}');
});

test('times as metav1.Time reads and writes them', () => {
  assert.equal(parseTime('2026-01-02T03:04:05Z'), Date.parse('2026-01-02T03:04:05Z'));
  assert.equal(parseTime('2026-01-02T03:04:05.25+02:00'), Date.parse('2026-01-02T01:04:05.250Z'));
  assert.equal(parseTime('0001-01-01T00:00:00Z'), ZERO_TIME);
  for (const bad of ['2026-01-02 03:04:05Z', '2026-02-30T00:00:00Z', '2026-01-02t03:04:05z', '2026-01-02T03:04:05', '']) assert.equal(parseTime(bad), undefined, bad);
  assert.equal(parseTime('2024-02-29T00:00:00Z'), Date.parse('2024-02-29T00:00:00Z'));
  assert.equal(formatTime(Date.parse('2026-01-02T03:04:05.999Z')), '2026-01-02T03:04:05Z');
});

test('labels and selectors as the printers write them', () => {
  assert.equal(formatLabels({}), '<none>');
  assert.equal(formatLabels({ b: '1', a: '2', 'a.b': '3' }), 'a.b=3,a=2,b=1');
  assert.equal(formatLabelSelector(undefined), '<none>');
  assert.equal(formatLabelSelector({ matchLabels: { b: 'x' }, matchExpressions: [{ key: 'b', operator: 'In', values: ['z', 'y'] }, { key: 'a', operator: 'DoesNotExist' }] }), '!a,b=x,b in (y,z)');
  assert.equal(formatLabelSelector({ matchExpressions: [{ key: 'a', operator: 'In', values: [] }] }), '<error>');
});

test('the spans of an object\'s members, without parsing it', () => {
  const b = Buffer.from('{"a":"x}\\"y","b":{"c":[1,{"d":"]"}]},"n":-1.5e3 ,"t":true}');
  const m = members(b, 0);
  assert.deepEqual([...m.keys()], ['a', 'b', 'n', 't']);
  assert.equal(b.toString('utf8', m.get('a')!.start, m.get('a')!.end), '"x}\\"y"');
  assert.equal(b.toString('utf8', m.get('b')!.start, m.get('b')!.end), '{"c":[1,{"d":"]"}]}');
  assert.equal(b.toString('utf8', m.get('n')!.start, m.get('n')!.end), '-1.5e3');
  assert.equal(valueEnd(b, 0), b.length);
});

const POD: ResourceInfo = { group: '', version: 'v1', resource: 'pods', kind: 'Pod', namespaced: true, prefix: '/api/v1' };
const DAEMONSET: ResourceInfo = { group: 'apps', version: 'v1', resource: 'daemonsets', kind: 'DaemonSet', namespaced: true, prefix: '/apis/apps/v1' };
const WIDGET: ResourceInfo = { group: 'example.com', version: 'v1', resource: 'widgets', kind: 'Widget', namespaced: true, prefix: '/apis/example.com/v1', listKind: 'WidgetList', printerColumns: [] };

function stored(info: ResourceInfo, json: string, rv = 7): CachedObject {
  const raw = Buffer.from(json);
  const { item, typed } = toItem(raw, typeMetaPrefix({ kind: info.kind, apiVersion: info.group ? `${info.group}/${info.version}` : info.version }));
  return { key: objectKey('n', 'x'), namespace: 'n', name: 'x', resourceVersion: rv, labels: {}, fields: {}, item, typed };
}

test('a built-in\'s metadata is its bytes; a conversion\'s annotations go; a custom resource\'s is written in the typed order', () => {
  const pod = stored(POD, '{"kind":"Pod","apiVersion":"v1","metadata":{"name":"x","namespace":"n","labels":{"a":"\\u003c"}},"spec":{}}');
  const meta = metadataOf(POD, pod);
  assert.equal(meta.toString(), '{"name":"x","namespace":"n","labels":{"a":"\\u003c"}}');
  assert.equal(meta.buffer, pod.item.buffer, 'a view of the stored item');
  const ds = stored(DAEMONSET, '{"kind":"DaemonSet","apiVersion":"apps/v1","metadata":{"name":"x","annotations":{"deprecated.daemonset.template.generation":"3"},"generation":2},"spec":{}}');
  assert.equal(metadataOf(DAEMONSET, ds).toString(), '{"name":"x","generation":2}');
  const kept = stored(DAEMONSET, '{"kind":"DaemonSet","apiVersion":"apps/v1","metadata":{"name":"x","annotations":{"a":"1","deprecated.daemonset.template.generation":"3","z":"\\u0026"}}}');
  assert.equal(metadataOf(DAEMONSET, kept).toString(), '{"name":"x","annotations":{"a":"1","z":"\\u0026"}}');
  const widget = stored(
    WIDGET,
    '{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"annotations":{"b":"2"},"creationTimestamp":"2026-01-01T00:00:00Z","finalizers":["f"],"generation":3,"labels":{},' +
      '"managedFields":[{"apiVersion":"example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}},"manager":"m","operation":"Update","subresource":"status","time":"2026-01-01T00:00:00Z"}],' +
      '"name":"x","namespace":"n","ownerReferences":[{"apiVersion":"v1","blockOwnerDeletion":true,"kind":"ConfigMap","name":"o","uid":"u"}],"resourceVersion":"7","uid":"id","unknown":1},"spec":{}}',
  );
  assert.equal(
    metadataOf(WIDGET, widget).toString(),
    '{"name":"x","namespace":"n","uid":"id","resourceVersion":"7","generation":3,"creationTimestamp":"2026-01-01T00:00:00Z","annotations":{"b":"2"},' +
      '"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"o","uid":"u","blockOwnerDeletion":true}],"finalizers":["f"],' +
      '"managedFields":[{"manager":"m","operation":"Update","apiVersion":"example.com/v1","time":"2026-01-01T00:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}},"subresource":"status"}]}',
  );
  assert.equal(metadataOfJson(WIDGET, Buffer.from('{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"resourceVersion":"9","deletionTimestamp":"bad"}}'), false).toString(), '{"resourceVersion":"9","deletionTimestamp":null}');
  assert.deepEqual(metadataListEnvelope('v1', '5', undefined, undefined, true).map(String), ['{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"5"},"items":null}\n', '']);
});

test('a row carries its object, its metadata or nothing; the envelope its columns once', () => {
  assert.equal(writesTable(POD), true);
  assert.equal(writesTable({ ...POD, kind: 'Binding', resource: 'bindings' }), false);
  const pod = stored(POD, '{"kind":"Pod","apiVersion":"v1","metadata":{"name":"x","creationTimestamp":"2026-01-01T00:00:00Z"},"spec":{"containers":[{"name":"c"}]},"status":{"phase":"Running"}}');
  const now = Date.parse('2026-01-01T00:05:00Z');
  const cells = '"cells":["x","0/1","Running","0","5m","\\u003cnone\\u003e","\\u003cnone\\u003e","\\u003cnone\\u003e","\\u003cnone\\u003e"]';
  assert.equal(rowBytes(POD, pod, { version: 'v1', includeObject: 'None' }, now)!.toString(), `{${cells},"object":null}`);
  assert.equal(rowBytes(POD, pod, { version: 'v1beta1', includeObject: 'Metadata' }, now)!.toString(), `{${cells},"object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1beta1","metadata":{"name":"x","creationTimestamp":"2026-01-01T00:00:00Z"}}}`);
  assert.equal(rowBytes(POD, pod, { version: 'v1', includeObject: 'Object' }, now)!.toString(), `{${cells},"object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"x","creationTimestamp":"2026-01-01T00:00:00Z"},"spec":{"containers":[{"name":"c"}]},"status":{"phase":"Running"}}}`);
  assert.equal(rowBytes(POD, stored(POD, '{"kind":"Pod","apiVersion":"v1","metadata":{"name":"x"},"spec":'), { version: 'v1', includeObject: 'None' }, now), undefined, 'unreadable JSON is not printed');
  assert.equal(encodeListMeta('9', 'tok', 3), '{"resourceVersion":"9","continue":"tok","remainingItemCount":3}');
  const [head, tail] = tableEnvelope(POD, 'v1', encodeListMeta('9', undefined, undefined), false);
  assert.equal(`${String(head)}${String(tail)}`, '{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"9"},"columnDefinitions":null,"rows":[]}');
  assert.match(String(tableEnvelope(POD, 'v1', '{}', true)[0]), /"columnDefinitions":\[\{"name":"Name","type":"string","format":"name",/);
});

test('a Table watch sends the columns in its first event only, each watch for itself; frames are shared', () => {
  const a = stored(POD, '{"kind":"Pod","apiVersion":"v1","metadata":{"name":"x","resourceVersion":"7"},"spec":{}}', 7);
  const b = stored(POD, '{"kind":"Pod","apiVersion":"v1","metadata":{"name":"x","resourceVersion":"8"},"spec":{}}', 8);
  const added: StoreEvent = { type: 'ADDED', object: a, prev: undefined, resourceVersion: 7, at: 0 };
  const modified: StoreEvent = { type: 'MODIFIED', object: b, prev: a, resourceVersion: 8, at: 0 };
  const deleted: StoreEvent = { type: 'DELETED', object: b, prev: b, resourceVersion: 9, at: 0 };
  const rep = { as: 'Table' as const, version: 'v1' as const, includeObject: 'Metadata' as const };
  const one = tableWatch(rep);
  const two = tableWatch(rep);
  const parse = (f: Buffer | undefined) => JSON.parse(f!.toString()) as { type: string; object: { metadata: { resourceVersion: string }; columnDefinitions: unknown[] | null; rows: Array<{ object: { metadata: { resourceVersion: string } } }> } };
  const first = one.event(POD, added, 'ADDED');
  assert.notEqual(parse(first).object.columnDefinitions, null);
  const second = one.event(POD, modified, 'MODIFIED');
  assert.equal(parse(second).object.columnDefinitions, null);
  // Another watch's first event is the MODIFIED: its columns come then.
  assert.notEqual(parse(two.event(POD, modified, 'MODIFIED')).object.columnDefinitions, null);
  // Past their first events both watches share one frame of the event.
  const again = one.event(POD, added, 'ADDED');
  assert.equal(two.event(POD, added, 'ADDED'), again);
  assert.equal(parse(again).object.columnDefinitions, null);
  // A DELETED at another resourceVersion: the Table's and the row's metadata carry it.
  const gone = parse(one.event(POD, deleted, 'DELETED'));
  assert.equal(gone.type, 'DELETED');
  assert.equal(gone.object.metadata.resourceVersion, '9');
  assert.equal(gone.object.rows[0]!.object.metadata.resourceVersion, '9');
  const bookmark = parse(tableWatch(rep).bookmark(POD, 12));
  assert.notEqual(bookmark.object.columnDefinitions, null, 'a bookmark first takes the columns too');
  assert.deepEqual(bookmark.object.rows[0]!.object, { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: { resourceVersion: '12' } });
  const end = JSON.parse(tableWatch({ ...rep, includeObject: 'None' }).initialEventsEnd(POD, 12).toString()) as { object: { rows: Array<{ object: unknown }> } };
  // The end of the initial events carries its metadata even without objects asked for.
  assert.deepEqual(end.object.rows[0]!.object, { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: { resourceVersion: '12', annotations: { 'k8s.io/initial-events-end': 'true' } } });
});

test('a metadata-only watch in JSON: each event\'s metadata, bookmarks of the form', () => {
  const a = stored(POD, '{"kind":"Pod","apiVersion":"v1","metadata":{"name":"x","resourceVersion":"7"},"spec":{}}', 7);
  const added: StoreEvent = { type: 'ADDED', object: a, prev: undefined, resourceVersion: 7, at: 0 };
  const w = JSON_METADATA_WATCH.v1beta1;
  assert.equal(w.event(POD, added, 'ADDED')!.toString(), '{"type":"ADDED","object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1beta1","metadata":{"name":"x","resourceVersion":"7"}}}\n');
  assert.equal(w.event(POD, added, 'ADDED'), w.event(POD, added, 'ADDED'), 'made once per event');
  assert.equal(w.bookmark(POD, 9).toString(), '{"type":"BOOKMARK","object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1beta1","metadata":{"resourceVersion":"9"}}}\n');
  const end = JSON.parse(w.initialEventsEnd(POD, 9).toString()) as { object: { metadata: { annotations: Record<string, string> } } };
  assert.equal(end.object.metadata.annotations['k8s.io/initial-events-end'], 'true');
  assert.equal(Buffer.from(end.object.metadata.annotations['kubernetes.io/initial-events-list-blueprint']!, 'base64').toString(), '{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1beta1","metadata":{},"items":null}\n');
});
