// One client watch served from the cache: which events it receives (namespace, selectors, the
// transitions in and out of them), its queue, and its end. Modelled on the apiserver's
// cache_watcher.go: a bounded buffer, and a watcher that cannot keep up is closed (the client
// re-watches from the last resourceVersion it saw) instead of holding memory without bound.
import type { ResourceInfo } from '../api/resource.ts';
import type { Store } from '../store/store.ts';
import type { FieldSelector } from '../selectors/fields.ts';
import type { LabelSelector } from '../selectors/labels.ts';
import type { StoreEvent } from '../store/events.ts';
import type { CachedObject } from '../store/object.ts';
import { noteServed } from '../http/activity.ts';
import { drained, writeParts, type DownstreamResponse } from '../http/downstream.ts';
import { JSON_WATCH, type WatchEncoding, type WatchEventType } from './encode.ts';
import { newInternalError } from '../api/status.ts';
import type { Status } from '../api/types.ts';
import type { Sleeper } from './clock.ts';
import type { WatcherRegistry } from './registry.ts';

/** What a watcher needs of its resource: how its objects are encoded, its store, its watchers. */
export interface WatchedResource {
  readonly info: ResourceInfo;
  readonly store: Store;
  readonly watchers: WatcherRegistry;
}

export interface WatchFilter {
  namespace: string;
  labels: LabelSelector;
  fields: FieldSelector;
  /** Only events after this resourceVersion. */
  resourceVersion: number;
}

// Past this much unsent data the client is not keeping up. Only what the watcher queues counts:
// live events, bookmarks and the last line. What a watch starts with (a watch-list's initial
// state, or the events since its resourceVersion) is no queue; it is written from its snapshot as
// fast as the client reads it, however large (the apiserver's cacheWatcher sends its initial
// events the same way, blocking on the client, before it takes live events).
const MAX_QUEUED_BYTES = 16 * 1024 * 1024;
// What a watch starts with is written in batches of about this much: one corked write each, so a
// node's few pods leave as one write, and a large state leaves in steps the client's reading paces
// (each held in the stream until sent). bench:ab, a watch-list of 125 pods (1.4 MB) by node over
// HTTP/2: 4,380 µs of Levee's CPU in 64 KiB batches against 3,780 for the whole state queued at
// once; 3,640 against 4,280 in 1 MiB batches, and 2,200 against 2,260 with a client that reads
// faster. Of 5 pods: 453 against 460 µs.
const START_BATCH_BYTES = 1024 * 1024;

export function matches(f: WatchFilter, o: CachedObject): boolean {
  return (
    (f.namespace === '' || o.namespace === f.namespace) &&
    (f.labels.empty || f.labels.matches(o.labels)) &&
    (f.fields.empty || f.fields.matches(o.fields))
  );
}

/** What a watcher with this filter sees of an event, if anything (cacher's convertToWatchEvent). */
export function deliveredAs(f: WatchFilter, e: StoreEvent): WatchEventType | undefined {
  if (e.type === 'DELETED') return matches(f, e.prev ?? e.object) ? 'DELETED' : undefined;
  const now = matches(f, e.object);
  const before = e.prev !== undefined && matches(f, e.prev);
  if (now && before) return e.type;
  if (now) return 'ADDED';
  if (before) return 'DELETED';
  return undefined;
}

const unencodable = (e: StoreEvent): string => `unable to encode watch object at resourceVersion ${e.resourceVersion}`;

// The apiserver's defaults: a bookmark about every minute and 2 s before the deadline.
const BOOKMARK_EVERY_MS = 60_000;
const BOOKMARK_BEFORE_DEADLINE_MS = 2_000;
// Times are whole milliseconds, and "none" is -1 rather than Infinity: V8 then keeps them as small
// integers inside the watcher instead of a separate boxed number per field and per watcher.
const NONE = -1;

export interface WatchTiming {
  /** Ends the watch this long after it starts. */
  timeoutMs: number;
  /** BOOKMARKs every minute and before the deadline. */
  bookmarks: boolean;
}


// Which watcher a response belongs to, so that one shared function can listen for every
// response's 'close' instead of a closure per watch.
const watcherOf = new WeakMap<DownstreamResponse, CacheWatcher>();
function closeWatcher(this: DownstreamResponse): void {
  watcherOf.get(this)?.close();
}

