// Answers a GET or LIST from the cache, as the apiserver's watch cache would: bodies assembled from
// each object's stored bytes (never re-serialized) and written with backpressure.
import { newNotFound } from '../api/status.ts';
import type { CachedResource } from '../cache/cache.ts';
import { listLive, scan, type ListQuery, type ListResult } from '../store/query.ts';
import { objectKey, typeMetaPrefix, type CachedObject } from '../store/object.ts';
import type { Snapshot } from '../store/store.ts';
import { encodeContinue } from './continuetoken.ts';
import type { ReadPlan } from './decide.ts';
import { drained, type DownstreamResponse } from './downstream.ts';
import { writeStatus } from './respond.ts';

/** How long a read for resourceVersion N waits for the cache to reach N (the apiserver waits 3 s). */
export const FRESHNESS_WAIT_MS = 3_000;

/** 'forward' when the cache cannot answer exactly (an Exact read or continue token outside the window, or a resourceVersion it has not reached in time). */
export type ServeResult = { code: number } | 'forward';

// Writes are gathered into chunks of about this size: one write per item would cost a syscall and
// a frame per object, one write per list would hold the whole list.
const WRITE_CHUNK = 64 * 1024;

function apiVersion(r: CachedResource): string {
  return r.info.group === '' ? r.info.version : `${r.info.group}/${r.info.version}`;
}

function headers(requestId: string | undefined): Record<string, string> {
  const h: Record<string, string> = { 'content-type': 'application/json', 'cache-control': 'no-cache, private' };
  if (requestId) h['audit-id'] = requestId;
  return h;
}

/**
 * How long a read without resourceVersion waits for the cache to catch up with the apiserver
 * before it is forwarded instead. Short: forwarding is always correct, waiting only saves work.
 */
export const CONSISTENT_WAIT_MS = 150;

export interface ConsistentReadObserver {
  consistentRead(resource: string, result: 'verified' | 'cache-policy' | 'forwarded', waitSeconds: number): void;
}

export async function serveRead(
  r: CachedResource,
  plan: ReadPlan,
  res: DownstreamResponse,
  arrivedAt: bigint,
  observer: ConsistentReadObserver,
  requestId?: string,
): Promise<ServeResult> {
  const store = r.store;
  const extra: Record<string, string> = {};
  if (plan.freshness.mode === 'consistent') {
    const started = process.hrtime.bigint();
    const waited = () => Number(process.hrtime.bigint() - started) / 1e9;
    let rv: number;
    try {
      rv = await r.probe.current(arrivedAt);
    } catch {
      observer.consistentRead(r.name, 'forwarded', waited());
      return 'forward';
    }
    if (store.resourceVersion < rv && !(await store.waitUntilFresh(rv, CONSISTENT_WAIT_MS))) {
      observer.consistentRead(r.name, 'forwarded', waited());
      return 'forward';
    }
    observer.consistentRead(r.name, 'verified', waited());
    extra[CONSISTENCY_HEADER] = 'verified';
  } else if (plan.freshness.mode !== 'any' && store.resourceVersion < plan.freshness.resourceVersion) {
    // Upstream may already be there; it answers (or gives its own 504) rather than Levee guessing.
    if (!(await store.waitUntilFresh(plan.freshness.resourceVersion, FRESHNESS_WAIT_MS))) return 'forward';
  } else if (plan.consistentRead) {
    // The `cache` policy: a read without resourceVersion answered from the cache as it is.
    observer.consistentRead(r.name, 'cache-policy', 0);
    extra[CONSISTENCY_HEADER] = 'cache';
  }
  if (plan.verb === 'get') return serveGet(r, plan, res, { ...headers(requestId), ...extra });

  let snapshot: Snapshot | undefined;
  let result: ListResult;
  let listRV: number;
  const query: ListQuery = { namespace: plan.namespace, labels: plan.labels, fields: plan.fields, limit: plan.limit };
  if (plan.freshness.mode === 'exact') {
    snapshot = store.snapshotAt(plan.freshness.resourceVersion);
    if (!snapshot) return 'forward';
    if (plan.continueToken) {
      // The token's start is relative to the list's prefix: the namespace when listing one.
      query.startKey = plan.namespace === '' ? plan.continueToken.start : `/${plan.namespace}${plan.continueToken.start}`;
    }
    result = scan(snapshot.tree, query);
    listRV = plan.freshness.resourceVersion;
  } else {
    // A paged answer must be continuable from exactly this state.
    if (plan.limit > 0) snapshot = store.current();
    listRV = store.resourceVersion;
    result = listLive(store, query);
  }

  let cont: string | undefined;
  if (result.lastKey !== undefined) {
    const relative = plan.namespace === '' ? result.lastKey : result.lastKey.slice(plan.namespace.length + 1);
    cont = encodeContinue(snapshot?.resourceVersion ?? listRV, relative);
  }
  const [headBytes, tailBytes] = envelope(r, String(listRV), cont, result.remaining);
  // The length is known before the first byte: a Content-Length spares HTTP/1.1 chunk framing.
  let length = headBytes.length + tailBytes.length + Math.max(0, result.items.length - 1);
  for (const o of result.items) length += o.item.length;
  res.writeHead(200, { ...headers(requestId), ...extra, 'content-length': String(length) });
  await writeItems(res, headBytes, result.items, tailBytes);
  return { code: 200 };
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
      Buffer.from(`{"apiVersion":${JSON.stringify(apiVersion(r))},"items":[`),
      Buffer.from(`],"kind":${JSON.stringify(r.info.listKind)},"metadata":{${meta.join(',')}}}\n`),
    ];
  }
  const meta: string[] = [`"resourceVersion":${JSON.stringify(resourceVersion)}`];
  if (cont !== undefined) {
    meta.push(`"continue":${JSON.stringify(cont)}`);
    if (remaining !== undefined) meta.push(`"remainingItemCount":${remaining}`);
  }
  return [Buffer.from(`{"kind":${JSON.stringify(`${r.info.kind}List`)},"apiVersion":${JSON.stringify(apiVersion(r))},"metadata":{${meta.join(',')}},"items":[`), TAIL];
}

