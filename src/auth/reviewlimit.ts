// A bound on the reviews Levee sends upstream (TokenReviews and SubjectAccessReviews). Each review
// is a request to the apiserver on Levee's own few connections; thousands of clients arriving with
// new tokens would otherwise queue an unbounded number of them inside the HTTP client. Reviews
// take a seat of a fair queue keyed by who they are about, so one client's flood of new tokens
// waits in its own queues; past the queues or the wait the review is rejected, and the request
// that needed it gets APF's 429 like any request Levee cannot take now.
import { FairQueue, RejectedError, type FairQueueOptions } from '../flow/fairqueue.ts';

// As many as Levee's own connections upstream carry at once (one request each); APF's queues.
export const DEFAULT_REVIEW_LIMITS: FairQueueOptions = { seats: 32, queues: 64, handSize: 6, queueLength: 50, maxWaitMs: 15_000 };

/** A review that was not sent: too many were waiting, or it waited too long. */
export class ReviewRejectedError extends Error {}

export class ReviewLimiter {
  readonly #queue: FairQueue;
  /** Reviews turned away, for the metrics. */
  rejected = 0;

  constructor(opts: FairQueueOptions = DEFAULT_REVIEW_LIMITS) {
    this.#queue = new FairQueue(opts);
  }

  get inFlight(): number {
    return this.#queue.inFlight;
  }

  get queued(): number {
    return this.#queue.queued;
  }

  /** Runs `send` once a seat is free for `flow`; rejects with ReviewRejectedError past the bound. */
  async run<T>(flow: string, send: () => Promise<T>): Promise<T> {
    let grant;
    try {
      grant = await this.#queue.acquire(flow);
    } catch (err) {
      if (!(err instanceof RejectedError)) throw err;
      this.rejected++;
      throw new ReviewRejectedError(`review not sent: ${err.why}`);
    }
    try {
      return await send();
    } finally {
      grant.release();
    }
  }
}
