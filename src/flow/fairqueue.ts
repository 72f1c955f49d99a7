// Fair queuing of requests by flow, after API Priority and Fairness (k8s.io/apiserver/pkg/util/
// flowcontrol/fairqueuing): a fixed number of seats; requests beyond them wait in one of many
// queues; each flow (a user) is shuffle-sharded onto a small hand of queues and joins the shortest,
// so a flood from one identity fills its own few queues and leaves the others to everyone else;
// seats freed are handed out round-robin across the non-empty queues. Queues are bounded and a
// request waits at most so long: past either it is rejected, and the caller answers 429.
import { createHash } from 'node:crypto';

export interface FairQueueOptions {
  /** Requests served at once. */
  seats: number;
  /** Queues behind the seats; 0 rejects at once when every seat is taken. */
  queues: number;
  /** Queues dealt to each flow (APF's hand size). */
  handSize: number;
  /** Requests one queue may hold. */
  queueLength: number;
  /** How long a request may wait for a seat. */
  maxWaitMs: number;
}

export type Rejection = 'queue-full' | 'timeout' | 'cancelled';

export class RejectedError extends Error {
  readonly why: Rejection;
  constructor(why: Rejection) {
    super(`request rejected: ${why}`);
    this.why = why;
  }
}

interface Waiter {
  grant: (release: () => void) => void;
  reject: (err: RejectedError) => void;
  queue: Waiter[];
  enqueuedAt: number;
  timer: NodeJS.Timeout | undefined;
}

export interface Grant {
  release: () => void;
  /** Milliseconds spent waiting in a queue (0 when a seat was free). */
  waitedMs: number;
}

export class FairQueue {
  #opts: FairQueueOptions;
  #queues: Waiter[][];
  #inFlight = 0;
  #queued = 0;
  #next = 0;

  constructor(opts: FairQueueOptions) {
    this.#opts = opts;
    this.#queues = Array.from({ length: opts.queues }, () => []);
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  get queued(): number {
    return this.#queued;
  }

  get options(): Readonly<FairQueueOptions> {
    return this.#opts;
  }

  /**
   * New limits take effect at once for new requests; requests already queued keep their places
   * (in a queue past the new count, they are still dispatched, and no new ones join it).
   */
  reconfigure(opts: FairQueueOptions): void {
    this.#opts = opts;
    while (this.#queues.length < opts.queues) this.#queues.push([]);
    this.#dispatch();
  }

  /** A seat taken now, if one is free and nobody waits for it; undefined otherwise. */
  tryAcquire(): Grant | undefined {
    if (this.#inFlight >= this.#opts.seats || this.#queued > 0) return undefined;
    this.#inFlight++;
    return { release: this.#releaser(), waitedMs: 0 };
  }

  /** A seat for a request of `flow`: now, after waiting its turn, or a RejectedError. */
  acquire(flow: string, signal?: AbortSignal): Promise<Grant> {
    const now = this.tryAcquire();
    if (now) return Promise.resolve(now);
    const queue = this.#choose(flow);
    if (!queue || queue.length >= this.#opts.queueLength) return Promise.reject(new RejectedError('queue-full'));
    return new Promise<Grant>((resolve, reject) => {
      const enqueuedAt = performance.now();
      const waiter: Waiter = {
        queue,
        enqueuedAt,
        timer: undefined,
        grant: (release) => resolve({ release, waitedMs: performance.now() - enqueuedAt }),
        reject,
      };
      const leave = (why: Rejection): void => {
        const i = waiter.queue.indexOf(waiter);
        if (i === -1) return;
        waiter.queue.splice(i, 1);
        this.#queued--;
        clearTimeout(waiter.timer);
        reject(new RejectedError(why));
      };
      waiter.timer = setTimeout(() => leave('timeout'), this.#opts.maxWaitMs);
      signal?.addEventListener('abort', () => leave('cancelled'), { once: true });
      queue.push(waiter);
      this.#queued++;
    });
  }

  #releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#inFlight--;
      this.#dispatch();
    };
  }

  #dispatch(): void {
    while (this.#inFlight < this.#opts.seats && this.#queued > 0) {
      // Round-robin over the queues: every flow with waiting requests gets its turn.
      const n = this.#queues.length;
      for (let k = 0; k < n; k++) {
        const q = this.#queues[(this.#next + k) % n]!;
        if (q.length === 0) continue;
        this.#next = (this.#next + k + 1) % n;
        const w = q.shift()!;
        this.#queued--;
        clearTimeout(w.timer);
        this.#inFlight++;
        w.grant(this.#releaser());
        break;
      }
    }
  }

  /** The shortest queue of the flow's hand, as APF's shuffle-sharding dealer deals it. */
  #choose(flow: string): Waiter[] | undefined {
    const { queues, handSize } = this.#opts;
    if (queues === 0) return undefined;
    const hand = dealHand(flow, queues, Math.min(handSize, queues));
    let best = this.#queues[hand[0]!]!;
    for (const i of hand) if (this.#queues[i]!.length < best.length) best = this.#queues[i]!;
    return best;
  }
}

/**
 * handSize distinct queue indices out of `deckSize` for a flow, from a hash of its name: the
 * dealer of k8s.io/apiserver/pkg/util/shufflesharding (each draw takes the hash modulo the cards
 * left, so two flows share a whole hand only rarely).
 */
export function dealHand(flow: string, deckSize: number, handSize: number): number[] {
  let h = createHash('sha256').update(flow).digest().readBigUInt64BE(0);
  const hand: number[] = [];
  const remaining = Array.from({ length: deckSize }, (_, i) => i);
  for (let i = 0; i < handSize; i++) {
    const left = BigInt(deckSize - i);
    const pick = Number(h % left);
    h /= left;
    hand.push(remaining[pick]!);
    remaining[pick] = remaining[deckSize - i - 1]!;
  }
  return hand;
}
