// An object's JSON written as the apiserver writes it in protobuf (docs/design.md,
// "Representations"). The wire format is @bufbuild/protobuf's; what to write is the Go types' rule,
// from the schema: fields in number order, a field that is not a pointer always written (zero
// values included), a pointer only when set, map entries sorted by key, an inline struct nested.
// JSON the schema does not describe is refused rather than guessed: the apiserver answers instead.
import { BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import { parseGoDuration } from '../../api/deadline.ts';
import { goString } from '../gojson.ts';
import { fieldsOf, type Field, type ValueType } from './schema.ts';

/** Thrown for JSON the schema cannot write exactly; the request goes to the apiserver. */
export class Unrepresentable extends Error {}

type Json = null | boolean | number | bigint | string | Json[] | { [k: string]: Json };
type JsonObject = { [k: string]: Json };

/**
 * One object's JSON. Integers beyond 2^53 (an int64 a client set) keep every digit as a bigint:
 * JSON.parse's own numbers would round them. Most objects have none, and skip the slower reviver.
 *
 * managedFields' fieldsV1 values are left unparsed: they are raw JSON the apiserver wrote, which
 * the message carries as those same bytes, and the largest part of most objects (parsing them
 * and writing them back took half of making a managed pod's message). Each is replaced, before
 * parsing, by a marker object whose bytes rawFields keeps. If a marker turns up anywhere but a
 * managedFields entry, the object is parsed whole instead.
 */
export function parseObject(bytes: Buffer): JsonObject {
  const text = bytes.toString('utf8');
  const spans = fieldsV1Spans(text);
  if (spans.length === 0) return parseText(text);
  const pieces: string[] = [];
  let at = 0;
  for (let i = 0; i < spans.length; i++) {
    const [open, end] = spans[i]!;
    pieces.push(text.slice(at, open), `{${RAW_MARKER}:${i}}`);
    at = end;
  }
  pieces.push(text.slice(at));
  const root = parseText(pieces.join(''));
  const meta = root.metadata;
  const entries = meta !== null && typeof meta === 'object' && !Array.isArray(meta) ? meta.managedFields : undefined;
  let found = 0;
  if (Array.isArray(entries)) {
    for (const e of entries) {
      const v = e !== null && typeof e === 'object' && !Array.isArray(e) ? e.fieldsV1 : undefined;
      if (v === null || typeof v !== 'object' || Array.isArray(v) || typeof v[RAW_KEY] !== 'number') continue;
      const [open, end] = spans[v[RAW_KEY]]!;
      rawFields.set(v, text.slice(open, end));
      found++;
    }
  }
  return found === spans.length ? root : parseText(text);
}

function parseText(text: string): JsonObject {
  if (!/\d{16}/.test(text)) return JSON.parse(text) as JsonObject;
  return JSON.parse(text, (_key, value: unknown, context?: { source?: string }) =>
    typeof value === 'number' && Number.isInteger(value) && !Number.isSafeInteger(value) && context?.source !== undefined && /^-?\d+$/.test(context.source)
      ? BigInt(context.source)
      : value,
  ) as JsonObject;
}

// A fieldsV1 key begins with "f:", "k:", "v:", "i:" or is "." (the apiserver refuses any other),
// so no real value has this one.
const RAW_KEY = '\u0000raw';
const RAW_MARKER = JSON.stringify(RAW_KEY);
/** The raw JSON behind each marker parseObject left in place of a fieldsV1 value. */
const rawFields = new WeakMap<object, string>();

const FIELDS_V1 = '"fieldsV1":{';

/**
 * Where each `"fieldsV1":{…}` value is: [its opening brace, just after its closing one]. An
 * unescaped quote is a string's start or end, and a string's end is never followed by a letter,
 * so the key is found by its text alone unless its quote is escaped (inside a string).
 */
function fieldsV1Spans(text: string): Array<[number, number]> {
  const spans: Array<[number, number]> = [];
  for (let from = 0; ; ) {
    const at = text.indexOf(FIELDS_V1, from);
    if (at === -1) return spans;
    let backslashes = 0;
    while (at - backslashes > 0 && text.charCodeAt(at - backslashes - 1) === 0x5c) backslashes++;
    const open = at + FIELDS_V1.length - 1;
    if (backslashes % 2 === 1) {
      from = open;
      continue;
    }
    const end = afterObject(text, open);
    // Malformed: JSON.parse will say so.
    if (end === -1) return [];
    spans.push([open, end]);
    from = end;
  }
}

/** The index just after the object that opens at `open`, or -1. */
function afterObject(text: string, open: number): number {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      for (i++; i < text.length; i++) {
        const d = text.charCodeAt(i);
        if (d === 0x5c) i++;
        else if (d === 0x22) break;
      }
    } else if (c === 0x7b) depth++;
    else if (c === 0x7d && --depth === 0) return i + 1;
  }
  return -1;
}

