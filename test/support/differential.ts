// One request sent to the apiserver directly and through Levee, and each answer reduced to what a
// client learns from it, so the two can be compared exactly. Only what legitimately differs
// between two correct answers is taken out, each for a reason given where it is done:
//
// - the resourceVersion of a list or a bookmark, and the revision inside a continue token, name
//   the state each side answered from (etcd's revision, or Levee's store): the digits are
//   replaced, their presence and everything else (the token's start key) is kept;
// - a collection the rest of the cluster writes to too (a cluster-wide list, another namespace)
//   is compared on the fixture's objects only, and its paging is followed to the end on both sides;
// - bookmarks other than the one that ends a watch-list's initial state come when a clock says so;
// - the Age column of a Table is the time between the object's creation and the answer.
//
// Bodies are decoded as the client would (gzip, JSON, YAML, protobuf, watch streams) and compared
// as structures in their key order, and JSON bodies also by their layout (whitespace, key order,
// value kinds): Levee answers with the apiserver's bytes.
import { gunzipSync } from 'node:zlib';
import { request, type Dispatcher } from 'undici';
import { parse as parseYaml } from 'yaml';

export interface Exchange {
  method: string;
  /** Path and raw query, as sent on the wire. */
  target: string;
  headers: Record<string, string>;
  body?: string | undefined;
  /** When the answer is cut off (a watch that does not end by itself). */
  deadlineMs: number;
}

export interface RawAnswer {
  status: number;
  contentType: string;
  contentEncoding: string;
  body: Buffer;
  /** The deadline ended the body (a watch still open). */
  cutOff: boolean;
}

/** Sends the request; the body is read until it ends or the deadline passes. */
export async function exchange(origin: string, dispatcher: Dispatcher, x: Exchange): Promise<RawAnswer | { failed: string }> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), x.deadlineMs);
  try {
    let res: Dispatcher.ResponseData;
    try {
      res = await request(origin + x.target, {
        dispatcher,
        method: x.method,
        headers: x.headers,
        body: x.body ?? null,
        signal: abort.signal,
      });
    } catch (err) {
      return { failed: abort.signal.aborted ? 'no answer before the deadline' : `request failed: ${(err as Error).message}` };
    }
    const chunks: Buffer[] = [];
    let cutOff = false;
    try {
      for await (const chunk of res.body) chunks.push(chunk as Buffer);
    } catch (err) {
      if (!abort.signal.aborted) return { failed: `reading the body failed: ${(err as Error).message}` };
      cutOff = true;
    }
    const header = (name: string): string => {
      const v = res.headers[name];
      return Array.isArray(v) ? v.join(',') : (v ?? '');
    };
    return { status: res.statusCode, contentType: header('content-type'), contentEncoding: header('content-encoding'), body: Buffer.concat(chunks), cutOff };
  } finally {
    clearTimeout(timer);
  }
}

/** Which objects of a shared collection or stream belong to the fixture. */
export type Mine = (meta: { namespace?: string | undefined; name?: string | undefined }) => boolean;

/** What a client learns from one answer, with what differs legitimately taken out. */
export interface Observed {
  status: number;
  /** The media type without parameters, lower case (as a client picks its decoder). */
  media: string;
  /** A list's continue token as sent, to follow it. */
  continueToken?: string | undefined;
  /** The decoded answer, normalized. */
  value: unknown;
  /** JSON's layout: strings and numbers blanked, everything else (whitespace, order, nesting) kept. */
  layout?: string | undefined;
  cutOff: boolean;
}

/** Digit runs, which in a Status message are resourceVersions, sizes and times. */
export const digits = (s: string): string => s.replace(/\d+/g, '#');

/** Digit runs blanked in every string of a value (a Status's details name what its message does). */
function digitsDeep(v: unknown): unknown {
  if (typeof v === 'string') return digits(v);
  if (Array.isArray(v)) return v.map(digitsDeep);
  if (isObject(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, digitsDeep(x)]));
  return v;
}

/**
 * A continue token with its revision blanked and its start key kept; undecodable ones as they are.
 * The apiserver writes the start key with a leading "/" when its watch cache answers and without
 * one when etcd does (storage.DecodeContinue puts it back): both name the same key.
 */
