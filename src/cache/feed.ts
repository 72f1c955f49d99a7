// The cache's side of its replicas in worker threads (docs/design.md, "Workers"). The thread that
// owns the reflectors tells each worker, over a MessagePort, every resource it caches and every
// change its stores apply, in the order they applied them, each change at the end of the run of
// code that applied it (see #send); a worker's replica (replica.ts) applies the same changes to
// stores of its own. Objects' bytes live in SharedArrayBuffers (the cache is made with
// sharedBytes), so a message carries a reference to them, not a copy: the bytes are held once
// however many threads serve them; each replica holds its own indexes.
import type { MessagePort } from 'node:worker_threads';
import type { ResourceInfo } from '../api/resource.ts';
import type { CachedObject } from '../store/object.ts';
import type { StoreEvent } from '../store/events.ts';
import type { EventType } from '../store/store.ts';
import type { Cache } from './cache.ts';

/** What the feed needs of the cache it follows. */
export type FeedSource = Pick<Cache, 'observe' | 'synced' | 'waiting' | 'unsynced'>;
import type { CachedResource } from './view.ts';

/** What the owner tells a replica. */
export type FeedMessage =
  | { t: 'run'; id: number; name: string; info: ResourceInfo }
  | { t: 'drop'; id: number }
  | { t: 'replace'; id: number; resourceVersion: number; objects: CachedObject[] }
  | { t: 'event'; id: number; type: EventType; object: CachedObject }
  | { t: 'progress'; id: number; resourceVersion: number }
  | { t: 'status'; status: CacheStatus }
  | { t: 'bookmarked'; request: number };

/** What a replica asks of the owner: a bookmark soon for a resource (its consistency proof). */
export interface FeedRequest {
  t: 'bookmarkSoon';
  id: number;
  request: number;
}

/** The owner's readiness and the state of what it caches, for each replica's health and debug answers. */
export interface CacheStatus {
  ready: boolean;
  waiting: string[];
  unsynced: string[];
  /** Ids of the resources whose upstream has shown it does not do watch-list. */
  noWatchList: number[];
}

// How often the status is looked at; it is sent only when it changed.
const STATUS_INTERVAL_MS = 250;

export class CacheFeed {
  readonly #cache: FeedSource;
  readonly #ports = new Set<MessagePort>();
  readonly #ids = new Map<CachedResource, { id: number; unlisten: () => void }>();
  #nextId = 1;
  /** Messages not sent yet, in the order they happened. */
  #pending: FeedMessage[] = [];
  /** The end of this turn of the event loop sends what is pending, with the status when it is due. */
  #flushing = false;
  /** The end of this run of code sends the changes pending. */
  #soon = false;
  /** A resource started, stopped or relisted in this turn: the status goes with it, in the same message. */
  #statusDue = false;
  #lastStatus = '';
  readonly #unobserve: () => void;
  readonly #statusTimer: NodeJS.Timeout;

  constructor(cache: FeedSource) {
    this.#cache = cache;
    this.#unobserve = cache.observe({ running: (r) => this.#running(r), dropped: (r) => this.#dropped(r) });
    this.#statusTimer = setInterval(() => this.#status(), STATUS_INTERVAL_MS);
    this.#statusTimer.unref();
  }

