// Elapsed times as kubectl's columns show them: apimachinery's duration.HumanDuration (Age,
// Restarts, Duration, Last Seen), with Go's integer arithmetic on nanoseconds.

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

// Go converts with int(): towards zero.
const div = (ms: number, unit: number): number => Math.trunc(ms / unit);

/** duration.HumanDuration: about 2 or 3 significant figures, from milliseconds. */
export function humanDuration(ms: number): string {
  const seconds = div(ms, SECOND);
  // Machines' clocks differ: up to 2 s (excluded) in the future is "now".
  if (seconds < -1) return '<invalid>';
  if (seconds < 0) return '0s';
  if (seconds < 60 * 2) return `${seconds}s`;
  const minutes = div(ms, MINUTE);
  if (minutes < 10) {
    const s = seconds % 60;
    return s === 0 ? `${minutes}m` : `${minutes}m${s}s`;
  }
  if (minutes < 60 * 3) return `${minutes}m`;
  const hours = div(ms, HOUR);
  if (hours < 8) {
    const m = minutes % 60;
    return m === 0 ? `${hours}h` : `${hours}h${m}m`;
  }
  if (hours < 48) return `${hours}h`;
  if (hours < 24 * 8) {
    const h = hours % 24;
    return h === 0 ? `${div(hours, 24)}d` : `${div(hours, 24)}d${h}h`;
  }
  if (hours < 24 * 365 * 2) return `${div(hours, 24)}d`;
  if (hours < 24 * 365 * 8) {
    const dy = div(hours, 24) % 365;
    return dy === 0 ? `${div(hours, 24 * 365)}y` : `${div(hours, 24 * 365)}y${dy}d`;
  }
  return `${div(hours, 24 * 365)}y`;
}

// time.Duration is an int64 of nanoseconds: time.Since saturates at about 292 years.
const MAX_DURATION_MS = 9_223_372_036_854.775;

/** time.Since(t) in milliseconds, saturated as Go's time.Time.Sub saturates. */
export function since(now: number, at: number): number {
  return Math.max(-MAX_DURATION_MS, Math.min(MAX_DURATION_MS, now - at));
}
