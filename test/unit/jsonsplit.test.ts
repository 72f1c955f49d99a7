import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ListBodyError, ListBodySplitter, ValueScanner, type ListEnvelope, type ListBodySplitterOptions } from '../../src/reflector/jsonsplit.ts';
import { seededRandom } from '../support/random.ts';

// Seeded, so a failure can be replayed from the seed in its message.
const mulberry32 = seededRandom;

type Rng = () => number;
const int = (rng: Rng, lo: number, hi: number) => lo + Math.floor(rng() * (hi - lo + 1));
const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[Math.floor(rng() * xs.length)]!;

// Fragments chosen to trip a byte scanner: structural characters, escapes, quotes next to
// backslashes, multi-byte UTF-8 (2, 3 and 4 bytes), control characters that must be escaped.
const NASTY = ['{', '}', '[', ']', '"', '\\', '\\"', '"\\', '\\\\', ',', ':', '"}', '"]', '{"a":"b"}', 'é', '日本', '😀', '🇫🇷', '\n', '\t', '\u0000', '\u001f', '\u2028', '<&>', '/', ' ', 'plain', 'x'.repeat(40)];

function nasty(rng: Rng): string {
  let s = '';
  for (let n = int(rng, 0, 6); n > 0; n--) s += pick(rng, NASTY);
  return s;
}

function name(rng: Rng): string {
  return `${pick(rng, ['web', 'api', 'db', 'cache', 'worker'])}-${Math.floor(rng() * 1e9).toString(36)}`;
}

function managedFields(rng: Rng): unknown[] {
  const out = [];
  for (let n = int(rng, 0, 3); n > 0; n--) {
    out.push({
      manager: pick(rng, ['kubelet', 'kube-controller-manager', 'kubectl-client-side-apply']),
      operation: pick(rng, ['Update', 'Apply']),
      apiVersion: 'v1',
      time: '2024-05-01T12:00:00Z',
      fieldsType: 'FieldsV1',
      fieldsV1: {
        'f:metadata': { 'f:labels': { '.': {}, 'f:app': {} }, 'f:ownerReferences': { '.': {}, 'k:{"uid":"5b0c"}': {} } },
        'f:spec': { 'f:containers': { 'k:{"name":"main"}': { '.': {}, 'f:image': {}, 'f:ports': { 'k:{"containerPort":8080,"protocol":"TCP"}': {} } } } },
      },
      ...(rng() < 0.3 ? { subresource: 'status' } : {}),
    });
  }
  return out;
}

function pod(rng: Rng, i: number): Record<string, unknown> {
  const labels: Record<string, string> = { app: pick(rng, ['web', 'api']), 'pod-template-hash': Math.floor(rng() * 1e8).toString(16) };
  if (rng() < 0.3) labels[nasty(rng)] = nasty(rng);
  const annotations: Record<string, string> = {};
  for (let n = int(rng, 0, 4); n > 0; n--) annotations[`example.com/${nasty(rng)}`] = nasty(rng);
  if (rng() < 0.5) annotations['kubectl.kubernetes.io/last-applied-configuration'] = JSON.stringify({ metadata: { labels, note: nasty(rng) } });
  const containers = [];
  for (let n = int(rng, 1, 3); n > 0; n--) {
    containers.push({
      name: name(rng),
      image: `registry.example.com/${name(rng)}:v${int(rng, 1, 9)}`,
      command: ['/bin/sh', '-c', `echo "${nasty(rng)}" && exec app --flag='{"a":[1,2]}'`],
      env: Array.from({ length: int(rng, 0, 4) }, () => ({ name: `E_${int(rng, 0, 99)}`, value: nasty(rng) })),
      ports: [{ containerPort: int(rng, 1, 65535), protocol: 'TCP' }],
      resources: { limits: { cpu: '500m', memory: '128Mi' }, requests: {} },
    });
  }
  return {
    metadata: {
      name: `${name(rng)}-${i}`,
      namespace: pick(rng, ['default', 'kube-system', 'ns-é', 'ns-日本']),
      uid: `${Math.floor(rng() * 1e12).toString(16)}-0000-4000-8000-${i}`,
      resourceVersion: String(int(rng, 1, 1e9)),
      creationTimestamp: '2024-05-01T12:00:00Z',
      labels,
      annotations,
      ownerReferences: rng() < 0.7 ? [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: name(rng), uid: '5b0c', controller: true, blockOwnerDeletion: true }] : [],
      managedFields: managedFields(rng),
    },
    spec: {
      containers,
      nodeSelector: rng() < 0.5 ? {} : { 'kubernetes.io/os': 'linux' },
      tolerations: [{ key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 }],
      // Arrays of arrays, empty arrays and objects, numbers of every JSON form, null.
      matrix: [[1, [2, [3, []]]], [], [{}], [[-0.5, 1e21, 6.02e-23, -7]], [null, true, false]],
      priority: rng() < 0.5 ? null : int(rng, -1000, 1000),
    },
    status: {
      phase: pick(rng, ['Pending', 'Running', 'Succeeded']),
      conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: null, message: nasty(rng) }],
      podIP: `10.${int(rng, 0, 255)}.${int(rng, 0, 255)}.${int(rng, 0, 255)}`,
    },
  };
}

