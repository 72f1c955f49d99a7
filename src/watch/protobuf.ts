// Watch events in protobuf, for clients that negotiated it: the object itself (typed clients,
// kubelet, controllers) or its PartialObjectMetadata (the metadata client: garbage collector,
// controller-runtime's metadata informers). Frames are made once per event and representation.
import { apiVersionOf, type ResourceInfo } from '../api/resource.ts';
import { encodeStatusAs } from '../api/status.ts';
import type { Status } from '../api/types.ts';
import type { StoreEvent } from '../store/events.ts';
import type { CachedObject } from '../store/object.ts';
import { encodeMessage, parseObject, Unrepresentable } from '../represent/protobuf/encode.ts';
import { fieldHead, listMetaField, metadataMessage, objectFromJson, objectMessage, PROTOBUF_WATCH, watchFrame, watchFrameParts, wrap } from '../represent/protobuf/objects.ts';
import { messageOfKind, OBJECT_META } from '../represent/protobuf/schema.ts';
import { metadataOfJson } from '../represent/metadata.ts';
import { eventObject, type WatchEncoding, type WatchEventType } from './encode.ts';

type Form = { kind: 'object' } | { kind: 'metadata'; version: 'v1' | 'v1beta1' };

const frames = new WeakMap<StoreEvent, Map<string, Buffer | null>>();

function encoding(form: Form): WatchEncoding {
  const key = form.kind === 'object' ? 'object' : `metadata/${form.version}`;
  // Each event's frames are kept by form and type; the keys are made once, not per watcher.
  const keys: Record<WatchEventType, string> = { ADDED: `${key} ADDED`, MODIFIED: `${key} MODIFIED`, DELETED: `${key} DELETED` };
  // The metadata forms' apiVersion (meta.k8s.io/v1 or v1beta1).
  const metaApiVersion = `meta.k8s.io/${form.kind === 'metadata' ? form.version : 'v1'}`;
  // PartialObjectMetadata{metadata: ObjectMeta}, enveloped, from ObjectMeta's JSON.
  const partial = (meta: Parameters<typeof encodeMessage>[1]): Buffer => {
    const m = encodeMessage(OBJECT_META, meta);
    return wrap(metaApiVersion, 'PartialObjectMetadata', Buffer.concat([fieldHead(1, m.length), m]));
  };
  // One stored object's message in this form, and the type its envelope names.
  const messageOf = (info: ResourceInfo, o: CachedObject): { apiVersion: string; kind: string; message: Buffer } | undefined => {
    const message = form.kind === 'object' ? objectMessage(info, o) : metadataMessage(info, o);
    if (!message) return undefined;
    return form.kind === 'object' ? { apiVersion: apiVersionOf(info), kind: info.kind, message } : { apiVersion: metaApiVersion, kind: 'PartialObjectMetadata', message };
  };
  // The envelope of one stored object in this form.
  const envelopeOf = (info: ResourceInfo, o: CachedObject): Buffer | undefined => {
    const m = messageOf(info, o);
    return m && wrap(m.apiVersion, m.kind, m.message);
  };
  // The same, from JSON bytes Levee changed (a DELETED at another resourceVersion).
  const envelopeOfJson = (info: ResourceInfo, parts: Buffer[]): Buffer | undefined => {
    try {
      const json = parseObject(Buffer.concat(parts));
      delete json.kind;
      delete json.apiVersion;
      if (form.kind === 'object') return objectFromJson(info, json);
      // As the apiserver converts it: a few kinds move annotations into fields (represent/metadata.ts).
      return partial(parseObject(metadataOfJson(info, Buffer.concat(parts), info.listKind === undefined)));
    } catch (e) {
      if (e instanceof Unrepresentable) return undefined;
      throw e;
    }
  };
  // A bookmark's object: the kind with only its resourceVersion (and annotations), as the
  // apiserver writes it for the watch's own form.
  const bookmarkObject = (info: ResourceInfo, metadata: Record<string, unknown>): Buffer => {
    if (form.kind === 'object') return objectFromJson(info, { metadata });
    return partial(metadata as Parameters<typeof encodeMessage>[1]);
  };
  const lastBookmark = new WeakMap<ResourceInfo, { resourceVersion: number; frame: Buffer }>();
  return {
    contentType: PROTOBUF_WATCH,
    event(info, event, type) {
      let byKey = frames.get(event);
      if (!byKey) {
        byKey = new Map();
        frames.set(event, byKey);
      }
      const k = keys[type];
      let frame = byKey.get(k);
      if (frame === undefined) {
        const { object, parts } = eventObject(info, event, type);
        const env = parts ? envelopeOfJson(info, parts) : envelopeOf(info, object);
        frame = env ? watchFrame(type, env) : null;
        byKey.set(k, frame);
      }
      return frame ?? undefined;
    },
    bookmark(info, resourceVersion) {
      const last = lastBookmark.get(info);
      if (last?.resourceVersion === resourceVersion) return last.frame;
      const frame = watchFrame('BOOKMARK', bookmarkObject(info, { resourceVersion: String(resourceVersion) }));
      lastBookmark.set(info, { resourceVersion, frame });
      return frame;
    },
    added(info, o) {
      const m = messageOf(info, o);
      return m && watchFrameParts('ADDED', m.apiVersion, m.kind, m.message);
    },
    initialEventsEnd(info, resourceVersion) {
      // With the list blueprint client-go 1.32 and 1.33 expect, as in JSON (watch/encode.ts): an
      // empty list in the watch's own encoding, base64-encoded.
      const list = form.kind === 'object' ? { apiVersion: apiVersionOf(info), kind: `${info.kind}List` } : { apiVersion: metaApiVersion, kind: 'PartialObjectMetadataList' };
      const blueprint = wrap(list.apiVersion, list.kind, listMetaField({ resourceVersion: '' })).toString('base64');
      return watchFrame(
        'BOOKMARK',
        bookmarkObject(info, {
          resourceVersion: String(resourceVersion),
          annotations: { 'k8s.io/initial-events-end': 'true', 'kubernetes.io/initial-events-list-blueprint': blueprint },
        }),
      );
    },
    error(status: Status) {
      return watchFrame('ERROR', encodeStatusAs(status, { media: 'protobuf', pretty: false }).body);
    },
  };
}

export const PROTOBUF_OBJECT_WATCH = encoding({ kind: 'object' });
export const PROTOBUF_METADATA_WATCH = { v1: encoding({ kind: 'metadata', version: 'v1' }), v1beta1: encoding({ kind: 'metadata', version: 'v1beta1' }) };

/** Whether a watch of this resource can be written in protobuf as the object itself. */
export function watchesInProtobuf(info: ResourceInfo): boolean {
  return messageOfKind(apiVersionOf(info), info.kind) !== undefined;
}
