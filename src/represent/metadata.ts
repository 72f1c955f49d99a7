// PartialObjectMetadata and PartialObjectMetadataList in JSON, as the apiserver writes them for
// metadata-only clients (the garbage collector's and controller-runtime's metadata informers) and
// inside Table rows (docs/design.md, "Representations").
//
// The apiserver writes the ObjectMeta of its internal object. For a built-in kind that is the v1
// object's metadata, encoded the same way inside the object and on its own: those bytes are taken
// out of the stored object. A few kinds keep a field of their internal type in an annotation of
// v1, which the internal object does not have (INTERNAL_ANNOTATIONS): their metadata is written
// again without it. A custom resource is unstructured, its metadata's keys sorted; the apiserver
// reads it through the unstructured accessors into a typed ObjectMeta (meta.AsPartialObjectMetadata)
// and writes that in the typed field order: here too, from the stored bytes of each field.
import { apiVersionOf, type ResourceInfo } from '../api/resource.ts';
import type { CachedObject } from '../store/object.ts';
import { kept } from '../store/bytes.ts';
import { compareGo } from '../selectors/gostrings.ts';
import { goString } from './gojson.ts';
import { formatTime, parseTime } from './gotime.ts';
import { members, valueEnd, type Span } from './jsonbytes.ts';

export type MetaVersion = 'v1' | 'v1beta1';

/** Whether an annotation of the v1 object is a field of the internal one, absent from its metadata. */
type Internal = (key: string, value: string) => boolean;

// The round-trip annotations conversion to the internal version removes
// (pkg/apis/autoscaling.DropRoundTripHorizontalPodAutoscalerAnnotations).
const HPA = new Set([
  'autoscaling.alpha.kubernetes.io/metrics',
  'autoscaling.alpha.kubernetes.io/behavior',
  'autoscaling.alpha.kubernetes.io/scale-down-tolerance',
  'autoscaling.alpha.kubernetes.io/scale-up-tolerance',
  'autoscaling.alpha.kubernetes.io/current-metrics',
  'autoscaling.alpha.kubernetes.io/conditions',
]);

/** By apiVersion and kind: the conversions of pkg/apis/<group>/<version>/conversion.go that move annotations. */
const INTERNAL_ANNOTATIONS: ReadonlyMap<string, Internal> = new Map<string, Internal>([
  // spec.templateGeneration.
  ['apps/v1 DaemonSet', (k) => k === 'deprecated.daemonset.template.generation'],
  // spec.rollbackTo, when set.
  ['apps/v1 Deployment', (k, v) => k === 'deprecated.deployment.rollback.to' && v !== ''],
  ['autoscaling/v1 HorizontalPodAutoscaler', (k) => HPA.has(k)],
  ['autoscaling/v2 HorizontalPodAutoscaler', (k) => HPA.has(k)],
]);

/** Whether the kind's metadata as the apiserver converts it differs from the stored object's. */
export function movesAnnotations(info: ResourceInfo): boolean {
  return info.listKind === undefined && INTERNAL_ANNOTATIONS.has(`${apiVersionOf(info)} ${info.kind}`);
}

const METADATA_FIRST = Buffer.from('{"metadata":');
const cached = new WeakMap<CachedObject, Buffer>();

/**
 * The stored object's metadata as the apiserver writes its internal ObjectMeta: `{"name":…}`.
 * Made once per stored object: for most built-in kinds, a view of its item.
 */
export function metadataOf(info: ResourceInfo, o: CachedObject): Buffer {
  let m = cached.get(o);
  if (m === undefined) {
    m = o.typed && o.item.subarray(0, METADATA_FIRST.length).equals(METADATA_FIRST) ? typedMetadata(info, o.item, { start: METADATA_FIRST.length, end: valueEnd(o.item, METADATA_FIRST.length) }) : metadataOfJson(info, o.item, o.typed);
    // A view of the item is kept as it is; metadata written anew gets memory of its own (store/bytes.ts).
    if (m.buffer !== o.item.buffer) m = kept(m);
    cached.set(o, m);
  }
  return m;
}

/**
 * The metadata of an object's JSON (a built-in's with its TypeMeta, or a custom resource's), for
 * bytes Levee changed: a DELETED at another resourceVersion.
 */