/** The message's bytes for this JSON object. */
export function encodeMessage(message: string, value: JsonObject): Uint8Array {
  const w = new BinaryWriter();
  writeMessage(w, message, value);
  return w.finish();
}

// The JSON keys a message reads, its inline structs' included: anything else is unknown to it.
const knownKeys = new Map<string, Set<string>>();

function keysOf(message: string): Set<string> {
  let keys = knownKeys.get(message);
  if (!keys) {
    keys = new Set(['kind', 'apiVersion']);
    for (const f of fields(message)) {
      if (f.inline) for (const k of keysOf(f.type)) keys.add(k);
      else keys.add(f.json!);
    }
    knownKeys.set(message, keys);
  }
  return keys;
}

function fields(message: string): readonly Field[] {
  const f = fieldsOf(message);
  if (!f) throw new Unrepresentable(`no protobuf layout for ${message}`);
  return f;
}

/**
 * Go sorts map keys as strings compare: by their UTF-8 bytes, which is code point order. JavaScript
 * compares UTF-16 units, the same order unless a key has characters beyond U+FFFF.
 */
function sortedKeys(m: JsonObject): string[] {
  const keys = Object.keys(m);
  if (keys.length < 2) return keys;
  if (keys.some((k) => /[\uD800-\uDFFF]/.test(k))) return keys.sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  return keys.sort();
}

// `inline`: the object is the enclosing message's, which has checked its keys (its own and these).
function writeMessage(w: BinaryWriter, message: string, obj: JsonObject, inline = false): void {
  if (!inline) {
    const known = keysOf(message);
    for (const k in obj) if (!known.has(k)) throw new Unrepresentable(`${message} has no field ${k}`);
  }
  for (const f of fields(message)) {
    if (f.inline) {
      w.tag(f.num, WireType.LengthDelimited).fork();
      writeMessage(w, f.type, obj, true);
      w.join();
      continue;
    }
    const v = obj[f.json!];
    if (f.type === 'map') {
      if (v === undefined || v === null) continue;
      if (typeof v !== 'object' || Array.isArray(v)) throw new Unrepresentable(`${message}.${f.json}: not a map`);
      const keys = sortedKeys(v);
      for (const key of keys) {
        const entry = v[key]!;
        w.tag(f.num, WireType.LengthDelimited).fork();
        w.tag(1, WireType.LengthDelimited).string(key);
        if (!(f.mapValueNullable && entry === null)) writeValue(w, 2, f.mapValue!, entry);
        w.join();
      }
    } else if (f.repeated) {
      if (v === undefined || v === null) continue;
      if (!Array.isArray(v)) throw new Unrepresentable(`${message}.${f.json}: not a list`);
      for (const e of v) writeValue(w, f.num, f.type, e);
    } else if (f.pointer) {
      if (v !== undefined && v !== null) writeValue(w, f.num, f.type, v);
    } else {
      writeValue(w, f.num, f.type, v ?? null);
    }
  }
}

function writeValue(w: BinaryWriter, num: number, type: ValueType, v: Json | undefined): void {
  switch (type) {
    case 'string':
      w.tag(num, WireType.LengthDelimited).string(str(v));
      return;
    case 'bool':
      w.tag(num, WireType.Varint).bool(v === true);
      return;
    case 'int32':
      w.tag(num, WireType.Varint).int32(int32(v));
      return;
    case 'int64':
      w.tag(num, WireType.Varint).int64(int(v));
      return;
    case 'uint32':
      w.tag(num, WireType.Varint).uint32(int32(v));
      return;
    case 'uint64':
      w.tag(num, WireType.Varint).uint64(int(v));
      return;
    case 'double':
      w.tag(num, WireType.Bit64).double(typeof v === 'bigint' ? Number(v) : typeof v === 'number' ? v : 0);
      return;
    case 'bytes':
      w.tag(num, WireType.LengthDelimited).bytes(Buffer.from(str(v), 'base64'));
      return;
    case 'quantity':
      w.tag(num, WireType.LengthDelimited).fork().tag(1, WireType.LengthDelimited).string(v === null || v === undefined ? '0' : quantity(v)).join();
      return;
    case 'time':
    case 'microtime':
      w.tag(num, WireType.LengthDelimited).fork();
      if (v !== null && v !== undefined) {
        const [seconds, nanos] = timestamp(str(v), type === 'microtime');
        w.tag(1, WireType.Varint).int64(seconds).tag(2, WireType.Varint).int32(nanos);
      }
      w.join();
      return;
    case 'duration':
      w.tag(num, WireType.LengthDelimited).fork().tag(1, WireType.Varint).int64(v === null || v === undefined ? 0 : goDuration(str(v))).join();
      return;
    case 'intorstring':
      w.tag(num, WireType.LengthDelimited).fork();
      if (typeof v === 'string') w.tag(1, WireType.Varint).int64(1).tag(2, WireType.Varint).int32(0).tag(3, WireType.LengthDelimited).string(v);
      else w.tag(1, WireType.Varint).int64(0).tag(2, WireType.Varint).int32(int32(v)).tag(3, WireType.LengthDelimited).string('');
      w.join();
      return;
    case 'fieldsv1': {
      // Raw JSON, written as the apiserver's encoding/json wrote it into the object: its bytes as
      // they came when parseObject kept them.
      w.tag(num, WireType.LengthDelimited).fork();
      const raw = v !== null && typeof v === 'object' ? rawFields.get(v) : undefined;
      if (raw !== undefined) w.tag(1, WireType.LengthDelimited).bytes(Buffer.from(raw));
      else if (v !== null && v !== undefined) w.tag(1, WireType.LengthDelimited).bytes(Buffer.from(goJson(v)));
      w.join();
      return;
    }
    case 'rawextension':
      w.tag(num, WireType.LengthDelimited).fork();
      if (v !== null && v !== undefined) w.tag(1, WireType.LengthDelimited).bytes(Buffer.from(goJson(v)));
      w.join();
      return;
    case 'stringlist':
      w.tag(num, WireType.LengthDelimited).fork();
      if (Array.isArray(v)) for (const s of v) w.tag(1, WireType.LengthDelimited).string(str(s));
      w.join();
      return;
    default:
      if (v !== null && v !== undefined && (typeof v !== 'object' || Array.isArray(v))) throw new Unrepresentable(`${type}: not an object`);
      w.tag(num, WireType.LengthDelimited).fork();
      writeMessage(w, type, v ?? {});
      w.join();
  }
}

