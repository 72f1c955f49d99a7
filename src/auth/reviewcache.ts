// Decisions Levee asked the apiserver for (TokenReview, SubjectAccessReview), kept for a short while
// so a hot path asks once per identity and TTL instead of once per request. Positive and negative
// answers live for different times, as in the apiserver's own webhook caches; identical questions
// asked at once share one review, so 10,000 agents restarting together send one question, not
// 10,000. A failed review is never cached: the next request asks again.
import { LRUCache } from 'lru-cache';

export interface ReviewCacheOptions<V> {
  /** How long a positive answer is reused; 0 asks every time. */
  positiveTtlMs: number;
  /** How long a negative answer is reused; 0 asks every time. */
  negativeTtlMs: number;
  positive: (v: V) => boolean;
  maxEntries?: number;
}

export class ReviewCache<V extends object> {
  readonly #opts: ReviewCacheOptions<V>;
  readonly #answers: LRUCache<string, V>;
  readonly #inflight = new Map<string, Promise<V>>();

  constructor(opts: ReviewCacheOptions<V>) {
    this.#opts = opts;
    this.#answers = new LRUCache({ max: opts.maxEntries ?? 10_000, ttl: Math.max(1, opts.positiveTtlMs, opts.negativeTtlMs) });
  }

  /** The cached answer for `key`, or `review()`'s once it settles. Rejects when the review fails. */
  get(key: string, review: () => Promise<V>): Promise<V> {
    const cached = this.#answers.get(key);
    if (cached !== undefined) return Promise.resolve(cached);
    let pending = this.#inflight.get(key);
    if (!pending) {
      pending = review().then((v) => {
        const ttl = this.#opts.positive(v) ? this.#opts.positiveTtlMs : this.#opts.negativeTtlMs;
        if (ttl > 0) this.#answers.set(key, v, { ttl });
        return v;
      });
      this.#inflight.set(key, pending);
      const settled = (): void => void this.#inflight.delete(key);
      pending.then(settled, settled);
    }
    return pending;
  }

  /** The cached answer for `key`, if there is one; never asks. */
  peek(key: string): V | undefined {
    return this.#answers.get(key);
  }

  get size(): number {
    return this.#answers.size;
  }
}
