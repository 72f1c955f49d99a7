// Watches answered from the cache are authorized again while they run, so revoking a role ends
// them (the apiserver itself authorizes a watch only when it starts). One ticker walks every watch;
// each is due at its own jittered time, so watches opened together are not all reviewed together.
import type { Status } from '../api/types.ts';
import type { Credential } from './authenticate.ts';
import type { ResourceAttributes } from './authorize.ts';
import type { AccessGuard } from './guard.ts';

interface Entry {
  credential: Credential;
  attrs: ResourceAttributes;
  end: (status: Status) => void;
  due: number;
  checking: boolean;
}

const TICK_MS = 1_000;

export class WatchReauthorizer {
  readonly #guard: AccessGuard;
  readonly #intervalMs: number;
  readonly #entries = new Set<Entry>();
  #timer: NodeJS.Timeout | undefined;

  constructor(guard: AccessGuard, intervalMs: number) {
    this.#guard = guard;
    this.#intervalMs = intervalMs;
  }

  /** Re-checks the watch until the returned function is called; `end` is called once when access is gone. */
  add(credential: Credential, attrs: ResourceAttributes, end: (status: Status) => void): () => void {
    if (this.#intervalMs <= 0 || credential.kind === 'unchecked') return () => undefined;
    const entry: Entry = { credential, attrs, end, due: this.#next(), checking: false };
    this.#entries.add(entry);
    this.#timer ??= setInterval(() => this.#tick(), Math.min(TICK_MS, this.#intervalMs)).unref();
    return () => {
      this.#entries.delete(entry);
      if (this.#entries.size === 0 && this.#timer) {
        clearInterval(this.#timer);
        this.#timer = undefined;
      }
    };
  }

  get size(): number {
    return this.#entries.size;
  }

  #next(): number {
    return Date.now() + this.#intervalMs * (0.5 + Math.random());
  }

  #tick(): void {
    const now = Date.now();
    for (const e of this.#entries) {
      if (e.checking || e.due > now) continue;
      e.checking = true;
      void this.#guard.admit(e.credential, e.attrs).then((a) => {
        e.checking = false;
        e.due = this.#next();
        // Undecided (a failed review) keeps the watch: the next check asks again.
        if (a.allowed === false && this.#entries.has(e)) {
          this.#entries.delete(e);
          e.end(a.status);
        }
      });
    }
  }
}