function serveGet(r: CachedResource, plan: ReadPlan, res: DownstreamResponse, responseHeaders: Record<string, string>): ServeResult {
  const o = r.store.get(objectKey(plan.namespace, plan.name));
  // Absent from a partial cache says nothing about the apiserver: it answers.
  if (!o && plan.partial) return 'forward';
  if (!o) {
    writeStatus(res, newNotFound({ group: r.info.group, resource: r.info.resource }, plan.name));
    return { code: 404 };
  }
  res.writeHead(200, responseHeaders);
  res.end(Buffer.concat([...objectBytes(r, o), NEWLINE]));
  return { code: 200 };
}

/**
 * Says how a read without resourceVersion was answered from the cache: `verified` (the cache was
 * proven at least as new as the apiserver) or `cache` (the configured cache policy, possibly stale).
 */
export const CONSISTENCY_HEADER = 'levee-consistent-read';

const NEWLINE = Buffer.from('\n');
const COMMA = Buffer.from(',');
const TAIL = Buffer.from(']}\n');

const prefixes = new WeakMap<CachedResource, Buffer>();

/** The object as a GET or watch answer carries it: with kind and apiVersion for typed objects. */
export function objectBytes(r: CachedResource, o: CachedObject): Buffer[] {
  if (!o.typed) return [o.item];
  let prefix = prefixes.get(r);
  if (!prefix) {
    prefix = typeMetaPrefix({ kind: r.info.kind, apiVersion: apiVersion(r) });
    prefixes.set(r, prefix);
  }
  return [prefix, o.item.subarray(1)];
}

async function writeItems(res: DownstreamResponse, head: Buffer, items: readonly CachedObject[], tail: Buffer): Promise<void> {
  let parts: Buffer[] = [head];
  let size = parts[0]!.length;
  for (let i = 0; i < items.length; i++) {
    if (i > 0) {
      parts.push(COMMA);
      size += 1;
    }
    const item = items[i]!.item;
    parts.push(item);
    size += item.length;
    if (size >= WRITE_CHUNK) {
      if (!res.write(Buffer.concat(parts, size)) && !(await drained(res))) return;
      parts = [];
      size = 0;
    }
  }
  parts.push(tail);
  res.end(Buffer.concat(parts));
}
