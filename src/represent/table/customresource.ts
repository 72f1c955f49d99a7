// A custom resource's Table (k8s.io/apiextensions-apiserver/pkg/registry/customresource/
// tableconvertor): Name, then each of its CRD's additionalPrinterColumns (Age when it has none),
// each cell its JSONPath's first result, read as the column's type says.
import type { PrinterColumn } from '../../api/resource.ts';
import { ZERO_TIME, parseTime } from '../gotime.ts';
import { metadataDescription, type ColumnDefinition } from './columns.ts';
import { findResults, printResult } from './jsonpath/evaluate.ts';
import { JsonPathSyntaxError, parse, type ListNode, type Node } from './jsonpath/parser.ts';
import { ageOf, type Cell, type PrintedRow } from './row.ts';

export interface CustomColumns {
  definitions: ColumnDefinition[];
  print(object: unknown): PrintedRow;
}

const usesRange = (n: Node): boolean =>
  n.type === 'identifier' ||
  (n.type === 'list' && n.nodes.some(usesRange)) ||
  (n.type === 'union' && n.nodes.some(usesRange)) ||
  (n.type === 'filter' && (usesRange(n.left) || usesRange(n.right)));

/**
 * The convertor for these columns; undefined when one uses {range}/{end}, whose evaluation the
 * apiserver shares between rows (the cache leaves such a Table to it). A column whose JSONPath
 * does not parse ends the columns there, as tableconvertor.New returns what it built before it.
 */
export function customColumns(columns: readonly PrinterColumn[]): CustomColumns | undefined {
  const definitions: ColumnDefinition[] = [{ name: 'Name', type: 'string', format: 'name', description: metadataDescription('name'), priority: 0 }];
  const paths: Array<{ path: ListNode; type: string }> = [];
  for (const c of columns) {
    let path: ListNode;
    try {
      path = parse(`{${c.jsonPath}}`);
    } catch (e) {
      if (e instanceof JsonPathSyntaxError) break;
      throw e;
    }
    if (usesRange(path)) return undefined;
    paths.push({ path, type: c.type });
    definitions.push({
      name: c.name,
      type: c.type,
      format: c.format,
      description: c.description || `Custom resource definition column (in JSONPath format): ${c.jsonPath}`,
      priority: c.priority,
    });
  }
  return {
    definitions,
    print(object: unknown): PrintedRow {
      const meta = (object as { metadata?: { name?: unknown } } | null)?.metadata;
      const cells: Cell[] = [typeof meta?.name === 'string' ? meta.name : ''];
      for (const { path, type } of paths) {
        let results: unknown[][];
        try {
          results = findResults(path, object);
        } catch {
          cells.push(null);
          continue;
        }
        if (results.length === 0 || results[0]!.length === 0) {
          cells.push(null);
          continue;
        }
        const value = results[0]![0];
        cells.push(type === 'string' ? printResult(value) : cellForJsonValue(type, value));
      }
      return { cells };
    },
  };
}

const INT64_MIN = -(2n ** 63n);

/** cellForJSONValue: the value as the column's type, or null when it is not one. */
export function cellForJsonValue(type: string, value: unknown): Cell {
  if (value === null || value === undefined) return null;
  switch (type) {
    case 'integer':
      if (typeof value === 'bigint') return value;
      // Go's float64 to int64 conversion: towards zero; out of range, the CPU's answer (amd64).
      if (typeof value === 'number') return Number.isFinite(value) && Math.abs(value) < 2 ** 63 ? BigInt(Math.trunc(value)) : INT64_MIN;
      return null;
    case 'number':
      if (typeof value === 'bigint') return Number(value);
      return typeof value === 'number' ? value : null;
    case 'boolean':
      return typeof value === 'boolean' ? value : null;
    case 'string':
      return typeof value === 'string' ? value : null;
    case 'date': {
      if (typeof value !== 'string') return null;
      // metav1.Time.UnmarshalQueryParameter: empty or "null" is the zero time.
      if (value === '' || value === 'null') return ageOf(undefined);
      const at = parseTime(value);
      if (at === undefined) return '<invalid>';
      return ageOf(at === ZERO_TIME ? undefined : at);
    }
    default:
      return null;
  }
}
