// Answers a GET or LIST from the cache, as the apiserver's watch cache would: bodies assembled from
// each object's stored bytes (never re-serialized) and written with backpressure.
import { newNotFound } from '../api/status.ts';
import type { CachedResource } from '../cache/cache.ts';
import { listLive, scan, type ListQuery, type ListResult } from '../store/query.ts';
import { objectBytes, objectKey, type CachedObject } from '../store/object.ts';
import { apiVersionOf } from '../api/resource.ts';
import { encodeContinue } from './continuetoken.ts';
import type { ReadPlan } from './decide.ts';
import { CONSISTENCY_HEADER, prove, type ConsistentReadObserver, type Stale } from './freshness.ts';
import type { DownstreamResponse } from '../http/downstream.ts';
import { ChunkedBody } from '../http/chunkedbody.ts';
import { writeStatusAs } from './status.ts';
import { envelope as protobufEnvelope, fieldHead, listMetaField, metadataMessage, objectMessage, PROTOBUF, wrap } from '../represent/protobuf/objects.ts';
import type { Representation } from '../api/negotiation.ts';
import { metadataOfObject, tableOfObject, writeMetadataList, writeTableList } from './converted.ts';
import { joinBytes } from '../store/bytes.ts';
import { then, type Maybe } from '../maybe.ts';

/** Answered (its status code and body bytes), or the reason the apiserver must answer instead. */
export type ServeResult = { code: number; bytes: number } | { forward: Stale | 'snapshot-expired' | 'outside-selection' | 'representation' };


function headers(requestId: string | undefined, rep: Representation): Record<string, string> {
  const h: Record<string, string> = { 'content-type': rep.as !== 'Table' && rep.media === 'protobuf' ? PROTOBUF : 'application/json', 'cache-control': 'no-cache, private' };
  if (requestId) h['audit-id'] = requestId;
  return h;
}

/** The answer, once the cache is fresh enough for it: a GET the cache already may answer is written before this returns. */
export function serveRead(
  r: CachedResource,
  plan: ReadPlan,
  res: DownstreamResponse,
  arrivedAt: bigint,
  observer: ConsistentReadObserver,
  requestId?: string,
): Maybe<ServeResult> {
  return then(prove(r, plan.freshness, plan.consistentRead === true, arrivedAt, observer), (proof) => {
    if (!proof.fresh) return { forward: proof.stale };
    const { consistency } = proof;
    const h = headers(requestId, plan.representation);
    if (consistency) h[CONSISTENCY_HEADER] = consistency;
    const counted = (served: ServeResult): ServeResult => {
      if (consistency && 'code' in served) observer.consistentBytes(r.name, 'cache', served.bytes);
      return served;
    };
    return plan.verb === 'get' ? counted(serveGet(r, plan, res, h)) : serveList(r, plan, res, h).then(counted);
  });
}

async function serveList(r: CachedResource, plan: ReadPlan, res: DownstreamResponse, responseHeaders: Record<string, string>): Promise<ServeResult> {
  const store = r.store;

  let result: ListResult;
  let listRV: number;
  const query: ListQuery = { namespace: plan.namespace, labels: plan.labels, fields: plan.fields, limit: plan.limit };
  if (plan.freshness.mode === 'exact') {
    const snapshot = store.snapshotAt(plan.freshness.resourceVersion);
    if (!snapshot) return { forward: 'snapshot-expired' };
    if (plan.continueToken) {
      // The token's start is relative to the list's prefix: the namespace when listing one.
      query.startKey = plan.namespace === '' ? plan.continueToken.start : `/${plan.namespace}${plan.continueToken.start}`;
    }
    result = scan(snapshot.tree, query);
    listRV = plan.freshness.resourceVersion;
  } else {
    // A paged answer must be continuable from exactly this state: kept as a snapshot.
    if (plan.limit > 0) store.current();
    listRV = store.resourceVersion;
    result = listLive(store, query);
  }

  let cont: string | undefined;
  if (result.lastKey !== undefined) {
    const relative = plan.namespace === '' ? result.lastKey : result.lastKey.slice(plan.namespace.length + 1);
    // The list's resourceVersion, as the apiserver's token carries it: a continue at N is read
    // from the newest snapshot not newer than N, which may be older when a bookmark moved the store.
    cont = encodeContinue(listRV, relative);
  }
  const rep = plan.representation;
  if (rep.as !== 'object') {
    const meta = { resourceVersion: String(listRV), continue: cont, remainingItemCount: cont !== undefined ? result.remaining : undefined };
    const written =
      rep.as === 'Table' ? await writeTableList(r, rep, meta, result.items, res, responseHeaders) : rep.media === 'json' ? await writeMetadataList(r, rep, meta, result.items, res, responseHeaders) : null;
    if (written === undefined) return { forward: 'representation' };
    if (written !== null) return { code: 200, bytes: written };
  }
  if (rep.as !== 'Table' && rep.media === 'protobuf') {
    const meta = { resourceVersion: String(listRV), continue: cont, remainingItemCount: cont !== undefined ? result.remaining : undefined };
    return writeProtobufList(r, rep.as === 'object' ? 'object' : rep.version, meta, result.items, res, responseHeaders);
  }
  const [headBytes, tailBytes] = envelope(r, String(listRV), cont, result.remaining);
  // The length is known before the first byte: a Content-Length spares HTTP/1.1 chunk framing.
  let length = headBytes.length + tailBytes.length + Math.max(0, result.items.length - 1);
  for (const o of result.items) length += o.item.length;
  res.writeHead(200, { ...responseHeaders, 'content-length': String(length) });
  await writeItems(res, headBytes, result.items, tailBytes);
  return { code: 200, bytes: length };
}

