// Turns an object's bytes into a CachedObject: one JSON.parse to read what serving needs (key,
// resourceVersion, labels, selectable fields); the bytes themselves are kept as they came.
import { apiVersionOf, fieldsOfResource, type ResourceInfo } from '../api/resource.ts';
import { fieldSet } from '../selectors/selectable.ts';
import { objectKey, parseResourceVersion, toItem, typeMetaPrefix, type CachedObject } from '../store/object.ts';
import { allocKept, copyFromSharedMemory, joinInto, kept } from '../store/bytes.ts';

interface ObjectMeta {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string; labels?: Record<string, string> };
}

export type Decoder = (raw: Buffer) => CachedObject;

/**
 * `transform` turns an object's bytes into what is kept of it, for a store no client reads (the
 * CustomResourceDefinitions Levee follows keep a summary, not their schemas). `shared` keeps each
 * object's bytes in a SharedArrayBuffer of its own, so the worker threads that serve them read the
 * one copy (docs/design.md, "Workers").
 */
export function decoder(info: ResourceInfo, transform?: (raw: Buffer) => Buffer, shared = false): Decoder {
  const prefix = typeMetaPrefix({ kind: info.kind, apiVersion: apiVersionOf(info) });
  const selectable = fieldsOfResource(info);
  // A typed object's item is written where it is kept; other bytes are copied there if need be.
  const alloc = shared ? sharedBytes : allocKept;
  const keep = shared ? (b: Buffer): Buffer => (b.buffer instanceof SharedArrayBuffer ? b : sharedCopy(b)) : kept;
  return (raw) => {
    const normalized = toItem(transform ? transform(raw) : raw, prefix, alloc);
    const item = keep(normalized.item);
    const typed = normalized.typed;
    const obj = JSON.parse(item.toString('utf8')) as ObjectMeta;
    const meta = obj.metadata ?? {};
    const name = meta.name ?? '';
    const namespace = meta.namespace ?? '';
    const resourceVersion = parseResourceVersion(meta.resourceVersion ?? '');
    if (name === '' || resourceVersion === undefined) {
      throw new Error(`${info.resource}: object without name or with resourceVersion "${meta.resourceVersion}"`);
    }
    return {
      key: objectKey(namespace, name),
      namespace,
      name,
      resourceVersion,
      labels: meta.labels ?? {},
      fields: fieldSet(selectable, obj, item),
      item,
      typed,
    };
  };
}

/**
 * The bytes in memory every thread can read. One SharedArrayBuffer per object rather than slabs:
 * an object's memory is then freed when no thread holds it any more (garbage collection counts
 * every thread's references), with nothing to compact as objects change. Copied by joinInto, with
 * memcpy: Buffer.copy into shared memory takes V8's relaxed-atomic loop (store/bytes.ts).
 */
export function sharedCopy(bytes: Buffer): Buffer {
  return joinInto(sharedBytes, [bytes], bytes.length);
}

function sharedBytes(size: number): Buffer {
  copyFromSharedMemory();
  return Buffer.from(new SharedArrayBuffer(size));
}