/**
 * Tens of thousands of these stay open for hours, mostly idle, so each holds only what it needs:
 * no timers of its own (the shared clock wakes it), no closures per watch, a queue only while
 * something waits to be written.
 */
export class CacheWatcher implements WatchFilter, Sleeper {
  readonly namespace: string;
  readonly labels: LabelSelector;
  readonly fields: FieldSelector;
  readonly resourceVersion: number;
  readonly #r: WatchedResource;
  readonly #res: DownstreamResponse;
  readonly #encoding: WatchEncoding;
  #queue: Buffer[] | undefined;
  #queued = 0;
  /**
   * What the watch starts with, still to write from #startNext on, before the queue: the initial
   * state (a watch-list's), or the events since the watch's resourceVersion.
   */
  #initial: readonly CachedObject[] | undefined;
  #backlog: readonly StoreEvent[] | undefined;
  #startNext = 0;
  #startBytes = 0;
  #startWritten: ((bytes: number) => void) | undefined;
  #writing = false;
  #closed = false;
  /** A last line is queued; nothing more is sent after it. */
  #ending = false;
  /** Its initial events are sent, their end bookmark waits (awaitInitialEventsEnd); no other bookmark before it. */
  #initialEventsOpen = false;
  #sentRV: number;
  /**
   * Told once, when the watch has ended, the status its response was given. A callback, not a
   * promise: a promise, its resolver and the reaction of whoever awaits it cost about 300 bytes
   * that every idle watch would hold for as long as it lasts.
   */
  #onEnd: ((code: number) => void) | undefined;
  #endedWith: number | undefined;
  #deadline = 0;
  #nextBookmark = NONE;
  #deadlineBookmark = NONE;
  readonly #timeoutMs: number;
  wakeAt = 0;
  slot = -1;

  constructor(r: WatchedResource, filter: WatchFilter, res: DownstreamResponse, timing: WatchTiming, encoding: WatchEncoding = JSON_WATCH) {
    this.#r = r;
    this.#encoding = encoding;
    this.namespace = filter.namespace;
    this.labels = filter.labels;
    this.fields = filter.fields;
    this.resourceVersion = filter.resourceVersion;
    this.#res = res;
    this.#sentRV = filter.resourceVersion;
    this.#timeoutMs = Math.round(timing.timeoutMs);
    this.#startClock(timing.bookmarks);
    watcherOf.set(res, this);
    res.on('close', closeWatcher);
  }

  get takesBookmarks(): boolean {
    return this.#nextBookmark !== NONE;
  }