/**
 * What a list's items go between. A typed list has TypeMeta and ListMeta first; a custom
 * resource's list is unstructured, its keys sorted, and always carries `continue`.
 */
function envelope(r: CachedResource, resourceVersion: string, cont: string | undefined, remaining: number | undefined): [Buffer, Buffer] {
  if (r.info.listKind !== undefined) {
    const meta = [`"continue":${JSON.stringify(cont ?? '')}`];
    if (cont !== undefined && remaining !== undefined) meta.push(`"remainingItemCount":${remaining}`);
    meta.push(`"resourceVersion":${JSON.stringify(resourceVersion)}`);
    return [
      Buffer.from(`{"apiVersion":${JSON.stringify(apiVersionOf(r.info))},"items":[`),
      Buffer.from(`],"kind":${JSON.stringify(r.info.listKind)},"metadata":{${meta.join(',')}}}\n`),
    ];
  }
  const meta: string[] = [`"resourceVersion":${JSON.stringify(resourceVersion)}`];
  if (cont !== undefined) {
    meta.push(`"continue":${JSON.stringify(cont)}`);
    if (remaining !== undefined) meta.push(`"remainingItemCount":${remaining}`);
  }
  return [Buffer.from(`{"kind":${JSON.stringify(`${r.info.kind}List`)},"apiVersion":${JSON.stringify(apiVersionOf(r.info))},"metadata":{${meta.join(',')}},"items":[`), TAIL];
}

function serveGet(r: CachedResource, plan: ReadPlan, res: DownstreamResponse, responseHeaders: Record<string, string>): ServeResult {
  const o = r.store.get(objectKey(plan.namespace, plan.name));
  // Absent from a partial cache says nothing about the apiserver: it answers.
  if (!o && plan.partial) return { forward: 'outside-selection' };
  if (!o) {
    writeStatusAs(res, newNotFound({ group: r.info.group, resource: r.info.resource }, plan.name), plan.representation);
    return { code: 404, bytes: 0 };
  }
  const rep = plan.representation;
  let body: Buffer;
  if (rep.as === 'Table' || (rep.as === 'PartialObjectMetadata' && rep.media === 'json')) {
    const converted = rep.as === 'Table' ? tableOfObject(r, rep, o) : metadataOfObject(r, rep, o);
    if (!converted) return { forward: 'representation' };
    body = converted;
  } else if (rep.media === 'protobuf') {
    const m = rep.as === 'object' ? objectMessage(r.info, o) : metadataMessage(r.info, o);
    if (!m) return { forward: 'representation' };
    body = rep.as === 'object' ? wrap(apiVersionOf(r.info), r.info.kind, m) : wrap(`meta.k8s.io/${rep.version}`, 'PartialObjectMetadata', m);
  } else {
    body = joinBytes([...objectBytes(r.info, o), NEWLINE]);
  }
  // With its length, an HTTP/1.1 answer goes out as head and body, not in chunked framing.
  responseHeaders['content-length'] = String(body.length);
  res.writeHead(200, responseHeaders);
  res.end(body);
  return { code: 200, bytes: body.length };
}

const NEWLINE = Buffer.from('\n');
const COMMA = Buffer.from(',');
const TAIL = Buffer.from(']}\n');

async function writeItems(res: DownstreamResponse, head: Buffer, items: readonly CachedObject[], tail: Buffer): Promise<void> {
  const body = new ChunkedBody(res);
  body.add(head);
  for (let i = 0; i < items.length; i++) {
    if (i > 0) body.add(COMMA);
    body.add(items[i]!.item);
    const more = body.writeIfFull();
    if (more !== true && !(await more)) return;
  }
  body.add(tail);
  body.end();
}

/**
 * A list in protobuf: the envelope, the list's ListMeta (field 1), and each item's message as
 * field 2. Every item's message is found before the first byte: the envelope holds the length.
 */
async function writeProtobufList(
  r: CachedResource,
  form: 'object' | 'v1' | 'v1beta1',
  meta: { resourceVersion: string; continue: string | undefined; remainingItemCount: number | undefined },
  items: readonly CachedObject[],
  res: DownstreamResponse,
  responseHeaders: Record<string, string>,
): Promise<ServeResult> {
  const parts: Buffer[] = [listMetaField(meta)];
  let length = parts[0]!.length;
  for (const o of items) {
    const m = form === 'object' ? objectMessage(r.info, o) : metadataMessage(r.info, o);
    if (!m) return { forward: 'representation' };
    const head = fieldHead(2, m.length);
    parts.push(head, m);
    length += head.length + m.length;
  }
  const [head, tail] =
    form === 'object' ? protobufEnvelope(apiVersionOf(r.info), `${r.info.kind}List`, length) : protobufEnvelope(`meta.k8s.io/${form}`, 'PartialObjectMetadataList', length);
  const total = head.length + length + tail.length;
  res.writeHead(200, { ...responseHeaders, 'content-length': String(total) });
  parts.unshift(head);
  parts.push(tail);
  await writeBuffers(res, parts);
  return { code: 200, bytes: total };
}

/** Writes the buffers in chunks of about WRITE_CHUNK, waiting for the client when it is slow. */
async function writeBuffers(res: DownstreamResponse, buffers: readonly Buffer[]): Promise<void> {
  const body = new ChunkedBody(res);
  for (const b of buffers) {
    body.add(b);
    const more = body.writeIfFull();
    if (more !== true && !(await more)) return;
  }
  body.end();
}
