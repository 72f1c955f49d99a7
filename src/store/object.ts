// One cached object: its bytes as a LIST item carries them, and the few parsed values serving
// needs (key, resourceVersion, labels, selectable fields). Parsed once when it arrives, never
// re-serialized.
import { apiVersionOf, type ResourceInfo } from '../api/resource.ts';
import { allocKept, joinInto } from './bytes.ts';

export interface CachedObject {
  /** etcd key below the resource prefix: "/namespace/name" or "/name"; sorts as etcd does. */
  key: string;
  namespace: string;
  name: string;
  resourceVersion: number;
  labels: Readonly<Record<string, string>>;
  fields: Readonly<Record<string, string>>;
  /**
   * The object as a LIST item carries it. Built-in types omit kind and apiVersion inside lists and
   * carry them everywhere else; custom resources carry them everywhere (see `typed`).
   */
  item: Buffer;
  /** True when `item` lacks kind/apiVersion and GET and watch answers must prefix them. */
  typed: boolean;
}

export interface TypeMeta {
  kind: string;
  apiVersion: string;
}

/** The bytes a typed object starts with in a GET or watch answer: `{"kind":"Pod","apiVersion":"v1",`. */
export function typeMetaPrefix(t: TypeMeta): Buffer {
  return Buffer.from(`{"kind":${JSON.stringify(t.kind)},"apiVersion":${JSON.stringify(t.apiVersion)},`);
}

// One prefix per resource (its kind and apiVersion), made at its first object.
const prefixes = new WeakMap<ResourceInfo, Buffer>();

/**
 * An object's bytes as a GET or a watch event carries them: its stored item, with TypeMeta put
 * back in front for a built-in type (a LIST item omits it; a custom resource keeps its own).
 */
export function objectBytes(info: ResourceInfo, o: CachedObject): Buffer[] {
  if (!o.typed) return [o.item];
  let prefix = prefixes.get(info);
  if (!prefix) {
    prefix = typeMetaPrefix({ kind: info.kind, apiVersion: apiVersionOf(info) });
    prefixes.set(info, prefix);
  }
  return [prefix, o.item.subarray(1)];
}

const OPEN_BRACE = Buffer.from('{');
const METADATA_FIRST = Buffer.from('{"metadata"');

/**
 * Normalizes an object's bytes into LIST-item form. The apiserver encodes built-in types with
 * TypeMeta first (`{"kind":…,"apiVersion":…,"metadata":…`) and omits it for list items; custom
 * resources are unstructured and keep `apiVersion` and `kind` (sorted keys) everywhere.
 */
export function toItem(raw: Buffer, prefix: Buffer, alloc: (size: number) => Buffer = allocKept): { item: Buffer; typed: boolean } {
  if (raw.length > prefix.length && raw.subarray(0, prefix.length).equals(prefix)) {
    // Kept: a buffer of its own (store/bytes.ts), or shared memory when `alloc` makes it.
    return { item: joinInto(alloc, [OPEN_BRACE, raw.subarray(prefix.length)]), typed: true };
  }
  if (raw.subarray(0, METADATA_FIRST.length).equals(METADATA_FIRST)) return { item: raw, typed: true };
  return { item: raw, typed: false };
}

export function objectKey(namespace: string, name: string): string {
  return namespace === '' ? `/${name}` : `/${namespace}/${name}`;
}

/** etcd revisions as numbers. Larger than 2^53 cannot occur in practice; such input is refused. */
export function parseResourceVersion(value: string): number | undefined {
  if (!/^\d{1,16}$/.test(value)) return undefined;
  const n = Number(value);
  return Number.isSafeInteger(n) ? n : undefined;
}
