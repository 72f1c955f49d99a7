// One timer for the deadlines and bookmarks of every watcher. Tens of thousands of idle watches
// each holding their own timers (a deadline, a bookmark interval, the bookmark before the
// deadline) cost about a kilobyte apiece, and random deadlines give every watch timer lists of
// its own. The apiserver keeps its watchers' bookmark times in shared buckets for the same reason
// (cacher.go's watcherBookmarkTimeBuckets); here a min-heap keyed by each watcher's next wake-up
// keeps the times exact to the millisecond, as separate timers would.

// setTimeout takes at most 2^31-1 ms; a longer delay fires after 1 ms instead. A watch may ask for
// a deadline further away than that (timeoutSeconds has nine digits): the clock then wakes early,
// finds nothing due and waits again.
const TIMEOUT_MAX = 2 ** 31 - 1;

// At most this many sleepers are woken in one turn of the event loop; the rest wake in the next,
// after the loop has read its sockets. Watches opened together (a DaemonSet's agents after a
// restart, bench:watch's 10,000) all want their bookmark at the same few milliseconds a minute
// later, and woken in one turn their bookmarks held the loop for up to 133 ms, which every watch
// event arriving then waited out. A bookmark a few milliseconds late is nothing to a client: the
// apiserver sends them in one-second buckets.
const WAKES_PER_TURN = 128;

/** Something the clock wakes: it acts, then says when it wants to wake next (undefined: never). */
export interface Sleeper {
  /** When to wake, in whole milliseconds of the clock's now(); set by the sleeper, read by the clock. */
  wakeAt: number;
  /** Where it sits in the clock's heap, -1 when it is not scheduled; the clock's own field. */
  slot: number;
  /** `now` is the clock's time rounded up to the timer resolution: whatever is due by it is due. */
  wake(now: number): void;
}

export class WatchClock {
  readonly #heap: Sleeper[] = [];
  #timer: NodeJS.Timeout | undefined;
  #armedFor = Infinity;
  #ticking = false;
  readonly #now: () => number;
  readonly #unref: boolean;
  readonly #wakesPerTurn: number;

  /**
   * `unref`: the clock's timer does not keep the process alive by itself. `wakesPerTurn`: how many
   * sleepers one tick wakes at most.
   */
  constructor(now: () => number = () => Math.floor(performance.now()), opts: { unref?: boolean; wakesPerTurn?: number } = {}) {
    this.#now = now;
    this.#unref = opts.unref ?? false;
    this.#wakesPerTurn = opts.wakesPerTurn ?? WAKES_PER_TURN;
  }

  get size(): number {
    return this.#heap.length;
  }

  /** Whole milliseconds. */
  now(): number {
    return this.#now();
  }

  /** (Re)schedules `s` at its wakeAt. */
  schedule(s: Sleeper): void {
    if (s.slot >= 0) {
      this.#fix(s.slot);
    } else {
      s.slot = this.#heap.length;
      this.#heap.push(s);
      this.#up(s.slot);
    }
    this.#arm();
  }

  cancel(s: Sleeper): void {
    const i = s.slot;
    if (i < 0) return;
    s.slot = -1;
    const last = this.#heap.pop()!;
    if (i < this.#heap.length) {
      this.#heap[i] = last;
      last.slot = i;
      this.#fix(i);
    }
    if (this.#heap.length === 0 && !this.#ticking) this.#disarm();
  }

  /**
   * Wakes the sleepers that are due, earliest first, up to wakesPerTurn of them; the timer it arms
   * then wakes the rest in a later turn. A sleeper that wants to wake again schedules itself from
   * wake(); one woken here is out of the heap until it does.
   */
  tick(): void {
    // Node's timers count whole milliseconds on a clock of their own and may fire up to one
    // before this one reaches the time asked for.
    const now = this.#now() + 1;
    this.#ticking = true;
    try {
      for (let woken = 0; woken < this.#wakesPerTurn && this.#heap.length > 0 && this.#heap[0]!.wakeAt <= now; woken++) {
        const s = this.#heap[0]!;
        this.cancel(s);
        s.wake(now);
      }
    } finally {
      this.#ticking = false;
      this.#arm();
    }
  }

  #arm(): void {
    if (this.#ticking) return;
    const next = this.#heap[0];
    if (!next) return this.#disarm();
    if (this.#timer !== undefined && next.wakeAt >= this.#armedFor) return;
    this.#disarm();
    this.#armedFor = next.wakeAt;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#armedFor = Infinity;
      this.tick();
    }, Math.min(TIMEOUT_MAX, Math.max(0, next.wakeAt - this.#now())));
    if (this.#unref) this.#timer.unref();
  }

  #disarm(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#armedFor = Infinity;
  }

  #fix(i: number): void {
    if (!this.#up(i)) this.#down(i);
  }

  #up(i: number): boolean {
    const h = this.#heap;
    const s = h[i]!;
    let moved = false;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (h[p]!.wakeAt <= s.wakeAt) break;
      h[i] = h[p]!;
      h[i]!.slot = i;
      i = p;
      moved = true;
    }
    h[i] = s;
    s.slot = i;
    return moved;
  }

  #down(i: number): void {
    const h = this.#heap;
    const n = h.length;
    const s = h[i]!;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const c = r < n && h[r]!.wakeAt < h[l]!.wakeAt ? r : l;
      if (h[c]!.wakeAt >= s.wakeAt) break;
      h[i] = h[c]!;
      h[i]!.slot = i;
      i = c;
    }
    h[i] = s;
    s.slot = i;
  }
}

/** The clock every watcher of this process shares. */
export const watchClock = new WatchClock();
