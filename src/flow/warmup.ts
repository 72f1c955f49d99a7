// The Retry-After of a read turned away because its resource is still warming up (not synced) and
// the upstream bound is full, in the spirit of KEP-4568: the more clients were turned away from
// that resource lately, the longer each new one is asked to wait, so a mass restart spreads out
// instead of retrying in lockstep. "Lately" is a sliding window per resource, so the advice falls
// back to 1 s once the crowd has gone, and one resource's crowd does not lengthen another's wait.

const WINDOW_MS = 10_000;
/** Each this many rejections in the window add a second. */
const PER_SECOND = 100;
const MAX_SECONDS = 10;

interface Window {
  /** Start of the current half-window, and the counts of it and the one before. */
  since: number;
  current: number;
  previous: number;
}

export class WarmupBackoff {
  readonly #windows = new Map<string, Window>();
  readonly #now: () => number;

  constructor(now: () => number = () => performance.now()) {
    this.#now = now;
  }

  /** Records one more rejection of `resource` and says how long that client should wait. */
  retryAfter(resource: string): number {
    const now = this.#now();
    const half = WINDOW_MS / 2;
    let w = this.#windows.get(resource);
    if (!w) {
      w = { since: now, current: 0, previous: 0 };
      this.#windows.set(resource, w);
    }
    const elapsed = now - w.since;
    if (elapsed >= 2 * half) {
      w.previous = 0;
      w.current = 0;
      w.since = now;
    } else if (elapsed >= half) {
      w.previous = w.current;
      w.current = 0;
      w.since += half;
    }
    const recent = w.previous + w.current;
    w.current++;
    return Math.min(MAX_SECONDS, 1 + Math.floor(recent / PER_SECOND));
  }
}
