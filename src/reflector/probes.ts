// When bookmark probes begin (docs/design.md, "Consistent reads"). A probe is a watch resumed from
// the store's resourceVersion with a 3 s deadline; the apiserver bookmarks it 2 s before that
// deadline, but only at its bookmark tick (about every second), and only once the one-second time
// bucket holding that moment has begun (watcherBookmarkTimeBuckets in the apiserver's cacher). So
// a probe begun at s gets its bookmark at the first tick after a bucket boundary in (s, s + 1 s]:
// 0–2.25 s later, about 1 s on average, and no probe begun later can get one sooner. A probe begun
// a second or more earlier is already past its boundary: its bookmark comes at the very next tick.
// So while consistent reads keep coming, a probe begins every second, and a reader waits for the
// next tick, not for a probe of its own to reach its boundary first.
//
// A speculative probe (no reader waiting) begins only for a resource whose store has not moved by
// its own events within the last second: a busy resource's store reaches a reader's revision
// through its next event, and a probe would only repeat its events on another stream.

/** Seconds between probe starts: the apiserver's bookmark buckets are a second wide. */
export const PROBE_SPACING_MS = 1000;

/** How long after the last reader probes keep beginning, so that the next reader finds one ripe. */
export const PROBE_LINGER_MS = 30_000;

export interface ProbeOptions {
  /** One probe: settles once its bookmark reached the store, or it ended without one, or failed. */
  open(): Promise<void>;
  /** Whether a probe can begin now (not while the store relists, not after stop). */
  canProbe(): boolean;
  /** Whether the store moved by its own events within the last spacing. */
  busy(): boolean;
  spacingMs?: number;
  lingerMs?: number;
  /** The clock, in milliseconds (performance.now() by default). */
  now?: () => number;
}

export class BookmarkProbes {
  readonly #o: ProbeOptions;
  readonly #spacingMs: number;
  readonly #lingerMs: number;
  readonly #now: () => number;
  /** Callers waiting for the next probe to settle. */
  #waiters: (() => void)[] = [];
  /** When the last probe began, and when a reader last asked. */
  #lastStart = -Infinity;
  #lastDemand = -Infinity;
  /** A skipped cadence looks again no sooner than this. */
  #nextCheck = -Infinity;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(o: ProbeOptions) {
    this.#o = o;
    this.#spacingMs = o.spacingMs ?? PROBE_SPACING_MS;
    this.#lingerMs = o.lingerMs ?? PROBE_LINGER_MS;
    this.#now = o.now ?? (() => performance.now());
  }

  /**
   * Resolves when the next probe settles (its bookmark reached the store, or it ended without
   * one): the caller then checks whether the store is where it needs it. Begins a probe now unless
   * one began within the spacing, and keeps probes beginning while readers keep asking.
   */
  soon(): Promise<void> {
    if (this.#stopped || !this.#o.canProbe()) return Promise.resolve();
    this.#lastDemand = this.#now();
    const settled = new Promise<void>((resolve) => this.#waiters.push(resolve));
    if (this.#now() - this.#lastStart >= this.#spacingMs) this.#begin();
    this.#schedule();
    return settled;
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#settle();
  }

  #begin(): void {
    this.#lastStart = this.#now();
    this.#o.open().then(
      () => this.#settle(),
      () => this.#settle(),
    );
  }

  #settle(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w();
  }

  /** The cadence: a probe every spacing while readers asked within the linger. */
  #schedule(): void {
    if (this.#timer || this.#stopped) return;
    const at = Math.max(this.#lastStart + this.#spacingMs, this.#nextCheck);
    this.#timer = setTimeout(() => this.#tick(), Math.max(0, at - this.#now()));
    // Probes serve readers; they never keep the process alive.
    this.#timer.unref();
  }

  #tick(): void {
    this.#timer = undefined;
    const now = this.#now();
    if (this.#stopped || now - this.#lastDemand > this.#lingerMs) return;
    if (now - this.#lastStart >= this.#spacingMs) {
      if (this.#o.canProbe() && (this.#waiters.length > 0 || !this.#o.busy())) this.#begin();
      // Skipped (a busy or relisting store): look again a spacing later. A reader that comes
      // meanwhile still begins one at once.
      else this.#nextCheck = now + this.#spacingMs;
    }
    this.#schedule();
  }
}