  /** Feeds one more replica: first the whole state as it is now, then every change. */
  attach(port: MessagePort): void {
    this.#flush();
    const initial: FeedMessage[] = [];
    for (const [r, { id }] of this.#ids) {
      initial.push({ t: 'run', id, name: r.name, info: cloneable(r.info) });
      if (r.store.synced) initial.push({ t: 'replace', id, resourceVersion: r.store.resourceVersion, objects: [...r.store.tree.values()] });
    }
    initial.push({ t: 'status', status: this.#currentStatus() });
    port.postMessage(initial);
    this.#ports.add(port);
    port.on('message', (m: FeedRequest) => this.#request(port, m));
    port.on('close', () => this.#ports.delete(port));
  }

  close(): void {
    this.#unobserve();
    clearInterval(this.#statusTimer);
    for (const { unlisten } of this.#ids.values()) unlisten();
    this.#ids.clear();
    this.#flush();
    for (const port of this.#ports) port.close();
    this.#ports.clear();
  }

  #running(r: CachedResource): void {
    const id = this.#nextId++;
    const store = r.store;
    const unlisten = store.listen({
      event: (e: StoreEvent) => this.#send({ t: 'event', id, type: e.type, object: e.object }),
      replaced: (resourceVersion) => {
        this.#send({ t: 'replace', id, resourceVersion, objects: [...store.tree.values()] });
        this.#statusDue = true;
      },
      progressed: (resourceVersion) => this.#send({ t: 'progress', id, resourceVersion }),
    });
    this.#ids.set(r, { id, unlisten });
    this.#send({ t: 'run', id, name: r.name, info: cloneable(r.info) });
    if (store.synced) this.#send({ t: 'replace', id, resourceVersion: store.resourceVersion, objects: [...store.tree.values()] });
    this.#statusDue = true;
  }

  #dropped(r: CachedResource): void {
    const entry = this.#ids.get(r);
    if (!entry) return;
    entry.unlisten();
    this.#ids.delete(r);
    this.#send({ t: 'drop', id: entry.id });
    this.#statusDue = true;
  }

  #request(port: MessagePort, m: FeedRequest): void {
    if (m.t !== 'bookmarkSoon') return;
    const r = [...this.#ids].find(([, v]) => v.id === m.id)?.[0];
    const done = (): void => {
      // After whatever the probe applied: the replica has the events before the answer.
      this.#flush();
      port.postMessage([{ t: 'bookmarked', request: m.request } satisfies FeedMessage]);
    };
    if (!r) return done();
    r.reflector.bookmarkSoon().then(done, done);
  }

  #currentStatus(): CacheStatus {
    const noWatchList: number[] = [];
    for (const [r, { id }] of this.#ids) if (!r.reflector.watchListSupported) noWatchList.push(id);
    return { ready: this.#cache.synced, waiting: this.#cache.waiting(), unsynced: this.#cache.unsynced(), noWatchList };
  }

  #status(): void {
    const status = this.#currentStatus();
    const text = JSON.stringify(status);
    if (text === this.#lastStatus) return;
    this.#lastStatus = text;
    this.#send({ t: 'status', status });
  }

  /**
   * A change (an event, a bookmark's progress) goes at the end of the run of code that applied it:
   * the events of one chunk of the upstream watch go together, once the owner has written them to
   * its own watchers, and not after the rest of the owner's turn (its other sockets, its timers).
   * Anything else (a resource started, dropped or relisted, the status) waits for the end of the
   * turn, when the status it changed is known, and so does every change after it: the order is
   * kept.
   */
  #send(m: FeedMessage): void {
    if (this.#ports.size === 0) return;
    this.#pending.push(m);
    if (m.t === 'event' || m.t === 'progress') {
      if (this.#flushing || this.#soon) return;
      this.#soon = true;
      queueMicrotask(() => {
        this.#soon = false;
        if (!this.#flushing) this.#post();
      });
      return;
    }
    if (this.#flushing) return;
    this.#flushing = true;
    setImmediate(() => this.#flush());
  }

  #flush(): void {
    // Computed now, after the turn that dropped a custom resource has also marked it waiting: a
    // replica never answers that the resource is neither cached nor waiting.
    if (this.#statusDue) {
      this.#statusDue = false;
      this.#status();
    }
    this.#flushing = false;
    this.#post();
  }

  #post(): void {
    if (this.#pending.length === 0) return;
    const batch = this.#pending;
    this.#pending = [];
    for (const port of this.#ports) port.postMessage(batch);
  }
}

/**
 * A resource's info as a message can carry it: without the function a custom resource's
 * selectable fields are extracted with, which only the owner's decoder calls (a replica receives
 * every object's field values with it).
 */
function cloneable(info: ResourceInfo): ResourceInfo {
  const fields = info.selectableFields;
  return fields ? { ...info, selectableFields: { labels: fields.labels, selectable: fields.selectable } } : info;
}