function str(v: Json | undefined): string {
  if (v === null || v === undefined) return '';
  if (typeof v !== 'string') throw new Unrepresentable(`not a string: ${typeof v}`);
  return v;
}

function int(v: Json | undefined): number | bigint {
  if (v === null || v === undefined) return 0;
  if (typeof v === 'bigint') return v;
  if (typeof v !== 'number' || !Number.isInteger(v)) throw new Unrepresentable(`not an integer: ${typeof v}`);
  return v;
}

function int32(v: Json | undefined): number {
  const n = int(v);
  if (typeof n === 'bigint') throw new Unrepresentable('an int32 out of range');
  return n;
}

function quantity(v: Json): string {
  // The apiserver writes a Quantity in canonical form in both encodings: the JSON string is it.
  if (typeof v === 'string') return v;
  throw new Unrepresentable('a quantity that is not a string');
}

// RFC 3339 as metav1.Time (seconds) and MicroTime (microseconds) write it, always in UTC.
const TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?Z$/;

function timestamp(s: string, micro: boolean): [bigint, number] {
  const m = TIME.exec(s);
  if (!m) throw new Unrepresentable(`a time the apiserver does not write: ${s}`);
  const d = new Date(0);
  // setUTCFullYear, not Date.UTC: the latter reads years 0 to 99 as 1900 to 1999.
  d.setUTCFullYear(Number(m[1]), Number(m[2]) - 1, Number(m[3]));
  d.setUTCHours(Number(m[4]), Number(m[5]), Number(m[6]), 0);
  const seconds = BigInt(Math.floor(d.getTime() / 1000));
  // metav1.Time's protobuf carries seconds only; MicroTime's, microseconds as nanos.
  const nanos = micro && m[7] ? Number(m[7].padEnd(9, '0').slice(0, 6)) * 1000 : 0;
  return [seconds, nanos];
}

/** time.ParseDuration, as metav1.Duration's JSON holds it, in nanoseconds. */
export function goDuration(s: string): bigint {
  const d = parseGoDuration(Buffer.from(s));
  if ('error' in d) throw new Unrepresentable(d.error);
  return d.ns;
}

/**
 * JSON as Go's encoding/json writes it: compact, keys in their order, and <, >, & and the line
 * separators U+2028/U+2029 escaped. Raw fields (FieldsV1, RawExtension) hold the bytes it wrote.
 */
export function goJson(v: Json): string {
  if (typeof v === 'bigint') return v.toString();
  if (v !== null && typeof v === 'object') {
    if (Array.isArray(v)) return `[${v.map(goJson).join(',')}]`;
    const keys = Object.keys(v);
    // JavaScript puts integer-like keys first, whatever their place in the bytes: the order Go
    // wrote is lost, and with it the exact bytes.
    if (keys.some((k) => /^(0|[1-9]\d*)$/.test(k))) throw new Unrepresentable('raw JSON with integer-like keys');
    return `{${keys
      .map((k) => `${goString(k)}:${goJson(v[k]!)}`)
      .join(',')}}`;
  }
  if (typeof v === 'string') return goString(v);
  if (typeof v === 'number' && !Number.isInteger(v)) throw new Unrepresentable('a raw float');
  return JSON.stringify(v);
}
