// GET and LIST answers in a conversion the apiserver offers besides the object itself: kubectl's
// Table and PartialObjectMetadata(List) in JSON (docs/design.md, "Representations"). Every object
// is checked to be writable before the first byte, so a failure is still a forward; a Table's rows
// are then made one by one as the client takes them, never the whole answer at once.
import type { Representation } from '../api/negotiation.ts';
import type { CachedResource } from '../cache/cache.ts';
import type { DownstreamResponse } from '../http/downstream.ts';
import { ChunkedBody } from '../http/chunkedbody.ts';
import { metadataListEnvelope, metadataOf, partialObjectMetadata } from '../represent/metadata.ts';
import { encodeListMeta, printedRow, rowBytes, tableEnvelope, type TableForm } from '../represent/table/encode.ts';
import type { CachedObject } from '../store/object.ts';

type TableRep = Extract<Representation, { as: 'Table' }>;

export interface ListState {
  resourceVersion: string;
  continue: string | undefined;
  remainingItemCount: number | undefined;
}

const COMMA = Buffer.from(',');
const NEWLINE = Buffer.from('\n');

export function tableForm(rep: TableRep): TableForm {
  return { version: rep.version, includeObject: rep.includeObject ?? 'Metadata' };
}

/** Whether every object can be printed: checked before anything is written. */
function printable(r: CachedResource, items: readonly CachedObject[]): boolean {
  for (const o of items) if (!printedRow(r.info, o)) return false;
  return true;
}

/** A LIST as a Table: the bytes written, or undefined when an object cannot be printed (nothing written then). */
export async function writeTableList(
  r: CachedResource,
  rep: TableRep,
  list: ListState,
  items: readonly CachedObject[],
  res: DownstreamResponse,
  headers: Record<string, string>,
): Promise<number | undefined> {
  if (!printable(r, items)) return undefined;
  const form = tableForm(rep);
  // Every row's times are as of one moment, the answer's.
  const now = Date.now();
  const [head, tail] = tableEnvelope(r.info, rep.version, encodeListMeta(list.resourceVersion, list.continue, list.remainingItemCount), true);
  res.writeHead(200, headers);
  const body = new ChunkedBody(res);
  body.add(head);
  for (let i = 0; i < items.length; i++) {
    if (i > 0) body.add(COMMA);
    body.add(rowBytes(r.info, items[i]!, form, now)!);
    const more = body.writeIfFull();
    if (more !== true && !(await more)) return body.written;
  }
  body.add(tail);
  body.add(NEWLINE);
  return body.end();
}

/** A GET as a Table of one row: its bytes, or undefined when the object cannot be printed. */
export function tableOfObject(r: CachedResource, rep: TableRep, o: CachedObject): Buffer | undefined {
  const row = rowBytes(r.info, o, tableForm(rep), Date.now());
  if (!row) return undefined;
  // A single object's Table carries the object's resourceVersion (meta.CommonAccessor).
  const [head, tail] = tableEnvelope(r.info, rep.version, encodeListMeta(String(o.resourceVersion), undefined, undefined), true);
  return Buffer.concat([head, row, tail, NEWLINE]);
}

/** A LIST as a PartialObjectMetadataList, its length known before the first byte: the bytes, or undefined when an object's metadata cannot be found. */
export async function writeMetadataList(
  r: CachedResource,
  rep: { version: 'v1' | 'v1beta1' },
  list: ListState,
  items: readonly CachedObject[],
  res: DownstreamResponse,
  headers: Record<string, string>,
): Promise<number | undefined> {
  const metas: Buffer[] = [];
  try {
    for (const o of items) metas.push(metadataOf(r.info, o));
  } catch {
    return undefined;
  }
  const [head, tail] = metadataListEnvelope(rep.version, list.resourceVersion, list.continue, list.remainingItemCount, items.length === 0);
  const item0 = partialObjectMetadata(rep.version, Buffer.alloc(0));
  const perItem = item0[0]!.length + item0[2]!.length;
  let length = head.length + tail.length + Math.max(0, items.length - 1);
  for (const m of metas) length += perItem + m.length;
  res.writeHead(200, { ...headers, 'content-length': String(length) });
  const body = new ChunkedBody(res);
  body.add(head);
  for (let i = 0; i < metas.length; i++) {
    if (i > 0) body.add(COMMA);
    for (const p of partialObjectMetadata(rep.version, metas[i]!)) body.add(p);
    const more = body.writeIfFull();
    if (more !== true && !(await more)) return length;
  }
  body.add(tail);
  body.end();
  return length;
}

/** A GET as PartialObjectMetadata: its bytes, or undefined when its metadata cannot be found. */
export function metadataOfObject(r: CachedResource, rep: { version: 'v1' | 'v1beta1' }, o: CachedObject): Buffer | undefined {
  try {
    return Buffer.concat([...partialObjectMetadata(rep.version, metadataOf(r.info, o)), NEWLINE]);
  } catch {
    return undefined;
  }
}