// JSON text of a value in one of three styles. 'noisy' puts random whitespace between every token
// and escapes string characters at random (\uXXXX for anything, including each half of a
// surrogate pair, \/ for slashes, Go's \u003c \u003e \u0026), which JSON.stringify never does.
type Style = 'compact' | 'pretty' | 'noisy';
const WS = [' ', '\t', '\n', '\r', '  ', '\n    '];

function ws(rng: Rng): string {
  return rng() < 0.5 ? '' : pick(rng, WS);
}

function unicodeEscape(rng: Rng, code: number): string {
  const hex = code.toString(16).padStart(4, '0');
  return `\\u${rng() < 0.5 ? hex : hex.toUpperCase()}`;
}

function noisyString(rng: Rng, s: string): string {
  let out = '"';
  for (let k = 0; k < s.length; k++) {
    const ch = s[k]!;
    const code = s.charCodeAt(k);
    if (code >= 0xd800 && code <= 0xdbff) {
      // A surrogate pair is escaped as two \u escapes or written raw, never half and half.
      const low = s.charCodeAt(k + 1);
      out += rng() < 0.3 ? unicodeEscape(rng, code) + unicodeEscape(rng, low) : s.slice(k, k + 2);
      k++;
    } else if (rng() < 0.15 || code < 0x20) out += unicodeEscape(rng, code);
    else if (ch === '"') out += '\\"';
    else if (ch === '\\') out += '\\\\';
    else if (ch === '/' && rng() < 0.5) out += '\\/';
    else if ((ch === '<' || ch === '>' || ch === '&') && rng() < 0.5) out += unicodeEscape(rng, code);
    else out += ch;
  }
  return out + '"';
}

function noisy(rng: Rng, v: unknown): string {
  if (typeof v === 'string') return noisyString(rng, v);
  if (Array.isArray(v)) return `[${ws(rng)}${v.map((x) => noisy(rng, x) + ws(rng)).join(`,${ws(rng)}`)}]`;
  if (v !== null && typeof v === 'object') {
    const parts = Object.entries(v).map(([k, x]) => `${noisyString(rng, k)}${ws(rng)}:${ws(rng)}${noisy(rng, x)}${ws(rng)}`);
    return `{${ws(rng)}${parts.join(`,${ws(rng)}`)}}`;
  }
  return JSON.stringify(v);
}

function serialize(rng: Rng, v: unknown, style: Style): string {
  if (style === 'compact') return JSON.stringify(v);
  if (style === 'pretty') return JSON.stringify(v, null, 2);
  return noisy(rng, v);
}

interface ListCase {
  body: Buffer;
  itemTexts: string[];
  items: unknown[];
  envelope: ListEnvelope;
  label: string;
}

const ORDERS = [
  ['kind', 'apiVersion', 'metadata', 'items'],
  ['items', 'kind', 'apiVersion', 'metadata'],
  ['kind', 'items', 'metadata', 'apiVersion'],
  ['metadata', 'items', 'apiVersion', 'kind'],
] as const;

