// Which requests wait, which are rejected, and which pass: the classes of docs/design.md ("Flow
// control"). Every request that is not exempt takes a seat of its class (long-running, read,
// mutating) through fair queuing by user, and a request that goes upstream also takes a seat of the
// upstream bound for its class, so a mass restart queues at Levee instead of at the apiserver. A
// rejection is the apiserver's own 429 (APF's "Too many requests") with Retry-After.
import { tooManyRequests } from '../api/status.ts';
import type { Status } from '../api/types.ts';
import type { UserInfo } from '../api/user.ts';
import type { RequestInfo } from '../api/requestinfo.ts';
import { FairQueue, RejectedError, type FairQueueOptions, type Grant } from './fairqueue.ts';
import type { Maybe } from '../maybe.ts';

export type PriorityClass = 'long-running' | 'read' | 'mutating';
export const CLASSES: readonly PriorityClass[] = ['long-running', 'read', 'mutating'];

export interface FlowControlLimits {
  /** Seats and queues of each class, for every request Levee takes. */
  requests: Record<PriorityClass, FairQueueOptions>;
  /** Seats and queues of each class, for requests sent upstream (forwards). */
  upstream: Record<PriorityClass, FairQueueOptions>;
}

// APF's defaults: 64 queues, hands of 6, 50 requests a queue, 15 s at most in a queue.
const queues = { queues: 64, handSize: 6, queueLength: 50, maxWaitMs: 15_000 };
export const DEFAULT_QUEUE_WAIT_MS = queues.maxWaitMs;
export const DEFAULT_QUEUE_LENGTH = queues.queueLength;

/**
 * Defaults: the apiserver's --max-requests-inflight 400 and --max-mutating-requests-inflight 200
 * for what goes upstream; reads from memory take microseconds, so Levee serves more at once;
 * long-running requests hold a seat for their whole life (a watch), so their class is sized by
 * memory, not time.
 */
export const DEFAULT_SEATS = {
  requests: { 'long-running': 50_000, read: 1_000, mutating: 400 } as Record<PriorityClass, number>,
  upstream: { 'long-running': 5_000, read: 400, mutating: 200 } as Record<PriorityClass, number>,
};

export interface FlowObserver {
  waited(cls: PriorityClass, stage: 'requests' | 'upstream', ms: number): void;
  rejected(cls: PriorityClass, stage: 'requests' | 'upstream', why: string): void;
}

export function classify(info: RequestInfo, longRunning: boolean): PriorityClass {
  if (longRunning) return 'long-running';
  return info.verb === 'get' || info.verb === 'list' || info.verb === 'head' ? 'read' : 'mutating';
}

// Health checks and leader election must pass however loaded Levee is: a failing probe restarts
// a busy replica, and a controller that cannot renew its lease abdicates (APF exempts both).
const EXEMPT_PATHS = new Set(['/healthz', '/livez', '/readyz', '/version']);

export function isExempt(info: RequestInfo, user: UserInfo | undefined): boolean {
  if (user?.groups.includes('system:masters')) return true;
  if (!info.isResourceRequest) return EXEMPT_PATHS.has(info.path);
  return info.apiGroup === 'coordination.k8s.io' && info.resource === 'leases';
}

/** What takes a waiting request out of its queue when its client goes away (an AbortController). */
export interface Cancellation {
  readonly signal: AbortSignal;
}

export class FlowController {
  readonly #requests = new Map<PriorityClass, FairQueue>();
  readonly #upstream = new Map<PriorityClass, FairQueue>();
  /** Where waits and rejections are reported (the metrics). */
  observer: FlowObserver | undefined;

  constructor(limits: FlowControlLimits) {
    for (const c of CLASSES) {
      this.#requests.set(c, new FairQueue(limits.requests[c]));
      this.#upstream.set(c, new FairQueue(limits.upstream[c]));
    }
  }

