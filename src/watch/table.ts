// Watch events as Tables, for `kubectl get --watch`: each event's object as a Table of one row
// (handlers/response.go, watchEmbeddedEncoder). The columns come in the watch's first event only,
// whatever its type; every later event has `"columnDefinitions":null`. So a Table watch keeps
// one flag of its own; its frames are otherwise shared by every watcher of the event in the same
// form, with the times of their first writing (the apiserver caches each object's encoding too).
import type { Representation } from '../api/negotiation.ts';
import { apiVersionOf, type ResourceInfo } from '../api/resource.ts';
import type { StoreEvent } from '../store/events.ts';
import type { CachedObject } from '../store/object.ts';
import { encodeListMeta, printedRow, rowBytes, rowOfJson, tableEnvelope, type TableForm } from '../represent/table/encode.ts';
import { joinKept } from '../store/bytes.ts';
import { errorLine, eventObject, type WatchEncoding, type WatchEventType } from './encode.ts';

const frames = new WeakMap<StoreEvent, Map<string, Buffer | null>>();
const CLOSE = Buffer.from('}\n');

function frame(type: string, info: ResourceInfo, form: TableForm, resourceVersion: number, headers: boolean, row: Buffer): Buffer {
  const [head, tail] = tableEnvelope(info, form.version, encodeListMeta(String(resourceVersion), undefined, undefined), headers);
  return joinKept([Buffer.from(`{"type":"${type}","object":`), head, row, tail, CLOSE]);
}

/** The kind's object with only these metadata, as a bookmark carries it (TypeMeta in its place). */
function bookmarkObject(info: ResourceInfo, metadata: string): { json: Buffer; typed: boolean } {
  const kind = JSON.stringify(info.kind);
  const apiVersion = JSON.stringify(apiVersionOf(info));
  // A custom resource is unstructured: its keys sorted.
  return info.listKind !== undefined
    ? { json: Buffer.from(`{"apiVersion":${apiVersion},"kind":${kind},"metadata":${metadata}}`), typed: false }
    : { json: Buffer.from(`{"kind":${kind},"apiVersion":${apiVersion},"metadata":${metadata}}`), typed: true };
}

/** A new Table encoding for one watch (it remembers whether the columns have been sent). */
export function tableWatch(rep: Extract<Representation, { as: 'Table' }>): WatchEncoding {
  const form: TableForm = { version: rep.version, includeObject: rep.includeObject ?? 'Metadata' };
  let headersSent = false;
  const headers = (): boolean => {
    const first = !headersSent;
    headersSent = true;
    return first;
  };
  const bookmarkFrame = (info: ResourceInfo, resourceVersion: number, metadata: string, f: TableForm): Buffer => {
    const { json, typed } = bookmarkObject(info, metadata);
    // Every kind with a Table prints its empty object (represent/table/tabulator.ts).
    const row = rowOfJson(info, json, typed, f, Date.now())!;
    return frame('BOOKMARK', info, f, resourceVersion, headers(), row);
  };
  return {
    contentType: 'application/json',
    event(info: ResourceInfo, event: StoreEvent, type: WatchEventType) {
      const h = headers();
      let byKey = frames.get(event);
      if (!byKey) {
        byKey = new Map();
        frames.set(event, byKey);
      }
      const key = `${form.version} ${form.includeObject} ${h} ${type}`;
      let f = byKey.get(key);
      if (f === undefined) {
        const { object, parts } = eventObject(info, event, type);
        const now = Date.now();
        const row = parts ? rowOfJson(info, Buffer.concat(parts), object.typed, form, now, printedRow(info, object)) : rowBytes(info, object, form, now);
        f = row ? frame(type, info, form, parts ? event.resourceVersion : object.resourceVersion, h, row) : null;
        byKey.set(key, f);
      }
      return f ?? undefined;
    },
    bookmark(info: ResourceInfo, resourceVersion: number) {
      return bookmarkFrame(info, resourceVersion, `{"resourceVersion":"${resourceVersion}"}`, form);
    },
    added(info: ResourceInfo, o: CachedObject) {
      const h = headers();
      const row = rowBytes(info, o, form, Date.now());
      const f = row && frame('ADDED', info, form, o.resourceVersion, h, row);
      return f ? [f] : undefined;
    },
    initialEventsEnd(info: ResourceInfo, resourceVersion: number) {
      // This bookmark's row carries its metadata whatever includeObject says (asTable), and the
      // apiserver sends no list blueprint in a Table.
      const metadata = `{"resourceVersion":"${resourceVersion}","annotations":{"k8s.io/initial-events-end":"true"}}`;
      return bookmarkFrame(info, resourceVersion, metadata, form.includeObject === 'None' ? { ...form, includeObject: 'Metadata' } : form);
    },
    error: errorLine,
  };
}
