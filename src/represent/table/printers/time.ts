// Reading a printer's timestamps from v1 JSON: metav1.Time and MicroTime, unset as the zero time.
import { parseTime } from '../../gotime.ts';

/** The time a field holds, in milliseconds; undefined when unset (Go's zero time). */
export function timeOf(s: string | null | undefined): number | undefined {
  return typeof s === 'string' ? parseTime(s) : undefined;
}