export function metadataOfJson(info: ResourceInfo, json: Buffer, typed: boolean): Buffer {
  const span = members(json, 0).get('metadata');
  if (!span || json[span.start] !== 0x7b) return Buffer.from('{}');
  return typed ? typedMetadata(info, json, span) : objectMeta(json, span, undefined);
}

function typedMetadata(info: ResourceInfo, json: Buffer, span: Span): Buffer {
  const internal = info.listKind === undefined ? INTERNAL_ANNOTATIONS.get(`${apiVersionOf(info)} ${info.kind}`) : undefined;
  return internal ? objectMeta(json, span, internal) : json.subarray(span.start, span.end);
}

/** `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":…}`, without a newline. */
export function partialObjectMetadata(version: MetaVersion, metadata: Buffer): Buffer[] {
  return [prefixes[version], metadata, CLOSE];
}

const prefixes: Record<MetaVersion, Buffer> = {
  v1: Buffer.from('{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":'),
  v1beta1: Buffer.from('{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1beta1","metadata":'),
};
const CLOSE = Buffer.from('}');

/**
 * What a PartialObjectMetadataList's items go between. Its ListMeta as any list's; the items of
 * an empty list are `null` (asPartialObjectMetadataList leaves the slice nil).
 */
export function metadataListEnvelope(version: MetaVersion, resourceVersion: string, cont: string | undefined, remaining: number | undefined, empty: boolean): [Buffer, Buffer] {
  const meta = [`"resourceVersion":${goString(resourceVersion)}`];
  if (cont !== undefined) {
    meta.push(`"continue":${goString(cont)}`);
    if (remaining !== undefined) meta.push(`"remainingItemCount":${remaining}`);
  }
  const head = `{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/${version}","metadata":{${meta.join(',')}},"items":`;
  return empty ? [Buffer.from(`${head}null}\n`), Buffer.alloc(0)] : [Buffer.from(`${head}[`), Buffer.from(']}\n')];
}

// The typed ObjectMeta, field by field, from the metadata at `span`: what each accessor of
// unstructured.Unstructured returns, written as encoding/json writes the struct, without the
// annotations `internal` names.
function objectMeta(item: Buffer, span: Span, internal: Internal | undefined): Buffer {
  const fields = members(item, span.start);
  const raw = (s: Span): string => item.toString('utf8', s.start, s.end);
  const value = (key: string): unknown => {
    const s = fields.get(key);
    return s === undefined ? undefined : (JSON.parse(raw(s)) as unknown);
  };
  const out: string[] = [];
  // Strings: a value that is not a string reads as "" (getNestedString), which omitempty drops.
  const str = (key: string): void => {
    const s = fields.get(key);
    if (s && item[s.start] === 0x22 && s.end - s.start > 2) out.push(`${goString(key)}:${raw(s)}`);
  };
  str('name');
  str('generateName');
  str('namespace');
  str('selfLink');
  str('uid');
  str('resourceVersion');
  const generation = int64(fields.get('generation'), raw);
  if (generation !== undefined && generation !== '0') out.push(`"generation":${generation}`);
  const created = value('creationTimestamp');
  const createdAt = typeof created === 'string' ? parseTime(created) : undefined;
  if (createdAt !== undefined) out.push(`"creationTimestamp":"${formatTime(createdAt)}"`);
  // A pointer: present (even unreadable, then the zero time, null) once the key is there.
  if (fields.has('deletionTimestamp')) {
    const d = value('deletionTimestamp');
    const at = typeof d === 'string' ? parseTime(d) : undefined;
    out.push(`"deletionTimestamp":${at === undefined ? 'null' : `"${formatTime(at)}"`}`);
  }
  const grace = int64(fields.get('deletionGracePeriodSeconds'), raw);
  if (grace !== undefined) out.push(`"deletionGracePeriodSeconds":${grace}`);
  for (const key of ['labels', 'annotations']) {
    // NestedStringMap: only a map of strings, else none; the stored map's keys are sorted already.
    const m = value(key);
    if (m === null || typeof m !== 'object' || Array.isArray(m)) continue;
    const entries = Object.entries(m as Record<string, unknown>);
    if (!entries.every(([, v]) => typeof v === 'string')) continue;
    const kept = key === 'annotations' && internal ? entries.filter(([k, v]) => !internal(k, v as string)) : entries;
    if (kept.length === 0) continue;
    if (kept.length === entries.length) out.push(`${goString(key)}:${raw(fields.get(key)!)}`);
    else out.push(`${goString(key)}:{${kept.sort(([a], [b]) => compareGo(a, b)).map(([k, v]) => `${goString(k)}:${goString(v as string)}`).join(',')}}`);
  }
  const owners = ownerReferences(value('ownerReferences'));
  if (owners) out.push(`"ownerReferences":${owners}`);
  const finalizers = value('finalizers');
  if (Array.isArray(finalizers) && finalizers.length > 0 && finalizers.every((f) => typeof f === 'string')) out.push(`"finalizers":${raw(fields.get('finalizers')!)}`);
  const managed = fields.get('managedFields');
  const managedFields = managed && item[managed.start] === 0x5b ? managedFieldsOf(item, managed) : undefined;
  if (managedFields) out.push(`"managedFields":${managedFields}`);
  return Buffer.from(`{${out.join(',')}}`);
}

