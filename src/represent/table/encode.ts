// kubectl's Table (meta.k8s.io/v1 and v1beta1) in JSON, as the apiserver writes it for GET, LIST
// and each WATCH event (k8s.io/apiserver/pkg/endpoints/handlers/response.go, asTable): the
// resource's columns, one row per object, and in each row the object itself, its
// PartialObjectMetadata (the default) or nothing, as includeObject asks (docs/design.md,
// "Representations").
import type { ResourceInfo } from '../../api/resource.ts';
import { objectBytes, type CachedObject } from '../../store/object.ts';
import { goString } from '../gojson.ts';
import { metadataOf, metadataOfJson, partialObjectMetadata, type MetaVersion } from '../metadata.ts';
import { encodeRow, type PrintedRow } from './row.ts';
import { tabulatorOf } from './tabulator.ts';
import { joinBytes } from '../../store/bytes.ts';

/** metav1.TableOptions' includeObject: what each row carries of its object. */
export type IncludeObject = 'None' | 'Metadata' | 'Object';

export interface TableForm {
  version: MetaVersion;
  includeObject: IncludeObject;
}

/** Whether the cache can write Tables of this resource: a printer or a custom resource's columns. */
export function writesTable(info: ResourceInfo): boolean {
  return tabulatorOf(info) !== undefined;
}

/** A list's metadata (metav1.ListMeta), as every list and Table writes it. */
export function encodeListMeta(resourceVersion: string, cont: string | undefined, remaining: number | undefined): string {
  let s = `"resourceVersion":${goString(resourceVersion)}`;
  if (cont !== undefined) {
    s += `,"continue":${goString(cont)}`;
    if (remaining !== undefined) s += `,"remainingItemCount":${remaining}`;
  }
  return `{${s}}`;
}

const NULL = Buffer.from('null');
const CLOSE = Buffer.from('}');
const OBJECT = ',"object":';

/** One row's bytes: `{"cells":[…],"object":…}`; undefined when the object cannot be printed. */
export function rowBytes(info: ResourceInfo, o: CachedObject, form: TableForm, now: number): Buffer | undefined {
  const printed = tabulatorOf(info)?.print(o);
  if (!printed) return undefined;
  let object: Buffer[];
  if (form.includeObject === 'None') object = [NULL];
  else if (form.includeObject === 'Metadata') object = partialObjectMetadata(form.version, metadataOf(info, o));
  else object = objectBytes(info, o);
  return joinBytes([Buffer.from(`{${encodeRow(printed, now)}${OBJECT}`), ...object, CLOSE]);
}

/**
 * A row of an object Levee holds as JSON of its own making: a bookmark's object (the kind with
 * only its resourceVersion, and the annotation that ends a watch-list's initial events) or a
 * DELETED written at another resourceVersion. `printed` is the stored object's row when the object
 * changed only its resourceVersion.
 */
export function rowOfJson(info: ResourceInfo, json: Buffer, typed: boolean, form: TableForm, now: number, printed?: PrintedRow): Buffer | undefined {
  const row = printed ?? tabulatorOf(info)?.printJson(json);
  if (!row) return undefined;
  let object: Buffer[];
  if (form.includeObject === 'None') object = [NULL];
  else if (form.includeObject === 'Metadata') object = partialObjectMetadata(form.version, metadataOfJson(info, json, typed));
  else object = [json];
  return joinBytes([Buffer.from(`{${encodeRow(row, now)}${OBJECT}`), ...object, CLOSE]);
}

/** The stored object's printed row (kept with it), for a row written from other bytes. */
export function printedRow(info: ResourceInfo, o: CachedObject): PrintedRow | undefined {
  return tabulatorOf(info)?.print(o);
}

/**
 * What a Table's rows go between: its kind, its list metadata, the columns (or null: a watch
 * writes them in its first event only), and `"rows":[` … `]}`.
 */
export function tableEnvelope(info: ResourceInfo, version: MetaVersion, listMeta: string, headers: boolean): [Buffer, Buffer] {
  const columns = headers ? tabulatorOf(info)!.columns : 'null';
  return [Buffer.from(`{"kind":"Table","apiVersion":"meta.k8s.io/${version}","metadata":${listMeta},"columnDefinitions":${columns},"rows":[`), TAIL];
}

const TAIL = Buffer.from(']}');
