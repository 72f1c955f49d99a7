// Watch events as PartialObjectMetadata in JSON, for metadata-only clients that negotiated JSON:
// each event's object reduced to its metadata (represent/metadata.ts), framed as JSON events are.
// Frames are made once per event and version and shared by the watchers that receive them.
import type { ResourceInfo } from '../api/resource.ts';
import type { StoreEvent } from '../store/events.ts';
import type { CachedObject } from '../store/object.ts';
import { metadataOf, metadataOfJson, partialObjectMetadata, type MetaVersion } from '../represent/metadata.ts';
import { errorLine, eventObject, type WatchEncoding, type WatchEventType } from './encode.ts';
import { joinKept } from '../store/bytes.ts';

const frames = new WeakMap<StoreEvent, Map<string, Buffer | null>>();
const CLOSE = Buffer.from('}\n');

function frame(type: string, object: Buffer[]): Buffer {
  return joinKept([Buffer.from(`{"type":"${type}","object":`), ...object, CLOSE]);
}

function encoding(version: MetaVersion): WatchEncoding {
  const metadataFrame = (type: string, metadata: () => Buffer): Buffer | undefined => {
    try {
      return frame(type, partialObjectMetadata(version, metadata()));
    } catch {
      return undefined;
    }
  };
  const lastBookmark = new WeakMap<ResourceInfo, { resourceVersion: number; frame: Buffer }>();
  return {
    contentType: 'application/json',
    event(info: ResourceInfo, event: StoreEvent, type: WatchEventType) {
      let byKey = frames.get(event);
      if (!byKey) {
        byKey = new Map();
        frames.set(event, byKey);
      }
      const key = `${version} ${type}`;
      let f = byKey.get(key);
      if (f === undefined) {
        const { object, parts } = eventObject(info, event, type);
        f = metadataFrame(type, () => (parts ? metadataOfJson(info, Buffer.concat(parts), object.typed) : metadataOf(info, object))) ?? null;
        byKey.set(key, f);
      }
      return f ?? undefined;
    },
    bookmark(info: ResourceInfo, resourceVersion: number) {
      const last = lastBookmark.get(info);
      if (last?.resourceVersion === resourceVersion) return last.frame;
      const f = frame('BOOKMARK', partialObjectMetadata(version, Buffer.from(`{"resourceVersion":"${resourceVersion}"}`)));
      lastBookmark.set(info, { resourceVersion, frame: f });
      return f;
    },
    added(info: ResourceInfo, o: CachedObject) {
      const f = metadataFrame('ADDED', () => metadataOf(info, o));
      return f && [f];
    },
    initialEventsEnd(_info: ResourceInfo, resourceVersion: number) {
      // With the list blueprint client-go 1.32 and 1.33 expect, as the JSON and protobuf watches
      // send it (watch/encode.ts): an empty list of the watch's own kind, base64-encoded.
      const blueprint = Buffer.from(`{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/${version}","metadata":{},"items":null}\n`).toString('base64');
      const metadata = `{"resourceVersion":"${resourceVersion}","annotations":{"k8s.io/initial-events-end":"true","kubernetes.io/initial-events-list-blueprint":"${blueprint}"}}`;
      return frame('BOOKMARK', partialObjectMetadata(version, Buffer.from(metadata)));
    },
    error: errorLine,
  };
}

export const JSON_METADATA_WATCH: Readonly<Record<MetaVersion, WatchEncoding>> = { v1: encoding('v1'), v1beta1: encoding('v1beta1') };
