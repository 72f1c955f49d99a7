// The request deadline a client may ask for with `?timeout=` (k8s.io/apiserver/pkg/endpoints/
// filters/request_deadline.go). The apiserver reads it right after the request info, before it
// authenticates anyone, for every request that is not long-running: one it cannot read is a 400,
// whoever sent it. The value is read as Go reads it: url.Values.Get (the first value among the
// pairs url.ParseQuery keeps) and time.ParseDuration, on bytes, with Go's own error messages.
import { goQueryFirst } from './query.ts';
import { newBadRequest } from './status.ts';
import type { Status } from './types.ts';

/**
 * How long past a deadline Levee gives its answer: the apiserver writes its own (a 504, a watch's
 * end) at the deadline, and when the request was forwarded that answer should arrive first.
 */
const DEADLINE_GRACE_MS = 1_000;

/**
 * Milliseconds until `timeoutMs` after `arrivedAt` (process.hrtime.bigint()) and the grace, in
 * whole milliseconds as timers take them; 0 once passed.
 */
export function untilDeadline(timeoutMs: number, arrivedAt: bigint): number {
  return Math.max(0, Math.ceil(timeoutMs + DEADLINE_GRACE_MS - Number(process.hrtime.bigint() - arrivedAt) / 1e6));
}

const UNITS: ReadonlyMap<string, bigint> = new Map([
  ['ns', 1n],
  ['us', 1_000n],
  ['\u00b5s', 1_000n], // µ, the micro sign
  ['\u03bcs', 1_000n], // μ, the Greek letter mu
  ['ms', 1_000_000n],
  ['s', 1_000_000_000n],
  ['m', 60_000_000_000n],
  ['h', 3_600_000_000_000n],
]);
const MAX = 1n << 63n;

/** time.ParseDuration in nanoseconds, or Go's error message. */
export function parseGoDuration(bytes: Buffer): { ns: bigint } | { error: string } {
  const invalid = { error: `time: invalid duration ${timeQuote(bytes)}` };
  let s = bytes;
  let neg = false;
  if (s.length > 0 && (s[0] === 0x2d || s[0] === 0x2b)) {
    neg = s[0] === 0x2d;
    s = s.subarray(1);
  }
  if (s.length === 1 && s[0] === 0x30) return { ns: 0n };
  if (s.length === 0) return invalid;
  const digit = (c: number | undefined): boolean => c !== undefined && c >= 0x30 && c <= 0x39;
  let d = 0n;
  while (s.length > 0) {
    if (!(s[0] === 0x2e || digit(s[0]))) return invalid;
    // leadingInt: [0-9]*, an error past 1<<63.
    let i = 0;
    let v = 0n;
    for (; i < s.length && digit(s[i]); i++) {
      if (v > MAX / 10n) return invalid;
      v = v * 10n + BigInt(s[i]! - 0x30);
      if (v > MAX) return invalid;
    }
    const pre = i > 0;
    s = s.subarray(i);
    // leadingFraction: (\.[0-9]*)?, which stops gaining precision rather than overflow.
    let f = 0n;
    let scale = 1;
    let post = false;
    if (s.length > 0 && s[0] === 0x2e) {
      s = s.subarray(1);
      let j = 0;
      let overflow = false;
      for (; j < s.length && digit(s[j]); j++) {
        if (overflow) continue;
        if (f > (MAX - 1n) / 10n) {
          overflow = true;
          continue;
        }
        const y = f * 10n + BigInt(s[j]! - 0x30);
        if (y > MAX) {
          overflow = true;
          continue;
        }
        f = y;
        scale *= 10;
      }
      post = j > 0;
      s = s.subarray(j);
    }
    if (!pre && !post) return invalid;
    let u = 0;
    while (u < s.length && !(s[u] === 0x2e || digit(s[u]))) u++;
    if (u === 0) return { error: `time: missing unit in duration ${timeQuote(bytes)}` };
    const unitBytes = s.subarray(0, u);
    s = s.subarray(u);
    const unit = UNITS.get(unitBytes.toString('utf8'));
    if (unit === undefined || !Buffer.from(unitBytes.toString('utf8'), 'utf8').equals(unitBytes)) {
      return { error: `time: unknown unit ${timeQuote(unitBytes)} in duration ${timeQuote(bytes)}` };
    }
    if (v > MAX / unit) return invalid;
    v *= unit;
    if (f > 0n) {
      // float64, as Go computes the fraction: nanosecond-exact for fractions of an hour.
      v += BigInt(Math.floor(Number(f) * (Number(unit) / scale)));
      if (v > MAX) return invalid;
    }
    d += v;
    if (d > MAX) return invalid;
  }
  if (neg) return { ns: -d };
  if (d > MAX - 1n) return invalid;
  return { ns: d };
}

/** The time package's quote: printable ASCII as it is, '"' and '\' escaped, every other byte as \xNN. */
function timeQuote(bytes: Buffer): string {
  let out = '"';
  const text = bytes.toString('latin1');
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i]!;
    if (c >= 0x80 || c < 0x20) out += `\\x${c.toString(16).padStart(2, '0')}`;
    else out += c === 0x22 || c === 0x5c ? `\\${text[i]}` : text[i];
  }
  return `${out}"`;
}

/**
 * The request deadline the client asked for, in milliseconds (undefined: none, or 0 or less, which
 * leave the apiserver's own), or the apiserver's 400 for one it cannot read.
 */
export function requestedTimeout(rawQuery: string): number | undefined | Status {
  const value = goQueryFirst(rawQuery, 'timeout');
  if (value === undefined || value.length === 0) return undefined;
  const parsed = parseGoDuration(value);
  if ('error' in parsed) return newBadRequest(`invalid timeout specified in the request URL - ${parsed.error}`);
  return parsed.ns > 0n ? Number(parsed.ns) / 1e6 : undefined;
}