// NestedInt64: an integer that fits an int64, as its digits.
function int64(s: Span | undefined, raw: (s: Span) => string): string | undefined {
  if (!s) return undefined;
  const text = raw(s);
  if (!/^-?\d+$/.test(text)) return undefined;
  const n = BigInt(text);
  return n >= -(2n ** 63n) && n < 2n ** 63n ? n.toString() : undefined;
}

// GetOwnerReferences: every entry a map, else none; each as metav1.OwnerReference writes.
function ownerReferences(v: unknown): string | undefined {
  if (!Array.isArray(v) || v.length === 0) return undefined;
  const refs: string[] = [];
  for (const r of v) {
    if (r === null || typeof r !== 'object' || Array.isArray(r)) return undefined;
    const o = r as Record<string, unknown>;
    const s = (k: string): string => goString(typeof o[k] === 'string' ? o[k] : '');
    let ref = `{"apiVersion":${s('apiVersion')},"kind":${s('kind')},"name":${s('name')},"uid":${s('uid')}`;
    if (typeof o.controller === 'boolean') ref += `,"controller":${o.controller}`;
    if (typeof o.blockOwnerDeletion === 'boolean') ref += `,"blockOwnerDeletion":${o.blockOwnerDeletion}`;
    refs.push(`${ref}}`);
  }
  return `[${refs.join(',')}]`;
}

// GetManagedFields: each entry converted to metav1.ManagedFieldsEntry; an entry that is not a map,
// or does not convert, leaves none at all.
function managedFieldsOf(item: Buffer, span: Span): string | undefined {
  const entries: string[] = [];
  let i = span.start + 1;
  while (i < span.end - 1) {
    while (item[i] === 0x2c || item[i] === 0x20) i++;
    if (i >= span.end - 1) break;
    const end = valueEnd(item, i);
    if (item[i] !== 0x7b) return undefined;
    const f = members(item, i);
    const parts: string[] = [];
    for (const key of ['manager', 'operation', 'apiVersion']) {
      const s = f.get(key);
      if (!s) continue;
      if (item[s.start] !== 0x22) {
        if (item.toString('utf8', s.start, s.end) === 'null') continue;
        return undefined;
      }
      if (s.end - s.start > 2) parts.push(`${goString(key)}:${item.toString('utf8', s.start, s.end)}`);
    }
    const t = f.get('time');
    if (t && item.toString('utf8', t.start, t.end) !== 'null') {
      const at = item[t.start] === 0x22 ? parseTime(JSON.parse(item.toString('utf8', t.start, t.end)) as string) : undefined;
      if (at === undefined) return undefined;
      parts.push(`"time":"${formatTime(at)}"`);
    }
    const type = f.get('fieldsType');
    if (type && item[type.start] === 0x22 && type.end - type.start > 2) parts.push(`"fieldsType":${item.toString('utf8', type.start, type.end)}`);
    const fields = f.get('fieldsV1');
    if (fields && item.toString('utf8', fields.start, fields.end) !== 'null') parts.push(`"fieldsV1":${item.toString('utf8', fields.start, fields.end)}`);
    const sub = f.get('subresource');
    if (sub && item[sub.start] === 0x22 && sub.end - sub.start > 2) parts.push(`"subresource":${item.toString('utf8', sub.start, sub.end)}`);
    entries.push(`{${parts.join(',')}}`);
    i = end;
  }
  return entries.length > 0 ? `[${entries.join(',')}]` : undefined;
}
