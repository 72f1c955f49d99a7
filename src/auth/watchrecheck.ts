// Watches answered from the cache are authorized again while they run, so revoking a role ends
// them (the apiserver itself authorizes a watch only when it starts). One ticker walks every watch;
// each is due at its own jittered time, so watches opened together are not all reviewed together.
import type { Credential } from './authenticate.ts';
import type { Status } from '../api/types.ts';
import type { ResourceAttributes } from '../api/attributes.ts';
import type { AccessGuard } from './guard.ts';

/** What a refused watch is ended with: the watcher itself, so no closure is kept per watch. */
export interface Endable {
  endWith(status: Status): void;
}

export interface Entry {
  credential: Credential;
  /**
   * The attributes the watch was admitted with, selectors included: a kubelet's watch of its own
   * pods is allowed only with its spec.nodeName selector, and would be ended without it.
   */
  attrs: ResourceAttributes;
  watch: Endable;
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

  /**
   * Re-checks the watch until remove(); when access is gone the watch is ended with an ERROR event
   * carrying the apiserver's refusal. Undefined when nothing is re-checked.
   */
  add(credential: Credential, attrs: ResourceAttributes, watch: Endable): Entry | undefined {
    if (this.#intervalMs <= 0 || credential.kind === 'unchecked') return undefined;
    const entry: Entry = { credential, attrs, watch, due: this.#next(), checking: false };
    this.#entries.add(entry);
    this.#timer ??= setInterval(() => this.#tick(), Math.min(TICK_MS, this.#intervalMs)).unref();
    return entry;
  }

  remove(entry: Entry): void {
    this.#entries.delete(entry);
    if (this.#entries.size === 0 && this.#timer) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
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
        // Undecided (a failed review) or busy (reviews past their bound) keeps the watch: the
        // next check asks again.
        if (a.allowed === false && !a.busy && this.#entries.has(e)) {
          this.#entries.delete(e);
          e.watch.endWith(a.status);
        }
      });
    }
  }
}