function makeList(rng: Rng, style: Style, order: readonly string[], nItems: number): ListCase {
  const items = Array.from({ length: nItems }, (_, i) => pod(rng, i));
  const metadata: Record<string, unknown> = { resourceVersion: String(int(rng, 1, 1e9)) };
  if (rng() < 0.5) {
    metadata.continue = Buffer.from(JSON.stringify({ v: 'meta.k8s.io/v1', rv: 5, start: `${nasty(rng)}/` })).toString('base64');
    metadata.remainingItemCount = int(rng, 0, 1e6);
  }
  if (rng() < 0.3) metadata.selfLink = '/api/v1/pods';
  const fields: Record<string, unknown> = { kind: 'PodList', apiVersion: 'v1', metadata };
  const itemTexts = items.map((it) => serialize(rng, it, style));
  const sep = style === 'compact' ? ',' : style === 'pretty' ? ',\n    ' : `,${ws(rng)}`;
  const parts = order.map((k) => {
    const value = k === 'items' ? (itemTexts.length === 0 && style !== 'compact' ? `[${ws(rng)}]` : `[${style === 'compact' ? '' : ws(rng)}${itemTexts.join(sep)}${style === 'compact' ? '' : ws(rng)}]`) : serialize(rng, fields[k], style);
    const key = style === 'noisy' ? noisyString(rng, k) : JSON.stringify(k);
    return style === 'compact' ? `${key}:${value}` : `${ws(rng)}${key}${ws(rng)}:${rng() < 0.5 ? ' ' : ws(rng)}${value}${ws(rng)}`;
  });
  const body = style === 'compact' ? `{${parts.join(',')}}` : `${ws(rng)}{\n${parts.join(',\n')}\n}${ws(rng)}`;
  const envelope: ListEnvelope = { kind: 'PodList', apiVersion: 'v1', metadata: {} };
  if (metadata.resourceVersion !== undefined) envelope.metadata.resourceVersion = metadata.resourceVersion as string;
  if (metadata.continue !== undefined) envelope.metadata.continue = metadata.continue as string;
  if (metadata.remainingItemCount !== undefined) envelope.metadata.remainingItemCount = metadata.remainingItemCount as number;
  return { body: Buffer.from(body), itemTexts, items, envelope, label: `${style} ${order.join(',')} ${nItems} items` };
}

// Cuts a body into chunks, each copied into a fresh buffer the way a socket delivers them. Sizes are
// drawn from one of several shapes so runs see both byte-at-a-time and large chunks.
function chunkings(rng: Rng, body: Buffer): Buffer[] {
  const shape = int(rng, 0, 3);
  const fixed = int(rng, 1, 4096);
  const out: Buffer[] = [];
  for (let at = 0; at < body.length; ) {
    let size: number;
    if (shape === 0) size = int(rng, 1, 16);
    else if (shape === 1) size = Math.max(1, Math.floor(Math.exp(rng() * Math.log(65536))));
    else if (shape === 2) size = fixed;
    else size = int(rng, 1, 65536);
    const end = Math.min(body.length, at + size);
    const chunk = Buffer.allocUnsafeSlow(end - at);
    body.copy(chunk, 0, at, end);
    out.push(chunk);
    at = end;
  }
  return out;
}

function split(chunks: readonly Buffer[], options?: ListBodySplitterOptions): { items: Buffer[]; envelope: ListEnvelope } {
  const s = new ListBodySplitter(options);
  const items: Buffer[] = [];
  for (const c of chunks) for (const it of s.push(c)) items.push(it);
  return { items, envelope: s.end() };
}

function splitString(body: string, options?: ListBodySplitterOptions) {
  return split([Buffer.from(body)], options);
}

const strings = (bufs: Buffer[]) => bufs.map((b) => b.toString());

test('splits a compact list and returns the envelope', () => {
  const r = splitString('{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"42","continue":"abc","remainingItemCount":7},"items":[{"a":1},{"b":[2,{"c":"}"}]}]}');
  assert.deepEqual(strings(r.items), ['{"a":1}', '{"b":[2,{"c":"}"}]}']);
  assert.deepEqual(r.envelope, { kind: 'PodList', apiVersion: 'v1', metadata: { resourceVersion: '42', continue: 'abc', remainingItemCount: 7 } });
});

test('items may come first, metadata last, and other metadata fields are dropped', () => {
  const r = splitString('{"items":[{"x":"]"}],"apiVersion":"v1","kind":"ConfigMapList","metadata":{"selfLink":"/x","resourceVersion":"9"}}');
  assert.deepEqual(strings(r.items), ['{"x":"]"}']);
  assert.deepEqual(r.envelope, { kind: 'ConfigMapList', apiVersion: 'v1', metadata: { resourceVersion: '9' } });
});

