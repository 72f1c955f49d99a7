// What writes a resource's rows: a ported printer and its columns for a built-in kind, or a
// custom resource's printer columns. Each stored object is printed once, on the first Table that
// shows it, and its row kept as long as it is the object stored (time cells stay moments).
import type { ResourceInfo } from '../../api/resource.ts';
import type { CachedObject } from '../../store/object.ts';
import { builtinColumns, encodeColumns, metadataDescription } from './columns.ts';
import { customColumns } from './customresource.ts';
import { kindKey, printerOf } from './printers/index.ts';
import type { PrintedRow } from './row.ts';
import { parseUnstructured } from './unstructured.ts';

export interface Tabulator {
  /** `columnDefinitions` as the apiserver writes them. */
  readonly columns: string;
  /** A stored object's row; undefined when its JSON cannot be printed. */
  print(o: CachedObject): PrintedRow | undefined;
  /** The row of an object's JSON Levee holds outside the store (a bookmark's object). */
  printJson(json: Buffer): PrintedRow | undefined;
}

const tabulators = new WeakMap<ResourceInfo, Tabulator | null>();

/** The resource's tabulator, or undefined when the cache does not write its Tables. */
export function tabulatorOf(info: ResourceInfo): Tabulator | undefined {
  let t = tabulators.get(info);
  if (t === undefined) {
    t = make(info) ?? null;
    tabulators.set(info, t);
  }
  return t ?? undefined;
}

// serveDefaultColumnsIfEmpty: a CRD version without printer columns shows Age.
const AGE = { name: 'Age', type: 'date', format: '', description: '', priority: 0, jsonPath: '.metadata.creationTimestamp' };

function make(info: ResourceInfo): Tabulator | undefined {
  let columns: string;
  let printJson: (json: Buffer) => PrintedRow;
  if (info.listKind !== undefined) {
    const custom = customColumns(info.printerColumns?.length ? info.printerColumns : [{ ...AGE, description: metadataDescription('creationTimestamp') }]);
    if (!custom) return undefined;
    columns = encodeColumns(custom.definitions);
    printJson = (json) => custom.print(parseUnstructured(json));
  } else {
    const key = kindKey(info.group, info.kind);
    const printer = printerOf(info.group, info.kind);
    const definitions = builtinColumns(key);
    if (!printer || !definitions) return undefined;
    columns = encodeColumns(definitions);
    printJson = (json) => printer(JSON.parse(json.toString('utf8')));
  }
  const rows = new WeakMap<CachedObject, PrintedRow | null>();
  const attempt = (json: Buffer): PrintedRow | undefined => {
    try {
      return printJson(json);
    } catch {
      return undefined;
    }
  };
  // A watch's bookmarks are rows of the kind's empty object: a kind that cannot print one has no
  // Table from the cache at all, rather than a watch that could not write its bookmark.
  const empty = info.listKind !== undefined ? `{"apiVersion":"${info.group}/${info.version}","kind":"${info.kind}","metadata":{"resourceVersion":"1"}}` : '{"metadata":{"resourceVersion":"1"}}';
  if (!attempt(Buffer.from(empty))) return undefined;
  return {
    columns,
    print(o) {
      let row = rows.get(o);
      if (row === undefined) {
        row = attempt(o.item) ?? null;
        rows.set(o, row);
      }
      return row ?? undefined;
    },
    printJson: attempt,
  };
}
