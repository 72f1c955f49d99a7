// Watches answered from the cache are authorized again while they run, so revoking a role ends
// them (the apiserver itself authorizes a watch only when it starts). Each watch is due at its own
// jittered time, so watches opened together are not all reviewed together, and waits for it on a
// clock of its own (watch/clock.ts): walking every watch each second to find the few that were
// due cost 40 bytes of garbage per watch per second, 0.4 MB/s at 10,000 idle watches, enough to
// keep V8 from ever shrinking a heap that a burst of watch opens had left fragmented.
import type { Credential } from './authenticate.ts';
import type { Status } from '../api/types.ts';
import type { ResourceAttributes } from '../api/attributes.ts';
import type { AccessGuard } from './guard.ts';
import { WatchClock, type Sleeper } from '../watch/clock.ts';

/** What a refused watch is ended with: the watcher itself, so no closure is kept per watch. */
export interface Endable {
  endWith(status: Status): void;
}

/** One re-checked watch; its handle for remove(). */
export class Entry implements Sleeper {
  readonly credential: Credential;
  /**
   * The attributes the watch was admitted with, selectors included: a kubelet's watch of its own
   * pods is allowed only with its spec.nodeName selector, and would be ended without it.
   */
  readonly attrs: ResourceAttributes;
  readonly watch: Endable;
  readonly #owner: WatchReauthorizer;
  wakeAt = 0;
  slot = -1;

  constructor(owner: WatchReauthorizer, credential: Credential, attrs: ResourceAttributes, watch: Endable) {
    this.#owner = owner;
    this.credential = credential;
    this.attrs = attrs;
    this.watch = watch;
  }

  wake(): void {
    this.#owner.recheck(this);
  }
}

export class WatchReauthorizer {
  readonly #guard: AccessGuard;
  readonly #intervalMs: number;
  readonly #entries = new Set<Entry>();
  // Date.now, not the monotonic clock: due times are minutes apart, and tests move Date.
  readonly #clock = new WatchClock(() => Date.now(), { unref: true });

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
    const entry = new Entry(this, credential, attrs, watch);
    this.#entries.add(entry);
    this.#schedule(entry);
    return entry;
  }

  remove(entry: Entry): void {
    this.#entries.delete(entry);
    this.#clock.cancel(entry);
  }

  get size(): number {
    return this.#entries.size;
  }

  #schedule(entry: Entry): void {
    entry.wakeAt = Math.round(this.#clock.now() + this.#intervalMs * (0.5 + Math.random()));
    this.#clock.schedule(entry);
  }

  /** The clock's call, when the entry is due: out of the clock until its check has answered. */
  recheck(e: Entry): void {
    if (!this.#entries.has(e)) return;
    void Promise.resolve(this.#guard.admit(e.credential, e.attrs)).then((a) => {
      if (!this.#entries.has(e)) return;
      // Undecided (a failed review) or busy (reviews past their bound) keeps the watch: the
      // next check asks again.
      if (a.allowed === false && !a.busy) {
        this.#entries.delete(e);
        e.watch.endWith(a.status);
        return;
      }
      this.#schedule(e);
    }, () => {
      if (this.#entries.has(e)) this.#schedule(e);
    });
  }
}
