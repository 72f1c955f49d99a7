import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WatchFramer, WatchStreamError, type WatchFrame, type WatchFramerOptions } from '../../src/reflector/watchframe.ts';
import { seededRandom } from '../support/random.ts';

// Seeded, so a failure can be replayed from the seed in its message.
const mulberry32 = seededRandom;

type Rng = () => number;
const int = (rng: Rng, lo: number, hi: number) => lo + Math.floor(rng() * (hi - lo + 1));
const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[Math.floor(rng() * xs.length)]!;

function frames(chunks: readonly Buffer[], options?: WatchFramerOptions): WatchFrame[] {
  const w = new WatchFramer(options);
  const out: WatchFrame[] = [];
  for (const c of chunks) for (const f of w.push(c)) out.push(f);
  w.end();
  return out;
}

const bytewise = (s: string) => {
  const b = Buffer.from(s);
  return Array.from(b, (_, i) => b.subarray(i, i + 1));
};

const simple = (fs: WatchFrame[]) => fs.map((f) => [f.type, f.object.toString(), f.line.toString()]);

test('frames events of the apiserver JSON encoder', () => {
  const stream =
    '{"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"a","resourceVersion":"1"}}}\n' +
    '{"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"2","annotations":{"k8s.io/initial-events-end":"true"}}}}\n';
  const want = [
    ['ADDED', '{"kind":"Pod","metadata":{"name":"a","resourceVersion":"1"}}', '{"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"a","resourceVersion":"1"}}}'],
    ['BOOKMARK', '{"kind":"Pod","metadata":{"resourceVersion":"2","annotations":{"k8s.io/initial-events-end":"true"}}}', '{"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"2","annotations":{"k8s.io/initial-events-end":"true"}}}}'],
  ];
  assert.deepEqual(simple(frames([Buffer.from(stream)])), want);
  assert.deepEqual(simple(frames(bytewise(stream))), want);
});

test('any key order, whitespace, blank lines, a "type" key inside the object', () => {
  const stream = '\n  {  "object" : { "type" : "x", "o": {"object":"}"} } ,\t"type" : "DELETED" }  \n\n{"type":"ERROR","object":{"kind":"Status","code":410}}\r\n';
  assert.deepEqual(simple(frames(bytewise(stream))), [
    ['DELETED', '{ "type" : "x", "o": {"object":"}"} }', '  {  "object" : { "type" : "x", "o": {"object":"}"} } ,\t"type" : "DELETED" }  '],
    ['ERROR', '{"kind":"Status","code":410}', '{"type":"ERROR","object":{"kind":"Status","code":410}}\r'],
  ]);
});

test('escaped keys and types are decoded; unknown keys are ignored', () => {
  const fs = frames([Buffer.from('{"t\\u0079pe":"MODIFIED","extra":[1,{"a":"]"}],"\\u006fbject":{"a":"\\"\\\\"}}\n')]);
  assert.deepEqual(simple(fs).map((f) => f.slice(0, 2)), [['MODIFIED', '{"a":"\\"\\\\"}']]);
  assert.equal(frames([Buffer.from('{"type":"A\\u00e9","object":{}}\n')])[0]!.type, 'Aé');
});

test('a partial line waits for its newline; objects and lines are owned buffers', () => {
  const w = new WatchFramer();
  const first = Buffer.from('{"type":"ADDED","object":{"a":"日');
  const second = Buffer.from('本"}}\n{"type":"MODIFIED",');
  assert.deepEqual(w.push(first), []);
  const got = w.push(second);
  assert.equal(got.length, 1);
  // The first chunk is wholly consumed; the event must not depend on it. (The second is still
  // referenced by the partial line, which is why chunks must not be modified after push.)
  first.fill(0);
  assert.equal(got[0]!.object.toString(), '{"a":"日本"}');
  assert.equal(got[0]!.line.toString(), '{"type":"ADDED","object":{"a":"日本"}}');
  for (const b of [got[0]!.object, got[0]!.line]) {
    assert.equal(b.byteOffset, 0);
    assert.equal(b.buffer.byteLength, b.length);
  }
  assert.deepEqual(simple(w.push(Buffer.from('"object":{}}\n'))), [['MODIFIED', '{}', '{"type":"MODIFIED","object":{}}']]);
  w.end();
});