test('empty items, null items, missing metadata, pretty-printed whitespace', () => {
  assert.deepEqual(splitString('{"kind":"L","apiVersion":"v1","metadata":{},"items":[]}').items, []);
  assert.deepEqual(splitString('{"kind":"L","apiVersion":"v1","items":null}').envelope, { kind: 'L', apiVersion: 'v1', metadata: {} });
  const r = splitString(' \r\n{\n\t"kind" : "L" ,\n  "apiVersion":"v1",\n  "items" : [ \n ]\n  , "metadata" : { "resourceVersion" : "1" }\n}\n\n');
  assert.deepEqual(r.items, []);
  assert.deepEqual(r.envelope.metadata, { resourceVersion: '1' });
  const p = splitString(JSON.stringify({ kind: 'L', apiVersion: 'v1', metadata: {}, items: [{ a: [1, [2]] }, { b: {} }] }, null, 4));
  assert.deepEqual(p.items.map((b) => JSON.parse(b.toString()) as unknown), [{ a: [1, [2]] }, { b: {} }]);
});

test('strings with braces, brackets, escaped quotes and backslashes, unicode; item bytes are exact', () => {
  const items = [
    '{"s":"{[\\"}]\\\\","t":"\\\\\\"","u":"日本 é 😀","e":"\\ud83d\\ude00\\u0041\\/"}',
    '{ "k{" : [ "]" , { "}" : "\\\\" } ] , "n" : [ [ [ ] ] ] }',
    '{"\\"":"\\\\\\\\","x":"\\"}"}',
    // Longer than the stretch of a string walked byte by byte, so the indexOf path sees escapes too.
    `{"long":"${'y'.repeat(70)}\\\\\\"${'z'.repeat(70)}\\\\","after":["${'\\"'.repeat(50)}"]}`,
  ];
  const body = `{"kind":"L","apiVersion":"v1","items":[${items.join(' ,\n')}],"metadata":{"continue":"\\"}]"}}`;
  const whole = Buffer.from(body);
  // Every split point, including those inside escapes and inside multi-byte characters.
  for (let cut = 0; cut <= whole.length; cut++) {
    const r = split([whole.subarray(0, cut), whole.subarray(cut)]);
    assert.deepEqual(strings(r.items), items, `cut at ${cut}`);
    assert.equal(r.envelope.metadata.continue, '"}]');
  }
  const bytewise = split(Array.from(whole, (_, i) => whole.subarray(i, i + 1)));
  assert.deepEqual(strings(bytewise.items), items);
});

test('an escaped key "items" is still the items', () => {
  const r = splitString('{"kind":"L","apiVersion":"v1","\\u0069tems":[{"a":1}]}');
  assert.deepEqual(strings(r.items), ['{"a":1}']);
});

test('items are owned buffers: not views of the input nor of the shared pool', () => {
  const body = Buffer.from('{"kind":"L","apiVersion":"v1","items":[{"a":1},{"b":"' + 'x'.repeat(10000) + '"},{"c":3}]}');
  const chunks = [body.subarray(0, 50), body.subarray(50, 5000), body.subarray(5000)].map((c) => Buffer.from(c));
  const r = split(chunks);
  for (const c of chunks) c.fill(0);
  assert.equal(r.items.length, 3);
  assert.equal(r.items[0]!.toString(), '{"a":1}');
  assert.equal(r.items[2]!.toString(), '{"c":3}');
  for (const it of r.items) {
    assert.equal(it.byteOffset, 0);
    assert.equal(it.buffer.byteLength, it.length);
  }
});

test('items come out as soon as they are complete', () => {
  const s = new ListBodySplitter();
  assert.deepEqual(s.push(Buffer.from('{"items":[{"a":1},{"b"')), [Buffer.from('{"a":1}')]);
  assert.deepEqual(s.push(Buffer.from(':2}')), [Buffer.from('{"b":2}')]);
  assert.deepEqual(s.push(Buffer.from(']')), []);
  assert.equal(s.count, 2);
  s.push(Buffer.from(',"kind":"L","apiVersion":"v1"}'));
  assert.equal(s.end().kind, 'L');
});