  /** New limits for new requests, without a restart. */
  reconfigure(limits: FlowControlLimits): void {
    for (const c of CLASSES) {
      this.#requests.get(c)!.reconfigure(limits.requests[c]);
      this.#upstream.get(c)!.reconfigure(limits.upstream[c]);
    }
  }

  /**
   * A seat of `cls` for the request, or the 429 that refuses it: at once when a seat is free. The
   * cancellation's signal is read only when the request must queue.
   */
  admit(cls: PriorityClass, flow: string, cancellation?: Cancellation): Maybe<Grant | Status> {
    const q = this.#requests.get(cls)!;
    const now = q.tryAcquire();
    if (!now) return this.#take(q, cls, 'requests', flow, cancellation?.signal);
    this.observer?.waited(cls, 'requests', 0);
    return now;
  }

  /** A seat of the upstream bound of `cls`, or the 429 that refuses it. */
  admitUpstream(cls: PriorityClass, flow: string, signal?: AbortSignal): Promise<Grant | Status> {
    return this.#take(this.#upstream.get(cls)!, cls, 'upstream', flow, signal);
  }

  /** True while requests of `cls` wait for the upstream bound: the apiserver is as busy as Levee lets it be. */
  upstreamBusy(cls: PriorityClass): boolean {
    return this.#upstream.get(cls)!.queued > 0;
  }

  /** In flight and queued per class and stage, for the metrics. */
  snapshot(): Array<{ cls: PriorityClass; stage: 'requests' | 'upstream'; inFlight: number; queued: number; seats: number }> {
    const out = [];
    for (const c of CLASSES) {
      for (const [stage, q] of [['requests', this.#requests.get(c)!], ['upstream', this.#upstream.get(c)!]] as const) {
        out.push({ cls: c, stage, inFlight: q.inFlight, queued: q.queued, seats: q.options.seats });
      }
    }
    return out;
  }

  async #take(q: FairQueue, cls: PriorityClass, stage: 'requests' | 'upstream', flow: string, signal?: AbortSignal): Promise<Grant | Status> {
    try {
      const grant = await q.acquire(flow, signal);
      this.observer?.waited(cls, stage, grant.waitedMs);
      return grant;
    } catch (err) {
      if (!(err instanceof RejectedError)) throw err;
      this.observer?.rejected(cls, stage, err.why);
      return tooManyRequests();
    }
  }
}

/**
 * Limits from the flag values: seats per class for requests and for the upstream bound (0: no
 * limit), how long a request may queue and how many one queue holds.
 */
export function limitsFrom(o: {
  requests: Record<PriorityClass, number>;
  upstream: Record<PriorityClass, number>;
  queueWaitMs: number;
  queueLength: number;
}): FlowControlLimits {
  const q = (seats: number): FairQueueOptions => ({ ...queues, seats: seats > 0 ? seats : Infinity, maxWaitMs: o.queueWaitMs, queueLength: o.queueLength });
  const per = (r: Record<PriorityClass, number>) =>
    Object.fromEntries(CLASSES.map((c) => [c, q(r[c])])) as Record<PriorityClass, FairQueueOptions>;
  return { requests: per(o.requests), upstream: per(o.upstream) };
}

/**
 * One thread's share of limits meant for the whole process, when `threads` serve it (workers.ts):
 * each thread's seats are the total divided among them, rounded up, so the apiserver never sees
 * more than the configured bound plus one a thread. Queues stay as they are: a thread's queues
 * hold only its own clients.
 */
export function shareOf(limits: FlowControlLimits, threads: number): FlowControlLimits {
  if (threads <= 1) return limits;
  const share = (r: Record<PriorityClass, FairQueueOptions>) =>
    Object.fromEntries(
      Object.entries(r).map(([c, o]) => [c, { ...o, seats: Number.isFinite(o.seats) ? Math.max(1, Math.ceil(o.seats / threads)) : o.seats }]),
    ) as Record<PriorityClass, FairQueueOptions>;
  return { requests: share(limits.requests), upstream: share(limits.upstream) };
}
