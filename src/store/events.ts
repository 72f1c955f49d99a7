// The recent events of one resource, for watches that resume from a resourceVersion. Like the
// apiserver's watchCacheHistory: a bounded window in resourceVersion order that knows the oldest
// resourceVersion it can still resume from.
import type { CachedObject } from './object.ts';

export interface StoreEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  /** The object after the event; for DELETED its last state, carrying the deletion's resourceVersion. */
  object: CachedObject;
  /** The object before the event, if it existed: selector transitions need both. */
  prev: CachedObject | undefined;
  resourceVersion: number;
  at: number;
}

export interface EventWindowOptions {
  /** Events older than this leave the window (75 s, the apiserver's eventFreshDuration). */
  minAgeMs?: number;
  /** And at most this many are kept (100 Ki, the apiserver's largest watch cache). */
  maxEvents?: number;
}

export class EventWindow {
  // Slots before #head are emptied as events leave, so an evicted event (and the object bytes it
  // holds) is garbage at once, not only when the array is next compacted.
  #events: Array<StoreEvent | undefined> = [];
  #head = 0;
  // Watches from here on are complete: every later event is in the window.
  #resumableFrom = 0;
  readonly #minAgeMs: number;
  readonly #maxEvents: number;

  constructor(opts: EventWindowOptions = {}) {
    this.#minAgeMs = opts.minAgeMs ?? 75_000;
    this.#maxEvents = opts.maxEvents ?? 100 * 1024;
  }

  /** After a (re)list at `resourceVersion`: no history before it. */
  reset(resourceVersion: number): void {
    this.#events = [];
    this.#head = 0;
    this.#resumableFrom = resourceVersion;
  }

  push(e: StoreEvent): void {
    this.#events.push(e);
    while (this.#events.length - this.#head > 1) {
      const oldest = this.#events[this.#head]!;
      if (this.#events.length - this.#head <= this.#maxEvents && e.at - oldest.at <= this.#minAgeMs) break;
      // Watches from the evicted event's resourceVersion on still see every later event.
      this.#resumableFrom = oldest.resourceVersion;
      this.#events[this.#head] = undefined;
      this.#head++;
    }
    if (this.#head > 1024 && this.#head * 2 > this.#events.length) {
      this.#events = this.#events.slice(this.#head);
      this.#head = 0;
    }
  }

  /** Events held now. */
  get size(): number {
    return this.#events.length - this.#head;
  }

  /** The oldest event held, if any. */
  get oldest(): StoreEvent | undefined {
    return this.#events[this.#head];
  }

  /** The oldest resourceVersion a watch may start from. */
  get resumableFrom(): number {
    return this.#resumableFrom;
  }

  /** Events after `resourceVersion`, or undefined when some of them have left the window. */
  since(resourceVersion: number): StoreEvent[] | undefined {
    if (resourceVersion < this.#resumableFrom) return undefined;
    const out: StoreEvent[] = [];
    for (let i = this.#head; i < this.#events.length; i++) {
      const e = this.#events[i]!;
      if (e.resourceVersion > resourceVersion) out.push(e);
    }
    return out;
  }
}