test('malformed bodies throw a clear error', () => {
  const cases: [string, RegExp][] = [
    ['', /ends early, expecting '\{'/],
    ['[]', /expected '\{' \(a JSON object\), found '\['/],
    ['{"items":[{"a":1}', /ends early, expecting ',' or '\]'/],
    ['{"items":[{"a":"1}]}', /ends early, inside items\[0\]/],
    ['{"items":[{"a":[1}]}', /items\[0\]: '\}' closes '\['/],
    ['{"items":[{"a":1}}]}', /expected ',' or '\]' after items\[0\], found '\}'/],
    ['{"items":[{"a":1} {"b":2}]}', /expected ',' or '\]' after items\[0\], found '\{'/],
    ['{"items":[{"a":1},]}', /expected items\[1\] to be an object, found '\]'/],
    ['{"items":[1,2]}', /expected items\[0\] to be an object, found '1'/],
    ['{"items":{}}', /the value of "items": .*not an array|"items" is not an array/],
    ['{"items":"x"}', /"items" is not an array/],
    ['{"items":[],"items":[]}', /"items" appears twice/],
    ['{"items":[{x:1}]}', /items\[0\]: unexpected 'x'/],
    ['{"items":[{"a":1é}]}', /items\[0\]: unexpected byte 0xc3/],
    ['{"kind":"L","apiVersion":"v1","items":[]}}', /unexpected '\}' after the end of the body/],
    ['{"kind":"L","apiVersion":"v1","items":[]} x', /unexpected 'x' after the end/],
    ['{"kind":"L" "items":[]}', /expected ',' or '\}' after the value of "kind", found '"'/],
    ['{"kind" "L"}', /expected ':' after key "kind"/],
    ['{kind:"L"}', /expected a key or '\}', found 'k'/],
    ['{"kind":"L",}', /expected a key, found '\}'/],
    ['{"kind":tru,"items":[]}', /malformed the value of "kind"/],
    ['{"kind":"L","apiVersion":"v1"}', /not a list: no "items" \(kind L\)/],
    ['{"kind":"Status","apiVersion":"v1","status":"Failure","code":410}', /not a list: no "items" \(kind Status\)/],
    ['{"apiVersion":"v1","items":[]}', /"kind" is missing/],
    ['{"kind":"L","items":[]}', /"apiVersion" is missing/],
    ['{"kind":"L","apiVersion":"v1","items":[],"metadata":[]}', /"metadata" is not an object/],
    ['{"kind":"L","apiVersion":"v1","items":[],"metadata":{"resourceVersion":5}}', /resourceVersion is not a string/],
    ['{"kind":"L","apiVersion":"v1","items":[],"metadata":{"continue":false}}', /continue is not a string/],
    ['{"kind":"L","apiVersion":"v1","items":[],"metadata":{"remainingItemCount":"3"}}', /remainingItemCount is not an integer/],
  ];
  for (const [body, re] of cases) {
    assert.throws(() => splitString(body), (err: Error) => {
      assert.ok(err instanceof ListBodyError, body);
      assert.match(err.message, re, body);
      return true;
    });
    // The same, a byte at a time.
    const b = Buffer.from(body);
    assert.throws(() => split(Array.from(b, (_, i) => b.subarray(i, i + 1))), re, `${body} (bytewise)`);
  }
});

test('errors say where: the byte offset in the body', () => {
  assert.throws(() => splitString('{"items":[{"a":1},{"b":]}]}'), /items\[1\]: '\]' closes '\{' at byte 23$/);
});

test('every proper prefix of a body is rejected by end()', () => {
  const body = Buffer.from('{"kind":"L","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[{"a":"\\"}"},{"b":[1,2.5e3,null]}]}');
  for (let n = 0; n < body.length; n++) {
    assert.throws(() => split([body.subarray(0, n)]), /ends early/, `prefix of ${n} bytes`);
  }
  assert.equal(split([body]).items.length, 2);
});