  /** The deadline and, with `bookmarks`, the bookmark times, counted from now. */
  #startClock(bookmarks: boolean): void {
    const now = this.#r.watchers.clock.now();
    this.#deadline = now + this.#timeoutMs;
    this.#nextBookmark = bookmarks ? now + BOOKMARK_EVERY_MS : NONE;
    this.#deadlineBookmark = bookmarks && this.#timeoutMs > BOOKMARK_BEFORE_DEADLINE_MS ? this.#deadline - BOOKMARK_BEFORE_DEADLINE_MS : NONE;
  }

  /**
   * Calls `listener` with the status its response was given once the watch has ended (in a
   * microtask, as a promise's reaction would run), or at once if it has.
   */
  whenEnded(listener: (code: number) => void): void {
    if (this.#endedWith !== undefined) {
      listener(this.#endedWith);
      return;
    }
    const before = this.#onEnd;
    this.#onEnd = before
      ? (code) => {
          before(code);
          listener(code);
        }
      : listener;
  }

  /** Receives live events from now on, and keeps time: bookmarks and the deadline. */
  start(): void {
    if (this.#closed) return;
    this.#r.watchers.add(this);
    this.#schedule();
  }

  offer(e: StoreEvent): void {
    if (this.#closed) return;
    const frame = this.#frameOf(e);
    if (frame === null) return;
    // An object the representation cannot write exactly ends the watch with an error rather than
    // leave the client a gap it cannot see.
    if (frame === undefined) {
      this.endWith(newInternalError(unencodable(e)));
      return;
    }
    this.#send(frame);
    noteServed();
  }

  /** The frame of `e` for this watch, now counted as sent; null: not one it receives; undefined: it cannot be written. */
  #frameOf(e: StoreEvent): Buffer | null | undefined {
    if (e.resourceVersion <= this.resourceVersion) return null;
    const type = deliveredAs(this, e);
    if (type === undefined) return null;
    this.#sentRV = e.resourceVersion;
    return this.#encoding.event(this.#r.info, e, type);
  }

  /**
   * Sends the initial state as ADDED events; called before anything else is sent, and what is sent
   * after it (the end bookmark, live events) follows it. They are encoded and written as the client
   * takes them, not queued: a watch-list of a large collection holds the snapshot's references
   * rather than its bytes twice, and is never closed for its size. `written` is told the bytes
   * sent once they all are, or what was sent when the watch ended first.
   */
  sendInitial(objects: readonly CachedObject[], written?: (bytes: number) => void): void {
    this.#sendStart(objects, undefined, written);
  }

  /**
   * Sends the events since the watch's resourceVersion that it receives, as the client takes them;
   * called before anything else is sent, as sendInitial. The store's window holds up to 75 s of
   * changes, far more than the queue's bound after a busy minute, and a watch closed for them
   * would resume from the same resourceVersion and be closed again.
   */
  sendBacklog(events: readonly StoreEvent[]): void {
    this.#sendStart(undefined, events);
  }

  #sendStart(objects: readonly CachedObject[] | undefined, events: readonly StoreEvent[] | undefined, written?: (bytes: number) => void): void {
    if (this.#closed || (objects ?? events ?? []).length === 0) {
      written?.(0);
      return;
    }
    this.#initial = objects;
    this.#backlog = events;
    this.#startNext = 0;
    this.#startBytes = 0;
    this.#startWritten = written;
    if (!this.#writing) void this.#flush();
  }

  /**
   * The next batch of the initial state or backlog, encoded. An object that cannot be ends the
   * watch after what came before it: nothing queued behind (the end bookmark, live events) may
   * follow a start that is not whole.
   */
  #nextStartBatch(): Buffer[] {
    const batch: Buffer[] = [];
    let bytes = 0;
    const objects = this.#initial;
    const events = this.#backlog;
    const length = (objects ?? events)?.length ?? 0;
    while (this.#startNext < length && bytes < START_BATCH_BYTES) {
      let frame: Buffer | Buffer[] | undefined;
      let failure: string | undefined;
      if (objects) {
        const o = objects[this.#startNext++]!;
        frame = this.#encoding.added(this.#r.info, o);
        if (frame === undefined) failure = `unable to encode watch object ${o.key}`;
      } else {
        const e = events![this.#startNext++]!;
        const f = this.#frameOf(e);
        if (f === null) continue;
        frame = f;
        if (frame === undefined) failure = unencodable(e);
      }
      if (frame === undefined) {
        this.#startBytes += bytes;
        this.#endStart();
        this.#queue = undefined;
        this.#queued = 0;
        this.endWith(newInternalError(failure!));
        return batch;
      }
      if (Array.isArray(frame)) {
        for (const p of frame) {
          batch.push(p);
          bytes += p.length;
        }
      } else {
        batch.push(frame);
        bytes += frame.length;
      }
    }
    this.#startBytes += bytes;
    if (this.#startNext >= length) this.#endStart();
    if (events && bytes > 0) noteServed();
    return batch;
  }

  #endStart(): void {
    const written = this.#startWritten;
    this.#initial = undefined;
    this.#backlog = undefined;
    this.#startWritten = undefined;
    written?.(this.#startBytes);
  }

  /** Queues the bookmark that ends a watch-list's initial events. */
  pushInitialEventsEnd(resourceVersion: number): void {
    if (this.#closed) return;
    this.#send(this.#encoding.initialEventsEnd(this.#r.info, resourceVersion));
  }

  /**
   * Before start(): the initial events are queued and the bookmark that ends them waits for
   * endInitialEvents(). Meanwhile the watcher takes live events, sends no other bookmark (the
   * apiserver sends a watch-list none before the one that ends its initial events), and its
   * deadline has not begun: the apiserver counts timeoutSeconds from the start of the watch that
   * follows its wait for a fresh cache.
   */
  awaitInitialEventsEnd(): void {
    this.#initialEventsOpen = true;
  }

  /**
   * Ends the initial events at the store's resourceVersion: every event up to it has been queued
   * already, so the state the client holds at this bookmark is the store's. The deadline and the
   * bookmark times begin now.
   */
  endInitialEvents(): void {
    if (this.#closed || !this.#initialEventsOpen) return;
    this.#initialEventsOpen = false;
    this.#send(this.#encoding.initialEventsEnd(this.#r.info, this.#bookmarkRV()));
    this.#startClock(this.takesBookmarks);
    this.#schedule();
  }

  /** A BOOKMARK at the store's resourceVersion: every event up to it has been queued already. */
  bookmark(): void {
    if (this.#closed || this.#initialEventsOpen) return;
    this.#send(this.#encoding.bookmark(this.#r.info, this.#bookmarkRV()));
  }

  /** Where a bookmark says the client is: the store's resourceVersion, every event up to it queued. */
  #bookmarkRV(): number {
    return Math.max(this.#sentRV, this.#r.store.resourceVersion);
  }

  bookmarkIfAllowed(): void {
    if (this.#nextBookmark !== NONE) this.bookmark();
  }

  wake(now: number): void {
    if (this.#deadline <= now) {
      this.close();
      return;
    }
    if (this.#deadlineBookmark !== NONE && this.#deadlineBookmark <= now) {
      this.#deadlineBookmark = NONE;
      this.bookmark();
    }
    if (this.#nextBookmark !== NONE && this.#nextBookmark <= now) {
      this.#nextBookmark += BOOKMARK_EVERY_MS;
      this.bookmark();
    }
    this.#schedule();
  }

  #schedule(): void {
    if (this.#closed || this.#initialEventsOpen) return;
    let at = this.#deadline;
    if (this.#deadlineBookmark !== NONE && this.#deadlineBookmark < at) at = this.#deadlineBookmark;
    if (this.#nextBookmark !== NONE && this.#nextBookmark < at) at = this.#nextBookmark;
    this.wakeAt = at;
    this.#r.watchers.clock.schedule(this);
  }

  /** Ends the watch cleanly; the client re-watches from the last resourceVersion it received. */
  close(): void {
    if (this.#closed) return;
    this.#stop();
    if (!this.#writing) this.#end();
  }

  /** Sends an ERROR event with this Status after everything queued, then ends the watch. */
  endWith(status: Status): void {
    if (this.#closed || this.#ending) return;
    const line = this.#encoding.error(status);
    (this.#queue ??= []).push(line);
    this.#queued += line.length;
    this.#ending = true;
    if (!this.#writing) void this.#flush();
  }

  /** No more events, bookmarks or wake-ups; what is being written finishes first. */
  #stop(): void {
    this.#closed = true;
    this.#queue = undefined;
    if (this.#initial || this.#backlog) this.#endStart();
    this.#r.watchers.remove(this);
    this.#r.watchers.clock.cancel(this);
  }

  #end(): void {
    this.#res.off('close', closeWatcher);
    watcherOf.delete(this.#res);
    if (!this.#res.destroyed) this.#res.end();
    this.#endedWith = 200;
    const listener = this.#onEnd;
    this.#onEnd = undefined;
    if (listener) queueMicrotask(() => listener(200));
  }

  /** Queues a frame, whole or as its parts; returns its length. */
  #send(frame: Buffer | Buffer[]): number {
    let length = 0;
    if (Array.isArray(frame)) for (const p of frame) length += p.length;
    else length = frame.length;
    if (this.#ending) return length;
    const queue = (this.#queue ??= []);
    if (Array.isArray(frame)) for (const p of frame) queue.push(p);
    else queue.push(frame);
    this.#queued += length;
    if (this.#queued > MAX_QUEUED_BYTES) {
      this.close();
      return length;
    }
    if (!this.#writing) void this.#flush();
    return length;
  }

  async #flush(): Promise<void> {
    this.#writing = true;
    while (!this.#closed) {
      let parts: Buffer[];
      if (this.#initial || this.#backlog) parts = this.#nextStartBatch();
      else if (this.#queue !== undefined) {
        parts = this.#queue;
        this.#queue = undefined;
        this.#queued = 0;
      } else break;
      // A batch of events that all passed this watch by.
      if (parts.length === 0) continue;
      if (!writeParts(this.#res, parts) && !(await drained(this.#res))) {
        this.#stop();
        break;
      }
    }
    this.#writing = false;
    if (this.#ending && !this.#closed) this.#stop();
    if (this.#closed) this.#end();
  }
}
