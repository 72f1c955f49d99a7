// One client watch served from the cache: which events it receives (namespace, selectors, the
// transitions in and out of them), its queue, and its end. Modelled on the apiserver's
// cache_watcher.go: a bounded buffer, and a watcher that cannot keep up is closed (the client
// re-watches from the last resourceVersion it saw) instead of holding memory without bound.
import type { CachedResource } from '../cache/cache.ts';
import type { FieldSelector } from '../selectors/fields.ts';
import type { LabelSelector } from '../selectors/labels.ts';
import type { StoreEvent } from '../store/events.ts';
import type { CachedObject } from '../store/object.ts';
import { drained, type DownstreamResponse } from '../serve/downstream.ts';
import { bookmarkLine, eventLine, type WatchEventType } from './encode.ts';

export interface WatchFilter {
  namespace: string;
  labels: LabelSelector;
  fields: FieldSelector;
  /** Only events after this resourceVersion. */
  resourceVersion: number;
}

// Past this much unsent data the client is not keeping up.
const MAX_QUEUED_BYTES = 16 * 1024 * 1024;

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

export class CacheWatcher {
  readonly #r: CachedResource;
  readonly #f: WatchFilter;
  readonly #res: DownstreamResponse;
  #queue: Buffer[] = [];
  #queued = 0;
  #writing = false;
  #closed = false;
  /** A last line is queued; nothing more is sent after it. */
  #ending = false;
  #sentRV: number;
  readonly #done: Promise<void>;
  #finish!: () => void;

  readonly #bookmarks: boolean;

  constructor(r: CachedResource, filter: WatchFilter, res: DownstreamResponse, bookmarks = false) {
    this.#bookmarks = bookmarks;
    this.#r = r;
    this.#f = filter;
    this.#res = res;
    this.#sentRV = filter.resourceVersion;
    this.#done = new Promise((resolve) => (this.#finish = resolve));
    res.once('close', () => this.close());
  }

  get done(): Promise<void> {
    return this.#done;
  }

  offer(e: StoreEvent): void {
    if (this.#closed || e.resourceVersion <= this.#f.resourceVersion) return;
    const type = deliveredAs(this.#f, e);
    if (type === undefined) return;
    this.#sentRV = e.resourceVersion;
    this.#send(eventLine(this.#r, e, type));
  }

  /** Queues a line as it is (the initial state, its end bookmark). */
  push(line: Buffer): void {
    if (!this.#closed) this.#send(line);
  }

  /** A BOOKMARK at the store's resourceVersion: every event up to it has been queued already. */
  bookmark(): void {
    if (this.#closed) return;
    const rv = Math.max(this.#sentRV, this.#r.store.resourceVersion);
    this.#send(bookmarkLine(this.#r, rv));
  }

  bookmarkIfAllowed(): void {
    if (this.#bookmarks) this.bookmark();
  }

  /** Ends the watch cleanly; the client re-watches from the last resourceVersion it received. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#queue = [];
    if (!this.#writing) this.#end();
  }

  /** Sends a last line (an ERROR event) after everything queued, then ends the watch. */
  endWith(line: Buffer): void {
    if (this.#closed || this.#ending) return;
    this.#queue.push(line);
    this.#queued += line.length;
    this.#ending = true;
    if (!this.#writing) void this.#flush();
  }

  #end(): void {
    if (!this.#res.destroyed) this.#res.end();
    this.#finish();
  }

  #send(line: Buffer): void {
    if (this.#ending) return;
    this.#queue.push(line);
    this.#queued += line.length;
    if (this.#queued > MAX_QUEUED_BYTES) {
      this.close();
      return;
    }
    if (!this.#writing) void this.#flush();
  }

  async #flush(): Promise<void> {
    this.#writing = true;
    while (this.#queue.length > 0 && !this.#closed) {
      const batch = this.#queue.length === 1 ? this.#queue[0]! : Buffer.concat(this.#queue);
      this.#queue = [];
      this.#queued = 0;
      if (!this.#res.write(batch) && !(await drained(this.#res))) {
        this.#closed = true;
        break;
      }
    }
    this.#writing = false;
    if (this.#ending) this.#closed = true;
    if (this.#closed) this.#end();
  }
}