test('limits: item size, field size, nesting depth', () => {
  const big = `{"kind":"L","apiVersion":"v1","items":[{"a":"${'x'.repeat(100)}"}]}`;
  assert.throws(() => splitString(big, { maxItemBytes: 50 }), /items\[0\] is larger than 50 bytes/);
  const b = Buffer.from(big);
  // Over the limit while still spanning chunks: refused before the item is complete.
  const s = new ListBodySplitter({ maxItemBytes: 50 });
  s.push(b.subarray(0, 60));
  assert.throws(() => s.push(b.subarray(60, 120)), /items\[0\] is larger than 50 bytes/);
  assert.throws(() => s.push(b.subarray(120)), /already failed/);
  assert.equal(splitString(big, { maxItemBytes: 109 }).items.length, 1);
  assert.throws(() => splitString(`{"kind":"${'k'.repeat(100)}","items":[]}`, { maxFieldBytes: 20 }), /the value of "kind" is larger than 20 bytes/);
  const deep = (d: number) => `{"kind":"L","apiVersion":"v1","items":[${'['.repeat(d - 1).replace(/^/, '{"a":')}${']'.repeat(d - 1)}}]}`;
  assert.equal(splitString(deep(100), { maxDepth: 100 }).items.length, 1);
  assert.throws(() => splitString(deep(101), { maxDepth: 100 }), /nesting deeper than 100/);
  assert.equal(splitString(deep(3), { maxDepth: 3 }).items.length, 1);
  assert.throws(() => splitString(deep(4), { maxDepth: 3 }), /nesting deeper than 3/);
  // The default allows Go's limit.
  assert.equal(splitString(deep(10000)).items.length, 1);
});

test('push after end, or after a failure, throws', () => {
  const s = new ListBodySplitter();
  s.push(Buffer.from('{"kind":"L","apiVersion":"v1","items":[]}'));
  s.end();
  assert.throws(() => s.push(Buffer.from(' ')), /already ended/);
  const f = new ListBodySplitter();
  assert.throws(() => f.push(Buffer.from('x')), /expected '\{'/);
  assert.throws(() => f.end(), /already failed/);
});

test('ValueScanner finds the end of scalars, strings and containers across pieces', () => {
  const sc = new ValueScanner();
  const ends = (text: string, cuts: number[]) => {
    const b = Buffer.from(text);
    sc.reset();
    let from = 0;
    for (const to of [...cuts, b.length]) {
      const e = sc.scan(b, from, to);
      if (e >= 0) return e;
      from = to;
    }
    return -1;
  };
  assert.equal(ends('"a\\"b" x', [2, 3]), 6);
  assert.equal(ends('"a\\\\" x', [3]), 5);
  assert.equal(ends('123, x', [1]), 3);
  assert.equal(ends('123', []), -1);
  assert.equal(ends('[1,{"a":"]"}] ,', [4, 9]), 13);
  assert.equal(ends('{"a":"\\\\\\"}"}x', [6, 7, 8, 9]), 13);
});

// The property test: realistic lists in every layout and style, cut at random, must split into
// exactly the serialized items, and every item must parse to the same value as the whole body does.
test('property: random lists in random chunkings split exactly like JSON.parse of the whole', () => {
  const seed = 20240501;
  const rng = mulberry32(seed);
  const lists: ListCase[] = [];
  for (const style of ['compact', 'pretty', 'noisy'] as const) {
    for (const order of ORDERS) {
      lists.push(makeList(rng, style, order, int(rng, 5, 25)));
      lists.push(makeList(rng, style, order, int(rng, 0, 2)));
    }
  }
  const RUNS = 600;
  for (let run = 0; run < RUNS; run++) {
    const c = lists[run % lists.length]!;
    const chunks = chunkings(rng, c.body);
    const where = `run ${run} (seed ${seed}), ${c.label}, ${chunks.length} chunks`;
    const r = split(chunks);
    // Destroy the input: the items must not depend on it.
    for (const ch of chunks) ch.fill(0x7b);
    assert.equal(r.items.length, c.items.length, where);
    const whole = JSON.parse(c.body.toString()) as { items: unknown[] };
    for (let k = 0; k < r.items.length; k++) {
      const it = r.items[k]!;
      assert.equal(it.toString(), c.itemTexts[k], `${where}: item ${k} bytes`);
      assert.deepEqual(JSON.parse(it.toString()), whole.items[k], `${where}: item ${k}`);
      assert.ok(it.byteOffset === 0 && it.buffer.byteLength === it.length, `${where}: item ${k} is not an owned buffer`);
    }
    assert.deepEqual(whole.items, c.items, where);
    assert.deepEqual(r.envelope, c.envelope, where);
  }
});

