// Cached objects, lists, watch events and Status in protobuf, framed as the apiserver frames them
// (k8s.io/apimachinery/pkg/runtime/serializer/protobuf): the magic "k8s\0", then a runtime.Unknown
// carrying the apiVersion and kind and the object's message. A watch stream is WatchEvent messages,
// each prefixed by its length in four big-endian bytes, whose object is such an envelope.
//
// Each object's message is made from its JSON once, on the first protobuf answer that needs it, and
// kept as long as that object is the one stored (docs/design.md, "Representations").
import { BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import { apiVersionOf, type ResourceInfo } from '../../api/resource.ts';
import type { CachedObject } from '../../store/object.ts';
import { joinKept, kept } from '../../store/bytes.ts';
import { encodeMessage, parseObject, Unrepresentable } from './encode.ts';
import { LIST_META, messageOfKind, OBJECT_META } from './schema.ts';
import { metadataOf, movesAnnotations } from '../metadata.ts';

export const PROTOBUF = 'application/vnd.kubernetes.protobuf';
export const PROTOBUF_WATCH = 'application/vnd.kubernetes.protobuf;stream=watch';
const MAGIC = Buffer.from('k8s\u0000', 'latin1');
// runtime.Unknown's contentEncoding and contentType, both empty, after its raw bytes.
const UNKNOWN_TAIL = Buffer.from([0x1a, 0x00, 0x22, 0x00]);

/** Whether the cache can write this resource's objects in protobuf: a built-in kind the schema knows. */
export function writesProtobuf(info: ResourceInfo): boolean {
  return info.listKind === undefined && messageOfKind(apiVersionOf(info), info.kind) !== undefined && messageOfKind(apiVersionOf(info), `${info.kind}List`) !== undefined;
}

// Per stored object: its message, or null when its JSON has something the schema cannot write.
const messages = new WeakMap<CachedObject, Buffer | null>();
const metadataMessages = new WeakMap<CachedObject, Buffer | null>();

// A message the protobuf writer made, as a Buffer over its memory: the writer's result has memory
// of its own, where Buffer.from would copy it into Node's shared pool, and a message is kept with
// its object (store/bytes.ts).
function bytesOf(message: Uint8Array): Buffer {
  return kept(Buffer.from(message.buffer, message.byteOffset, message.byteLength));
}

/** The object's message bytes, or undefined when the cache cannot write it exactly. */
export function objectMessage(info: ResourceInfo, o: CachedObject): Buffer | undefined {
  let m = messages.get(o);
  if (m === undefined) {
    const message = messageOfKind(apiVersionOf(info), info.kind);
    m = message === undefined ? null : attempt(() => bytesOf(encodeMessage(message, parseObject(o.item))));
    messages.set(o, m);
  }
  return m ?? undefined;
}

/**
 * The message of the object's PartialObjectMetadata: its ObjectMeta as field 1. Every built-in
 * kind has its ObjectMeta as field 1 too, so a built-in object's message begins with exactly
 * these bytes; a custom resource's metadata is written from its JSON.
 */
export function metadataMessage(info: ResourceInfo, o: CachedObject): Buffer | undefined {
  let m = metadataMessages.get(o);
  if (m === undefined) {
    // A kind whose conversion moves annotations into fields (DaemonSets, some Deployments, HPAs)
    // has metadata of its own: the apiserver's, as represent/metadata.ts writes it in JSON.
    const whole = info.listKind === undefined && !movesAnnotations(info) ? objectMessage(info, o) : undefined;
    if (whole) {
      m = whole.subarray(0, firstFieldLength(whole));
    } else {
      m = attempt(() => {
        const metadata = movesAnnotations(info) ? parseObject(metadataOf(info, o)) : parseObject(o.item).metadata;
        if (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata)) throw new Unrepresentable('no metadata');
        const w = new BinaryWriter();
        w.tag(1, WireType.LengthDelimited).bytes(encodeMessage(OBJECT_META, metadata));
        return bytesOf(w.finish());
      });
    }
    metadataMessages.set(o, m);
  }
  return m ?? undefined;
}

function attempt(f: () => Buffer): Buffer | null {
  try {
    return f();
  } catch (e) {
    if (e instanceof Unrepresentable) return null;
    throw e;
  }
}

