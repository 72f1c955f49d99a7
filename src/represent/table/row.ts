// One Table row as a printer makes it from an object (metav1.TableRow): its cells and conditions.
// A printed row is kept with the stored object and written again for every answer; the cells that
// count time since a moment (Age, Restarts' "(5m ago)", a running Job's Duration) are kept as that
// moment and written at answer time, as the apiserver computes them when it answers.
import { goFloat, goMarshal, goString } from '../gojson.ts';
import { humanDuration, since } from './duration.ts';

/** A cell the moment of answering decides: `before` + HumanDuration(now − at) + `after`. */
export interface Since {
  readonly at: number;
  readonly before?: string;
  readonly after?: string;
}

/**
 * A cell's value: a string, a number (an int64 or a float64: encoding/json writes both alike in
 * the range printers use), a bigint (an int64 beyond 2^53), a boolean, null (a custom resource's
 * missing value), a value to marshal as Go would (an object or array), or a Since.
 */
export type Cell = string | number | bigint | boolean | null | Since | { readonly json: unknown };

/** metav1.TableRowCondition. */
export interface RowCondition {
  readonly type: string;
  readonly status: string;
  readonly reason?: string;
  readonly message?: string;
}

export interface PrintedRow {
  readonly cells: readonly Cell[];
  readonly conditions?: readonly RowCondition[] | undefined;
}

/** The zero time.Time, which printers show as <unknown>. */
export const UNKNOWN = '<unknown>';

/** translateTimestampSince: <unknown> for an unset time, else the time since it at answer time. */
export function ageOf(at: number | undefined): Cell {
  return at === undefined ? UNKNOWN : { at };
}

function encodeCell(c: Cell, now: number): string {
  if (c === null) return 'null';
  switch (typeof c) {
    case 'string':
      return goString(c);
    case 'number':
      return goFloat(c);
    case 'bigint':
      return c.toString();
    case 'boolean':
      return c ? 'true' : 'false';
    default:
  }
  if ('json' in c) return goMarshal(c.json);
  return goString(`${c.before ?? ''}${humanDuration(since(now, c.at))}${c.after ?? ''}`);
}

/** `"cells":[…]` and, when there are any, `,"conditions":[…]`: a row's bytes before its object. */
export function encodeRow(row: PrintedRow, now: number): string {
  let s = `"cells":[${row.cells.map((c) => encodeCell(c, now)).join(',')}]`;
  if (row.conditions && row.conditions.length > 0) s += `,"conditions":[${row.conditions.map(encodeCondition).join(',')}]`;
  return s;
}

function encodeCondition(c: RowCondition): string {
  let s = `{"type":${goString(c.type)},"status":${goString(c.status)}`;
  if (c.reason) s += `,"reason":${goString(c.reason)}`;
  if (c.message) s += `,"message":${goString(c.message)}`;
  return `${s}}`;
}