test('the partial line is bounded', () => {
  const w = new WatchFramer({ maxLineBytes: 100 });
  w.push(Buffer.from('{"type":"ADDED","object":{"a":"'));
  w.push(Buffer.from('x'.repeat(60)));
  // Refused as soon as the unfinished line is too long, not when its newline finally comes.
  assert.throws(() => w.push(Buffer.from('x'.repeat(60))), /line 1 is longer than 100 bytes/);
  assert.throws(() => w.push(Buffer.from('"}}\n')), /already failed/);
  // A complete line over the limit in one chunk, too.
  const line = `{"type":"ADDED","object":{"a":"${'x'.repeat(100)}"}}\n`;
  assert.throws(() => frames([Buffer.from(line)], { maxLineBytes: 100 }), /longer than 100 bytes/);
  assert.equal(frames([Buffer.from(line)], { maxLineBytes: line.length - 1 }).length, 1);
});

test('end() rejects a stream cut inside an event and accepts trailing whitespace', () => {
  const w = new WatchFramer();
  w.push(Buffer.from('{"type":"ADDED","object":{}}\n{"type":"ADDED","obj'));
  assert.throws(() => w.end(), /ends inside line 2/);
  const ok = new WatchFramer();
  ok.push(Buffer.from('{"type":"ADDED","object":{}}\n  \t'));
  ok.end();
  assert.throws(() => ok.push(Buffer.from('\n')), /already ended/);
});

test('malformed events throw a clear error', () => {
  const cases: [string, RegExp][] = [
    ['[]', /expected '\{', found '\['/],
    ['{"type":"ADDED"}', /no "object"/],
    ['{"object":{}}', /no "type"/],
    ['{}', /no "type"/],
    ['{"type":"ADDED","object":[]}', /"object" is not a JSON object/],
    ['{"type":"ADDED","object":"x"}', /"object" is not a JSON object/],
    ['{"type":1,"object":{}}', /"type" is not a string/],
    ['{"type":"A","type":"B","object":{}}', /"type" appears twice/],
    ['{"type":"A","object":{},"object":{}}', /"object" appears twice/],
    ['{"type":"A","object":{"a":1}', /expected ',' or '\}', found end of input/],
    ['{"type":"A","object":{"a":1}}}', /unexpected '\}' after the event/],
    ['{"type":"A","object":{"a":[1}}}', /the value of "object": '\}' closes '\['/],
    ['{"type":"A","object":{"a":"1}}', /the value of "object" is cut off by the end of the line/],
    ['{"type":"A" "object":{}}', /expected ',' or '\}', found '"'/],
    ['{"type" "A","object":{}}', /expected ':' after key "type"/],
    ['{type:"A","object":{}}', /expected a key, found 't'/],
    ['{"type":"A\u0001","object":{}}', /malformed "type"/],
    ['{"type":"A","object":{x:1}}', /the value of "object": unexpected 'x'/],
    ['{"type":"A","object":{}}garbage', /unexpected 'g' after the event/],
  ];
  for (const [line, re] of cases) {
    assert.throws(() => frames([Buffer.from(`{"type":"ADDED","object":{}}\n${line}\n`)]), (err: Error) => {
      assert.ok(err instanceof WatchStreamError, line);
      assert.match(err.message, re, line);
      assert.match(err.message, /^watch stream: line 2: .* at byte \d+$/, line);
      return true;
    });
    assert.throws(() => frames(bytewise(`${line}\n`)), re, `${line} (bytewise)`);
  }
});

// Random objects shaped like Kubernetes ones, with strings made to confuse a byte scanner.
const NASTY = ['{', '}', '[', ']', '"', '\\', '\\"', '"\\', '\\\\', ',', ':', '"object":', '"type":', 'é', '日本', '😀', '\n', '\r', '\t', '\u0000', '\u2028', ' ', 'plain'];

function nasty(rng: Rng): string {
  let s = '';
  for (let n = int(rng, 0, 5); n > 0; n--) s += pick(rng, NASTY);
  return s;
}

function value(rng: Rng, depth: number): unknown {
  const r = rng();
  if (depth > 4 || r < 0.35) return pick(rng, [nasty(rng), int(rng, -1e6, 1e6), rng() * 1e-3, 1e21, true, false, null, '']);
  if (r < 0.6) return Array.from({ length: int(rng, 0, 4) }, () => value(rng, depth + 1));
  const o: Record<string, unknown> = {};
  for (let n = int(rng, 0, 5); n > 0; n--) o[rng() < 0.3 ? nasty(rng) : pick(rng, ['f:spec', 'k:{"name":"c"}', 'items', 'object', 'type', 'data'])] = value(rng, depth + 1);
  return o;
}