export function normalizeContinue(token: string): unknown {
  try {
    const t = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as Record<string, unknown>;
    return { ...t, rv: typeof t.rv === 'number' ? '#' : t.rv, start: typeof t.start === 'string' ? t.start.replace(/^\//, '') : t.start };
  } catch {
    return token;
  }
}

function layoutOf(text: string): string {
  return text.replace(/"(?:[^"\\]|\\.)*"/g, '""').replace(/-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g, '0');
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

function metaOf(o: unknown): { namespace?: string; name?: string; resourceVersion?: string; annotations?: Record<string, string> } {
  return isObject(o) && isObject(o.metadata) ? o.metadata : {};
}

function normalizeStatus(s: Json): unknown {
  return {
    Status: {
      kind: s.kind,
      apiVersion: s.apiVersion,
      status: s.status,
      code: s.code,
      reason: s.reason,
      message: typeof s.message === 'string' ? digits(s.message) : s.message,
      details: digitsDeep(s.details),
    },
  };
}

const isStatus = (o: Json): boolean => o.kind === 'Status' || (o.kind === undefined && typeof o.status === 'string' && typeof o.code === 'number');

/** A decoded JSON or YAML answer, normalized. `exact`: the collection's paging is the fixture's alone. */
function normalizeDocument(o: unknown, mine: Mine, exact: boolean): { value: unknown; continueToken?: string } {
  if (!isObject(o)) return { value: o };
  if (isStatus(o)) return { value: normalizeStatus(o) };
  if (o.kind === 'Table' && Array.isArray(o.rows)) {
    const columns = Array.isArray(o.columnDefinitions) ? (o.columnDefinitions as Json[]) : [];
    // The Age column is how long ago the object was created, as of each answer's own moment.
    const age = columns.findIndex((c) => c.name === 'Age');
    const rows = (o.rows as Json[])
      .filter((r) => exact || mine(metaOf(r.object)))
      .map((r) => ({ ...r, cells: Array.isArray(r.cells) ? (r.cells as unknown[]).map((c, i) => (i === age ? '<age>' : c)) : r.cells }));
    const meta = isObject(o.metadata) ? o.metadata : {};
    const token = typeof meta.continue === 'string' && meta.continue !== '' ? meta.continue : undefined;
    return { value: { ...o, metadata: listMeta(meta, exact), rows }, continueToken: token };
  }
  if (Array.isArray(o.items)) {
    const meta = isObject(o.metadata) ? o.metadata : {};
    const items = exact ? o.items : (o.items as unknown[]).filter((i) => mine(metaOf(i)));
    const token = typeof meta.continue === 'string' && meta.continue !== '' ? meta.continue : undefined;
    return { value: { ...o, metadata: listMeta(meta, exact), items }, continueToken: token };
  }
  return { value: o };
}

function listMeta(meta: Json, exact: boolean): Json {
  const out: Json = {};
  for (const [k, v] of Object.entries(meta)) {
    if (k === 'resourceVersion' && typeof v === 'string') out[k] = /^\d+$/.test(v) ? '#' : v;
    else if (k === 'continue' && typeof v === 'string') out[k] = exact ? (v === '' ? '' : normalizeContinue(v)) : v === '' ? '' : '<continue>';
    // The number of objects after this page counts the whole shared collection.
    else if (k === 'remainingItemCount') out[k] = exact ? v : '<count>';
    else out[k] = v;
  }
  return out;
}

/** One event of a watch, or undefined for one that is not compared. */
function normalizeEvent(e: unknown, mine: Mine): unknown {
  if (!isObject(e)) return { unparsable: e };
  const type = e.type;
  if (type === 'BOOKMARK') {
    const meta = metaOf(e.object);
    // Only the bookmark that ends a watch-list's initial state is the request's; the others come
    // when each side's clock says so. Its object is compared by its resourceVersion's presence
    // only: Levee's carries kind, apiVersion and metadata, and the list blueprint (README).
    if (meta.annotations?.['k8s.io/initial-events-end'] !== 'true') return undefined;
    return { type, initialEventsEnd: true, resourceVersion: /^\d+$/.test(meta.resourceVersion ?? '') ? '#' : meta.resourceVersion };
  }
  if (type === 'ERROR') return { type, object: isObject(e.object) ? normalizeStatus(e.object) : e.object };
  return mine(metaOf(e.object)) ? e : undefined;
}

function normalizeEvents(events: unknown[], mine: Mine): unknown {
  return { events: events.map((e) => normalizeEvent(e, mine)).filter((e) => e !== undefined) };
}

/** Reduces an answer to what its client learns. */
export function observe(raw: RawAnswer, mine: Mine, exact: boolean): Observed {
  const media = raw.contentType.split(';')[0]!.trim().toLowerCase();
  const streaming = /;\s*stream=watch/i.test(raw.contentType);
  let body = raw.body;
  if (raw.contentEncoding.toLowerCase() === 'gzip' && body.length > 0) {
    try {
      body = gunzipSync(body);
    } catch {
      // A body cut off mid-stream; compared as it came.
    }
  }
  const base = { status: raw.status, media, cutOff: raw.cutOff };
  if (media === 'application/vnd.kubernetes.protobuf') {
    if (streaming) return { ...base, value: normalizeEvents(protobufEvents(body), mine) };
    const n = protobufDocument(body, mine, exact);
    return { ...base, value: n.value, continueToken: n.continueToken };
  }
  const text = body.toString('utf8');
  if (media === 'application/json' || media === '') {
    if (text === '') return { ...base, value: raw.status === 200 ? { events: [] } : { text } };
    let doc: unknown;
    try {
      doc = JSON.parse(text);
    } catch {
      // A watch: one event per line.
      const lines = text.split('\n').filter((l) => l !== '');
      const events = lines.map((l) => {
        try {
          return JSON.parse(l) as unknown;
        } catch {
          return { unparsable: l };
        }
      });
      return { ...base, value: normalizeEvents(events, mine) };
    }
    if (isObject(doc) && typeof doc.type === 'string' && 'object' in doc && raw.status === 200) return { ...base, value: normalizeEvents([doc], mine) };
    const n = normalizeDocument(doc, mine, exact);
    // A document's layout is compared where the whole document is: a filtered list is not.
    const layout = exact || !(isObject(doc) && (Array.isArray(doc.items) || Array.isArray(doc.rows))) ? layoutOf(text) : undefined;
    return { ...base, value: n.value, continueToken: n.continueToken, layout };
  }
  if (media === 'application/yaml') {
    try {
      const n = normalizeDocument(parseYaml(text) as unknown, mine, exact);
      return { ...base, value: n.value, continueToken: n.continueToken };
    } catch {
      return { ...base, value: { text } };
    }
  }
  return { ...base, value: { text } };
}

// ---- protobuf (k8s.io/apimachinery/pkg/runtime/serializer/protobuf), read without a schema

type Field = { no: number; wire: number; value: bigint | Buffer };

function varint(b: Buffer, at: number): [bigint, number] {
  let v = 0n;
  let shift = 0n;
  for (let i = at; i < b.length; i++) {
    const byte = b[i]!;
    v |= BigInt(byte & 0x7f) << shift;
    if ((byte & 0x80) === 0) return [v, i + 1];
    shift += 7n;
  }
  throw new Error('truncated varint');
}

function fieldsOf(b: Buffer): Field[] {
  const out: Field[] = [];
  let at = 0;
  while (at < b.length) {
    const [key, next] = varint(b, at);
    at = next;
    const no = Number(key >> 3n);
    const wire = Number(key & 7n);
    if (wire === 0) {
      const [v, n] = varint(b, at);
      out.push({ no, wire, value: v });
      at = n;
    } else if (wire === 2) {
      const [len, n] = varint(b, at);
      const end = n + Number(len);
      if (end > b.length) throw new Error('truncated field');
      out.push({ no, wire, value: b.subarray(n, end) });
      at = end;
    } else if (wire === 1) {
      out.push({ no, wire, value: b.subarray(at, at + 8) });
      at += 8;
    } else if (wire === 5) {
      out.push({ no, wire, value: b.subarray(at, at + 4) });
      at += 4;
    } else throw new Error(`wire type ${wire}`);
  }
  return out;
}

const bytesOf = (fs: Field[], no: number): Buffer | undefined => {
  const f = fs.find((x) => x.no === no && x.wire === 2);
  return f ? (f.value as Buffer) : undefined;
};
const stringOf = (fs: Field[], no: number): string | undefined => bytesOf(fs, no)?.toString('utf8');
const numberOf = (fs: Field[], no: number): number | undefined => {
  const f = fs.find((x) => x.no === no && x.wire === 0);
  return f ? Number(BigInt.asIntN(64, f.value as bigint)) : undefined;
};

const MAGIC = Buffer.from([0x6b, 0x38, 0x73, 0x00]);

/** runtime.Unknown behind the magic: apiVersion, kind and the raw message. */
function unwrap(b: Buffer): { apiVersion: string; kind: string; raw: Buffer } | undefined {
  if (b.length < 4 || !b.subarray(0, 4).equals(MAGIC)) return undefined;
  const fs = fieldsOf(b.subarray(4));
  const typeMeta = fieldsOf(bytesOf(fs, 1) ?? Buffer.alloc(0));
  return { apiVersion: stringOf(typeMeta, 1) ?? '', kind: stringOf(typeMeta, 2) ?? '', raw: bytesOf(fs, 2) ?? Buffer.alloc(0) };
}

/** ObjectMeta of a serialized object: name 1, namespace 3, resourceVersion 6, annotations 12. */
function protoMeta(object: Buffer): { namespace: string; name: string; resourceVersion: string; annotations: Record<string, string> } {
  const meta = fieldsOf(bytesOf(fieldsOf(object), 1) ?? Buffer.alloc(0));
  const annotations: Record<string, string> = {};
  for (const f of meta.filter((x) => x.no === 12 && x.wire === 2)) {
    const entry = fieldsOf(f.value as Buffer);
    annotations[stringOf(entry, 1) ?? ''] = stringOf(entry, 2) ?? '';
  }
  return { name: stringOf(meta, 1) ?? '', namespace: stringOf(meta, 3) ?? '', resourceVersion: stringOf(meta, 6) ?? '', annotations };
}

function protobufDocument(b: Buffer, mine: Mine, exact: boolean): { value: unknown; continueToken?: string } {
  try {
    const u = unwrap(b);
    if (!u) return { value: { protobuf: 'no envelope', bytes: b.toString('hex') } };
    const fs = fieldsOf(u.raw);
    if (u.kind === 'Status') {
      const details = bytesOf(fs, 5);
      return {
        value: normalizeStatus({
          kind: u.kind,
          apiVersion: u.apiVersion,
          status: stringOf(fs, 2),
          message: stringOf(fs, 3),
          reason: stringOf(fs, 4),
          code: numberOf(fs, 6),
          details: details ? { bytes: details.toString('hex') } : undefined,
        }),
      };
    }
    if (u.kind.endsWith('List')) {
      const meta = fieldsOf(bytesOf(fs, 1) ?? Buffer.alloc(0));
      const token = stringOf(meta, 3);
      const listMetaJson: Json = { resourceVersion: stringOf(meta, 2), continue: token, remainingItemCount: numberOf(meta, 4) };
      const items = fs
        .filter((f) => f.no === 2 && f.wire === 2)
        .map((f) => f.value as Buffer)
        .filter((item) => exact || mine(protoMeta(item)))
        .map((item) => ({ ...protoMeta(item), bytes: item.toString('hex') }));
      return { value: { apiVersion: u.apiVersion, kind: u.kind, metadata: listMeta(listMetaJson, exact), items }, continueToken: token || undefined };
    }
    return { value: { apiVersion: u.apiVersion, kind: u.kind, bytes: u.raw.toString('hex') } };
  } catch (err) {
    return { value: { protobuf: (err as Error).message, bytes: b.toString('hex') } };
  }
}

/** A protobuf watch stream: frames of a 4-byte length and a WatchEvent {type 1, object 2 {raw 1}}. */
function protobufEvents(b: Buffer): unknown[] {
  const events: unknown[] = [];
  let at = 0;
  while (at + 4 <= b.length) {
    const len = b.readUInt32BE(at);
    if (at + 4 + len > b.length) break; // cut off mid-frame
    try {
      const fs = fieldsOf(b.subarray(at + 4, at + 4 + len));
      const raw = bytesOf(fieldsOf(bytesOf(fs, 2) ?? Buffer.alloc(0)), 1) ?? Buffer.alloc(0);
      const u = unwrap(raw);
      const type = stringOf(fs, 1);
      if (!u) events.push({ type, object: { bytes: raw.toString('hex') } });
      else if (u.kind === 'Status') {
        const s = fieldsOf(u.raw);
        events.push({ type, object: { kind: 'Status', apiVersion: u.apiVersion, status: stringOf(s, 2), message: stringOf(s, 3), reason: stringOf(s, 4), code: numberOf(s, 6) } });
      } else {
        const meta = protoMeta(u.raw);
        // Shaped as a JSON event so the same rules pick what is compared; the object's bytes are the comparison.
        events.push({ type, object: { kind: u.kind, apiVersion: u.apiVersion, metadata: meta, bytes: type === 'BOOKMARK' ? undefined : u.raw.toString('hex') } });
      }
    } catch (err) {
      events.push({ unparsable: (err as Error).message });
    }
    at += 4 + len;
  }
  return events;
}

// ---- comparing

/** Where two normalized values first differ, or undefined when they are the same (key order included). */
export function firstDifference(a: unknown, b: unknown, path = '$'): string | undefined {
  if (a === b) return undefined;
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.min(a.length, b.length); i++) {
      const d = firstDifference(a[i], b[i], `${path}[${i}]`);
      if (d) return d;
    }
    return a.length === b.length ? undefined : `${path}: ${a.length} entries vs ${b.length}`;
  }
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a).filter((k) => a[k] !== undefined);
    const kb = Object.keys(b).filter((k) => b[k] !== undefined);
    for (const k of ka) {
      if (!(k in b) || b[k] === undefined) return `${path}.${k}: only in the first (${short(a[k])})`;
      const d = firstDifference(a[k], b[k], `${path}.${k}`);
      if (d) return d;
    }
    for (const k of kb) if (!(k in a) || a[k] === undefined) return `${path}.${k}: only in the second (${short(b[k])})`;
    if (ka.join(',') !== kb.join(',')) return `${path}: keys in another order: ${ka.join(',')} vs ${kb.join(',')}`;
    return undefined;
  }
  return `${path}: ${short(a)} vs ${short(b)}`;
}

function short(v: unknown): string {
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 300 ? `${s.slice(0, 300)}…` : s;
}
