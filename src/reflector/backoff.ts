// Exponential backoff with full jitter for every retry a reflector makes (client-go's reflector
// backs off 800 ms doubling to 30 s; jitter keeps many gateways from retrying in lockstep after an
// apiserver restart).

export class Backoff {
  #attempt = 0;
  readonly #initialMs: number;
  readonly #maxMs: number;
  readonly #random: () => number;

  constructor(initialMs = 800, maxMs = 30_000, random: () => number = Math.random) {
    this.#initialMs = initialMs;
    this.#maxMs = maxMs;
    this.#random = random;
  }

  /** The next wait: uniformly random in [cap/2, cap], cap doubling per attempt up to the maximum. */
  next(): number {
    const cap = Math.min(this.#maxMs, this.#initialMs * 2 ** this.#attempt);
    this.#attempt++;
    return cap / 2 + this.#random() * (cap / 2);
  }

  reset(): void {
    this.#attempt = 0;
  }
}