// The length of a message's first field (tag 0x0a, a varint length, the bytes).
function firstFieldLength(m: Buffer): number {
  let length = 0;
  let shift = 0;
  let i = 1;
  for (;;) {
    const b = m[i++]!;
    length += (b & 0x7f) * 2 ** shift;
    if (b < 0x80) break;
    shift += 7;
  }
  return i + length;
}

/** A field's tag and length, before its bytes. */
export function fieldHead(num: number, length: number): Buffer {
  return Buffer.from(new BinaryWriter().tag(num, WireType.LengthDelimited).uint32(length).finish());
}

/**
 * The envelope around a message of `length` bytes: what goes before it and after it. The whole
 * answer is head, the message, tail.
 */
export function envelope(apiVersion: string, kind: string, length: number): [Buffer, Buffer] {
  const typeMeta = new BinaryWriter().tag(1, WireType.LengthDelimited).string(apiVersion).tag(2, WireType.LengthDelimited).string(kind).finish();
  const head = Buffer.concat([MAGIC, fieldHead(1, typeMeta.length), typeMeta, fieldHead(2, length)]);
  return [head, UNKNOWN_TAIL];
}

/** An object (or any message) as a GET answers it. */
export function wrap(apiVersion: string, kind: string, message: Buffer): Buffer {
  const [head, tail] = envelope(apiVersion, kind, message.length);
  return Buffer.concat([head, message, tail]);
}

export interface ListMeta {
  resourceVersion: string;
  continue?: string | undefined;
  remainingItemCount?: number | undefined;
}

/** The list's ListMeta, as field 1 of the list message. */
export function listMetaField(meta: ListMeta): Buffer {
  const json: Record<string, string | number> = { resourceVersion: meta.resourceVersion, continue: meta.continue ?? '' };
  if (meta.remainingItemCount !== undefined) json.remainingItemCount = meta.remainingItemCount;
  const m = encodeMessage(LIST_META, json);
  return Buffer.concat([fieldHead(1, m.length), m]);
}

/**
 * A watch event's frame: its length, then WatchEvent{type, object: RawExtension{raw: the object's
 * envelope}}.
 */
export function watchFrame(type: string, object: Buffer): Buffer {
  const raw = Buffer.concat([fieldHead(1, object.length), object]);
  const typeField = new BinaryWriter().tag(1, WireType.LengthDelimited).string(type).finish();
  const eventLength = typeField.length + fieldHead(2, raw.length).length + raw.length;
  const prefix = Buffer.alloc(4);
  prefix.writeUInt32BE(eventLength);
  // Kept for the event window (watch/protobuf.ts): memory of its own (store/bytes.ts).
  return joinKept([prefix, typeField, fieldHead(2, raw.length), raw]);
}

/**
 * The same frame around an object's message, as parts: everything before the message in one, the
 * message, the envelope's tail. For a frame written to one client only (an object of a watch's
 * initial state), so that the message is written where it lies rather than copied.
 */
export function watchFrameParts(type: string, apiVersion: string, kind: string, message: Buffer): Buffer[] {
  const [head, tail] = envelope(apiVersion, kind, message.length);
  const objectLength = head.length + message.length + tail.length;
  const rawField = fieldHead(1, objectLength);
  const rawLength = rawField.length + objectLength;
  const typeField = new BinaryWriter().tag(1, WireType.LengthDelimited).string(type).finish();
  const objectField = fieldHead(2, rawLength);
  const prefix = Buffer.alloc(4);
  prefix.writeUInt32BE(typeField.length + objectField.length + rawLength);
  return [Buffer.concat([prefix, typeField, objectField, rawField, head]), message, tail];
}

/** A message made from JSON Levee writes itself (bookmarks), wrapped as a GET would answer it. */
export function objectFromJson(info: ResourceInfo, json: Record<string, unknown>): Buffer {
  const message = messageOfKind(apiVersionOf(info), info.kind);
  if (!message) throw new Unrepresentable(`no protobuf layout for ${info.kind}`);
  return wrap(apiVersionOf(info), info.kind, Buffer.from(encodeMessage(message, json as Parameters<typeof encodeMessage>[1])));
}
