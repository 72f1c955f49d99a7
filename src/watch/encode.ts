// Watch events as the apiserver frames them in JSON: one event per line,
// {"type":"…","object":{…}}\n, with each object's stored bytes; each event's line is built once
// and shared by every watcher that receives it.
import { apiVersionOf, type ResourceInfo } from '../api/resource.ts';
import type { Status } from '../api/types.ts';
import type { StoreEvent } from '../store/events.ts';
import { objectBytes, type CachedObject } from '../store/object.ts';
import { joinBytes, joinKept } from '../store/bytes.ts';

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

const lines = new WeakMap<StoreEvent, Map<WatchEventType, Buffer>>();
const CLOSE = Buffer.from('}\n');

function frame(type: string, parts: Buffer[]): Buffer {
  return joinKept([Buffer.from(`{"type":"${type}","object":`), ...parts, CLOSE]);
}

/**
 * How a watch writes its events: JSON lines here, protobuf frames (watch/protobuf.ts), and the
 * metadata-only forms. Every frame of an event is made once and shared by the watchers that
 * receive it in that representation.
 */
export interface WatchEncoding {
  readonly contentType: string;
  /** The frame for `event` delivered as `type`; undefined when this event cannot be written so. */
  event(info: ResourceInfo, event: StoreEvent, type: WatchEventType): Buffer | undefined;
  bookmark(info: ResourceInfo, resourceVersion: number): Buffer;
  /**
   * The frame of an object of the initial state, as its parts in order (the object's stored bytes
   * among them): such a frame goes to one watcher only, so it is written as it stands rather than
   * copied into one buffer first (writeParts).
   */
  added(info: ResourceInfo, o: CachedObject): Buffer[] | undefined;
  initialEventsEnd(info: ResourceInfo, resourceVersion: number): Buffer;
  error(status: Status): Buffer;
}

/**
 * The object an event carries to a watcher that receives it as `type`: the stored object, or its
 * previous state, and in either case at the event's resourceVersion when it is a DELETED the
 * watcher sees for an object it did not change (docs/design.md, "Watch").
 */
export function eventObject(info: ResourceInfo, event: StoreEvent, type: WatchEventType): { object: CachedObject; parts: Buffer[] | undefined } {
  // An object that leaves a watcher's selection is sent as DELETED with its previous state at
  // the event's resourceVersion, as the apiserver's cacher does.
  // So is an object a relist found gone, at the list's resourceVersion.
  const leaving = type === 'DELETED' && event.type !== 'DELETED';
  const object = leaving ? event.prev! : event.object;
  const parts = type === 'DELETED' && object.resourceVersion !== event.resourceVersion ? withResourceVersion(objectBytes(info, object), object, event.resourceVersion) : undefined;
  return { object, parts };
}

/** The line for `event` delivered as `type` to a watcher (selector transitions change the type). */
export function eventLine(info: ResourceInfo, event: StoreEvent, type: WatchEventType): Buffer {
  let byType = lines.get(event);
  if (!byType) {
    byType = new Map();
    lines.set(event, byType);
  }
  let line = byType.get(type);
  if (!line) {
    const { object, parts } = eventObject(info, event, type);
    line = frame(type, parts ?? objectBytes(info, object));
    byType.set(type, line);
  }
  return line;
}

/**
 * The object's bytes with metadata.resourceVersion changed. The first `"resourceVersion":"` in an
 * object is its metadata's: metadata comes first (typed objects) or after apiVersion and kind
 * (unstructured), and no earlier value can contain the sequence.
 */
function withResourceVersion(parts: Buffer[], o: CachedObject, rv: number): Buffer[] {
  const joined = joinBytes(parts);
  const needle = Buffer.from(`"resourceVersion":"${o.resourceVersion}"`);
  const at = joined.indexOf(needle);
  if (at === -1) return [joined];
  return [joined.subarray(0, at), Buffer.from(`"resourceVersion":"${rv}"`), joined.subarray(at + needle.length)];
}

// Watchers opened together take their bookmarks together, and after a relist every watcher takes
// one: mostly at the same resourceVersion, so the last line made serves the next watcher too.
const lastBookmark = new WeakMap<ResourceInfo, { resourceVersion: number; line: Buffer }>();

export function bookmarkLine(info: ResourceInfo, resourceVersion: number): Buffer {
  const last = lastBookmark.get(info);
  if (last?.resourceVersion === resourceVersion) return last.line;
  const line = Buffer.from(
    `{"type":"BOOKMARK","object":{"kind":${JSON.stringify(info.kind)},"apiVersion":${JSON.stringify(apiVersionOf(info))},"metadata":{"resourceVersion":"${resourceVersion}"}}}\n`,
  );
  lastBookmark.set(info, { resourceVersion, line });
  return line;
}

const ADDED_HEAD = Buffer.from('{"type":"ADDED","object":');

/** A synthetic ADDED for an object of the initial state (watch from resourceVersion 0, watch-list), in parts. */
export function addedLine(info: ResourceInfo, o: CachedObject): Buffer[] {
  return [ADDED_HEAD, ...objectBytes(info, o), CLOSE];
}

/**
 * The bookmark that ends a watch-list's initial events (metav1.InitialEventsAnnotationKey). It also
 * carries kubernetes.io/initial-events-list-blueprint, an empty list of the resource, encoded and
 * then base64-encoded: client-go 1.32 and 1.33 refuse a watch-list without it and fall back to a
 * LIST (kubernetes/kubernetes#138167); the apiserver stopped sending it in 1.34, and later clients
 * ignore it.
 */
export function initialEventsEndLine(info: ResourceInfo, resourceVersion: number): Buffer {
  return Buffer.from(
    `{"type":"BOOKMARK","object":{"kind":${JSON.stringify(info.kind)},"apiVersion":${JSON.stringify(apiVersionOf(info))},"metadata":{"resourceVersion":"${resourceVersion}","annotations":{"k8s.io/initial-events-end":"true","kubernetes.io/initial-events-list-blueprint":"${listBlueprint(info)}"}}}}\n`,
  );
}

const blueprints = new WeakMap<ResourceInfo, string>();

/** An empty list of the resource as the apiserver encoded it for the blueprint, base64. */
function listBlueprint(info: ResourceInfo): string {
  let b = blueprints.get(info);
  if (b === undefined) {
    const apiVersion = JSON.stringify(apiVersionOf(info));
    // A custom resource's list is unstructured: its keys sorted, and items an empty array.
    const json =
      info.listKind !== undefined
        ? `{"apiVersion":${apiVersion},"items":[],"kind":${JSON.stringify(info.listKind)},"metadata":{}}\n`
        : `{"kind":${JSON.stringify(`${info.kind}List`)},"apiVersion":${apiVersion},"metadata":{},"items":null}\n`;
    b = Buffer.from(json).toString('base64');
    blueprints.set(info, b);
  }
  return b;
}

/** An ERROR event carrying a Status, the way the apiserver ends a watch it refuses to continue. */
export function errorLine(status: Status): Buffer {
  return Buffer.from(`{"type":"ERROR","object":${JSON.stringify(status)}}\n`);
}

export const JSON_WATCH: WatchEncoding = {
  contentType: 'application/json',
  event: eventLine,
  bookmark: bookmarkLine,
  added: addedLine,
  initialEventsEnd: initialEventsEndLine,
  error: errorLine,
};
