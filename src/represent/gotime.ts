// Times as the apiserver reads and writes them: metav1.Time and metav1.MicroTime in RFC 3339,
// parsed as Go's time.Parse(time.RFC3339, …) does and written back in UTC at whole seconds.

// Go's RFC3339 layout takes an upper-case T, optional fractional seconds, and Z or ±hh:mm.
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|([+-])(\d{2}):(\d{2}))$/;

/**
 * Milliseconds since the epoch (fractions kept, for MicroTime), or undefined when Go would not
 * parse it: then the apiserver's value is the zero time.
 */
export function parseTime(s: string): number | undefined {
  const m = RFC3339.exec(s);
  if (!m) return undefined;
  const [year, month, day, hour, minute, second] = [m[1], m[2], m[3], m[4], m[5], m[6]].map(Number) as [number, number, number, number, number, number];
  if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month) || hour > 23 || minute > 59 || second > 59) return undefined;
  let ms = Date.UTC(year, month - 1, day, hour, minute, second);
  // Date.UTC maps years 0..99 to 1900..1999.
  if (year < 100) ms = new Date(ms).setUTCFullYear(year);
  if (m[7] !== undefined) ms += Number(`0${m[7]}`) * 1000;
  if (m[9] !== undefined) {
    const offset = (Number(m[10]) * 60 + Number(m[11])) * 60_000;
    if (Number(m[10]) > 23 || Number(m[11]) > 59) return undefined;
    ms += m[9] === '+' ? -offset : offset;
  }
  return ms;
}

function daysIn(year: number, month: number): number {
  return [31, isLeap(year) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]!;
}

function isLeap(y: number): boolean {
  return (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
}

/** The zero time.Time (0001-01-01T00:00:00Z), which metav1.Time writes as null and prints as <unknown>. */
export const ZERO_TIME = -62_135_596_800_000;

/** metav1.Time's JSON: UTC, whole seconds (time.RFC3339). */
export function formatTime(ms: number): string {
  const d = new Date(Math.floor(ms / 1000) * 1000);
  const pad = (n: number, w = 2): string => String(n).padStart(w, '0');
  return `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}T${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}Z`;
}