// What JSON.parse makes of a body, held to the same rules as the splitter: a list whose items are
// all objects, with string kind and apiVersion. undefined if the body is not valid JSON.
function oracle(body: Buffer): { ok: true; items: unknown[]; envelope: ListEnvelope } | { ok: false; json: boolean } {
  let v: unknown;
  try {
    v = JSON.parse(body.toString());
  } catch {
    return { ok: false, json: false };
  }
  const o = v as Record<string, unknown>;
  const m = o?.metadata as Record<string, unknown> | null | undefined;
  const valid =
    typeof v === 'object' && v !== null && !Array.isArray(v) &&
    (o.items === null || (Array.isArray(o.items) && o.items.every((x) => typeof x === 'object' && x !== null && !Array.isArray(x)))) &&
    typeof o.kind === 'string' && typeof o.apiVersion === 'string' &&
    (m === undefined || m === null || (typeof m === 'object' && !Array.isArray(m) &&
      (m.resourceVersion === undefined || typeof m.resourceVersion === 'string') &&
      (m.continue === undefined || typeof m.continue === 'string') &&
      (m.remainingItemCount === undefined || m.remainingItemCount === null || Number.isSafeInteger(m.remainingItemCount))));
  if (!valid) return { ok: false, json: true };
  const envelope: ListEnvelope = { kind: o.kind as string, apiVersion: o.apiVersion as string, metadata: {} };
  if (m?.resourceVersion !== undefined) envelope.metadata.resourceVersion = m.resourceVersion as string;
  if (m?.continue !== undefined) envelope.metadata.continue = m.continue as string;
  if (m?.remainingItemCount !== undefined && m.remainingItemCount !== null) envelope.metadata.remainingItemCount = m.remainingItemCount as number;
  return { ok: true, items: (o.items ?? []) as unknown[], envelope };
}

// Corrupt one byte (replace, delete or insert) and compare with JSON.parse: a body JSON.parse
// accepts as a list must split to the same items and envelope; one it rejects must be rejected by
// the splitter or by parsing the items it returned (scalars inside items are left to that parse).
test('property: corrupted bodies are rejected exactly when JSON.parse rejects them', () => {
  const seed = 777;
  const rng = mulberry32(seed);
  const BYTES = [0x7b, 0x7d, 0x5b, 0x5d, 0x22, 0x5c, 0x2c, 0x3a, 0x20, 0x0a, 0x00, 0x61, 0x31, 0x74, 0xc3, 0xff, 0x2d];
  let rejected = 0;
  for (let run = 0; run < 1500; run++) {
    const c = makeList(rng, pick(rng, ['compact', 'pretty', 'noisy'] as const), pick(rng, ORDERS), int(rng, 0, 3));
    const at = int(rng, 0, c.body.length - 1);
    const op = int(rng, 0, 2);
    const b = pick(rng, BYTES);
    const parts = [c.body.subarray(0, at), op === 2 ? Buffer.from([b, c.body[at]!]) : op === 0 ? Buffer.from([b]) : Buffer.alloc(0), c.body.subarray(at + 1)];
    const body = Buffer.concat(parts);
    const where = `run ${run} (seed ${seed}): op ${op} byte 0x${b.toString(16)} at ${at} of ${JSON.stringify(body.toString())}`;
    const want = oracle(body);
    let got: { items: unknown[]; envelope: ListEnvelope } | Error;
    try {
      const r = split(chunkings(rng, body));
      got = { items: r.items.map((it) => JSON.parse(it.toString()) as unknown), envelope: r.envelope };
    } catch (err) {
      got = err as Error;
    }
    if (want.ok) {
      assert.ok(!(got instanceof Error), `${where}: rejected a valid list: ${got instanceof Error ? got.message : ''}`);
      assert.deepEqual(got, { items: want.items, envelope: want.envelope }, where);
    } else {
      assert.ok(got instanceof Error, `${where}: accepted a body JSON.parse ${want.json ? 'reads as not a list' : 'rejects'}`);
      rejected++;
    }
  }
  assert.ok(rejected > 300, `only ${rejected} corruptions were invalid; the test is not exercising rejection`);
});