function randomObject(rng: Rng, i: number): Record<string, unknown> {
  return {
    kind: 'Pod',
    apiVersion: 'v1',
    metadata: {
      name: `p-${i}`,
      namespace: 'ns-日本',
      resourceVersion: String(1000 + i),
      labels: { app: 'web', [nasty(rng)]: nasty(rng) },
      annotations: { note: nasty(rng), 'last-applied': JSON.stringify({ spec: value(rng, 2) }) },
      managedFields: [{ manager: 'kubelet', operation: 'Update', fieldsType: 'FieldsV1', fieldsV1: { 'f:status': { 'f:conditions': { 'k:{"type":"Ready"}': {} } } } }],
    },
    spec: value(rng, 0),
    status: { phase: 'Running', matrix: [[1, [2, []]], []] },
  };
}

// Whitespace that may appear inside an event line (any JSON whitespace but the newline).
const pad = (rng: Rng) => (rng() < 0.6 ? '' : pick(rng, [' ', '\t', '\r', '  ']));

interface Event {
  type: string;
  objectText: string;
  object: unknown;
  line: string;
}

function event(rng: Rng, i: number): Event {
  const type = pick(rng, ['ADDED', 'MODIFIED', 'DELETED', 'BOOKMARK', 'ERROR']);
  const object = randomObject(rng, i);
  const objectText = JSON.stringify(object);
  const t = `${pad(rng)}"type"${pad(rng)}:${pad(rng)}${JSON.stringify(type)}${pad(rng)}`;
  const o = `${pad(rng)}"object"${pad(rng)}:${pad(rng)}${objectText}${pad(rng)}`;
  const line = `${pad(rng)}{${rng() < 0.5 ? `${t},${o}` : `${o},${t}`}}${pad(rng)}`;
  return { type, objectText, object, line };
}
test('property: random watch streams in random chunkings frame every event exactly', () => {
  const seed = 4242;
  const rng = mulberry32(seed);
  const streams: { events: Event[]; body: Buffer }[] = [];
  for (let s = 0; s < 10; s++) {
    const events = Array.from({ length: int(rng, 1, 40) }, (_, i) => event(rng, i));
    // Blank lines between events now and then.
    const body = events.map((e) => e.line + (rng() < 0.1 ? '\n' : '')).join('\n') + '\n';
    streams.push({ events, body: Buffer.from(body) });
  }
  for (let run = 0; run < 600; run++) {
    const { events, body } = streams[run % streams.length]!;
    const shape = int(rng, 0, 3);
    const fixed = int(rng, 1, 4096);
    const chunks: Buffer[] = [];
    for (let at = 0; at < body.length; ) {
      const size = shape === 0 ? int(rng, 1, 16) : shape === 1 ? Math.max(1, Math.floor(Math.exp(rng() * Math.log(65536)))) : shape === 2 ? fixed : int(rng, 1, 65536);
      const end = Math.min(body.length, at + size);
      const chunk = Buffer.allocUnsafeSlow(end - at);
      body.copy(chunk, 0, at, end);
      chunks.push(chunk);
      at = end;
    }
    const where = `run ${run} (seed ${seed}), ${chunks.length} chunks`;
    const got = frames(chunks);
    for (const c of chunks) c.fill(0x22);
    assert.equal(got.length, events.length, where);
    for (let k = 0; k < got.length; k++) {
      const f = got[k]!;
      const e = events[k]!;
      assert.equal(f.type, e.type, `${where}: event ${k}`);
      assert.equal(f.object.toString(), e.objectText, `${where}: event ${k} object bytes`);
      assert.equal(f.line.toString(), e.line, `${where}: event ${k} line bytes`);
      assert.deepEqual(JSON.parse(f.object.toString()), (JSON.parse(e.line) as { object: unknown }).object, `${where}: event ${k}`);
      assert.ok(f.object.byteOffset === 0 && f.object.buffer.byteLength === f.object.length, `${where}: event ${k} object is not owned`);
    }
  }
});
