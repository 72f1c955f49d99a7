// Keeps one store in step with the upstream apiserver, as client-go's Reflector does. The initial
// state comes from a watch-list stream (KEP-3157: a consistent watch with sendInitialEvents, which
// sends every object as ADDED, then a bookmark annotated k8s.io/initial-events-end, then goes on as
// an ordinary watch), so no continue tokens are held and no LIST body is buffered. Where the
// upstream does not do watch-list, a paged LIST (consistent first page, later pages at the same
// resourceVersion through continue tokens) then a WATCH from the list's resourceVersion. Either
// way: re-watch from the last resourceVersion seen when a watch ends or breaks; relist only when
// the window is lost (410 Expired/Gone); every retry waits an exponential, jittered backoff. Bodies
// are split into items as bytes while they arrive.
import type { ResourceInfo } from '../api/resource.ts';
import type { Logger } from '../log/logger.ts';
import type { Store } from '../store/store.ts';
import { statusError, UpstreamStatusError } from '../upstream/client.ts';
import type { UpstreamPools } from '../upstream/pools.ts';
import { Backoff } from './backoff.ts';
import { decoder, type Decoder } from './decode.ts';
import { ListBodySplitter } from './jsonsplit.ts';
import { WatchFramer } from './watchframe.ts';
import type { CachedObject } from '../store/object.ts';
import { parseResourceVersion } from '../store/object.ts';
import { rates, reportProgress } from './progress.ts';
import { BookmarkProbes, PROBE_SPACING_MS } from './probes.ts';

export interface UpstreamSelector {
  labelSelector?: string | undefined;
  fieldSelector?: string | undefined;
}

export interface ReflectorHooks {
  relisted?(objects: number, bytes: number, seconds: number): void;
  watchRestarted?(reason: string): void;
}

export interface ReflectorOptions {
  info: ResourceInfo;
  pools: UpstreamPools;
  store: Store;
  logger: Logger;
  selector?: UpstreamSelector | undefined;
  hooks?: ReflectorHooks | undefined;
  /** Page size of the initial LIST (client-go uses 500). */
  pageSize?: number;
  /**
   * How long a watch-list stream may stay silent before the end of its initial events (default
   * 10 s). A server that ignores sendInitialEvents never sends the end bookmark; one that does
   * watch-list streams without pause, however large the resource.
   */
  watchListIdleMs?: number;
  /** How often a sync in progress is logged (default 5 s). */
  progressIntervalMs?: number;
  /** What of each object the store keeps, when not its bytes as received (see decoder). */
  transform?: ((raw: Buffer) => Buffer) | undefined;
  /** Keep objects' bytes in shared memory, for worker threads to serve (see decoder). */
  sharedBytes?: boolean | undefined;
}

/** The window is gone: the only way on is a fresh list. */
class ExpiredError extends Error {}

/** The upstream answered a watch-list request as if it did not know watch-list. */
class WatchListUnsupportedError extends Error {}

// The annotation of the bookmark that ends a watch-list stream's initial events.
const INITIAL_EVENTS_END = 'k8s.io/initial-events-end';

const MAX_ERROR_BODY = 64 * 1024;

/** The deadline of a bookmark probe: the apiserver bookmarks a watch 2 s before its deadline. */
const PROBE_TIMEOUT_SECONDS = 3;

export class Reflector {
  readonly #o: ReflectorOptions;
  readonly #decode: Decoder;
  readonly #abort = new AbortController();
  readonly #backoff = new Backoff();
  readonly #log: Logger;
  #running: Promise<void> | undefined;
  #needList = true;
  /** When bookmark probes begin (bookmarkSoon). */
  readonly #probes: BookmarkProbes;
  /** When the store last took an event (performance.now()): a busy store needs no speculative probe. */
  #lastEventAt = -Infinity;
  // Set once the upstream has shown it does not do watch-list for this resource; every later
  // relist is a paged LIST.
  #watchListUnsupported = false;

  constructor(opts: ReflectorOptions) {
    this.#o = opts;
    this.#decode = decoder(opts.info, opts.transform, opts.sharedBytes);
    this.#log = opts.logger.child({ resource: `${opts.info.resource}${opts.info.group ? `.${opts.info.group}` : ''}` });
    this.#probes = new BookmarkProbes({
      open: () =>
        this.#probe().catch((err: unknown) => {
          this.#log.debug({ err: err instanceof Error ? err.message : String(err) }, 'bookmark probe failed');
        }),
      canProbe: () => this.canProbe,
      busy: () => performance.now() - this.#lastEventAt < PROBE_SPACING_MS,
    });
  }

  /** False once the upstream showed it has no watch-list for this resource. */
  get watchListSupported(): boolean {
    return !this.#watchListUnsupported;
  }

  start(): void {
    this.#running ??= this.#run();
  }

  /** Whether bookmarkSoon can probe now: not while the store is (re)listing, or after stop. */
  get canProbe(): boolean {
    return !this.#needList && this.#o.store.synced && !this.#abort.signal.aborted;
  }

  /**
   * Gets a bookmark to the store soon, whatever the resource is doing: a watch resumed from the
   * store's resourceVersion with a deadline 3 s away, to which the apiserver sends a bookmark 2 s
   * before that deadline, at a bookmark tick (when probes begin: probes.ts). The bookmark carries
   * the apiserver's cache revision, and the watch's events, applied as they come, make the store
   * hold every event up to it. Settles when the next probe does (its bookmark arrived, or it ended
   * without one, or failed: the caller decides what then). A store still listing has nothing to
   * resume from and settles at once.
   */
  bookmarkSoon(): Promise<void> {
    if (!this.canProbe) return Promise.resolve();
    return this.#probes.soon();
  }

  /**
   * Settles once the probe's bookmark has reached the store, or the probe ended without one. The
   * stream is then read to its end, not cut: the apiserver ends it at its deadline, a second or two
   * later, and the connection goes back to the pool. Cut, it was closed, and the next probe waited
   * for a TLS handshake of its own, which takes turns of an event loop that a DaemonSet's agents
   * restarting at once have filled with theirs: the probe reached the apiserver late, and its
   * bookmark with it (bench:massrestart).
   */
  async #probe(): Promise<void> {
    const ac = new AbortController();
    const stop = (): void => ac.abort();
    this.#abort.signal.addEventListener('abort', stop, { once: true });
    let body: { destroy(): unknown } | undefined;
    let watchdog: NodeJS.Timeout | undefined;
    const end = (): void => {
      clearTimeout(watchdog);
      body?.destroy();
      this.#abort.signal.removeEventListener('abort', stop);
    };
    let draining = false;
    try {
      const res = await this.#o.pools.get('own', 'longRunning').request({
        method: 'GET',
        path: this.#query({
          watch: 'true',
          resourceVersion: String(this.#o.store.resourceVersion),
          allowWatchBookmarks: 'true',
          // 2 s before a 2 s deadline is already past when the apiserver registers the watcher,
          // and it then sends no bookmark at all: 3 s is the shortest that gets one.
          timeoutSeconds: String(PROBE_TIMEOUT_SECONDS),
        }),
        headers: await this.#headers(),
        signal: ac.signal,
      });
      body = res.body;
      if (res.statusCode !== 200) {
        const text = (await res.body.text()).slice(0, MAX_ERROR_BODY);
        throw statusError(res.statusCode, text, 'bookmark probe');
      }
      watchdog = setTimeout(stop, (PROBE_TIMEOUT_SECONDS + 5) * 1000);
      const framer = new WatchFramer();
      const chunks = (res.body as AsyncIterable<Buffer>)[Symbol.asyncIterator]();
      for (let next = await chunks.next(); !next.done; next = await chunks.next()) {
        for (const frame of framer.push(next.value)) {
          this.#event(frame.type, frame.object);
          if (frame.type === 'BOOKMARK') {
            // What follows the bookmark the main watch carries too; it is read only to the end.
            draining = true;
            void drain(chunks).finally(end);
            return;
          }
        }
      }
    } catch (err) {
      // A 410 here is the main watch's to handle (it relists); an abort is the end of the probe.
      if (ac.signal.aborted || err instanceof ExpiredError) return;
      throw err;
    } finally {
      if (!draining) end();
    }
  }

  async stop(): Promise<void> {
    this.#probes.stop();
    this.#abort.abort();
    await this.#running;
  }

  async #run(): Promise<void> {
    while (!this.#abort.signal.aborted) {
      try {
        if (this.#needList) {
          if (!this.#watchListUnsupported && (await this.#watchList())) {
            // Synced through watch-list, then the same stream served as the watch until it ended.
            this.#backoff.reset();
            continue;
          }
          await this.#list();
          this.#needList = false;
        }
        await this.#watch(this.#o.store.resourceVersion);
        this.#backoff.reset();
      } catch (err) {
        if (this.#abort.signal.aborted) return;
        if (err instanceof ExpiredError) {
          this.#o.hooks?.watchRestarted?.('expired');
          if (this.#needList) {
            // The relist itself met a 410 (an ERROR event among a watch-list's initial events):
            // list again, after a backoff, so an upstream that keeps answering so is not hammered.
            const wait = this.#backoff.next();
            this.#log.warn({ err: err.message, retryInMs: Math.round(wait) }, 'relist expired, relisting');
            await sleep(wait, this.#abort.signal);
            continue;
          }
          // client-go relists from scratch after 410: the window it knew is compacted away.
          this.#log.info({ err: err.message }, 'watch window lost, relisting');
          this.#needList = true;
          continue;
        }
        const wait = this.#backoff.next();
        this.#o.hooks?.watchRestarted?.('error');
        this.#log.warn({ err: err instanceof Error ? err.message : String(err), retryInMs: Math.round(wait) }, 'reflector error');
        await sleep(wait, this.#abort.signal);
      }
    }
  }

  #query(params: Record<string, string>): string {
    const q = new URLSearchParams(params);
    if (this.#o.selector?.labelSelector) q.set('labelSelector', this.#o.selector.labelSelector);
    if (this.#o.selector?.fieldSelector) q.set('fieldSelector', this.#o.selector.fieldSelector);
    return `${this.#o.pools.upstream.pathPrefix}${this.#o.info.prefix}/${this.#o.info.resource}?${q.toString()}`;
  }

  async #headers(): Promise<Record<string, string>> {
    const creds = await this.#o.pools.upstream.ownCredentials();
    const h: Record<string, string> = { accept: 'application/json', 'user-agent': 'levee' };
    if (creds.authorization) h.authorization = creds.authorization;
    return h;
  }

  async #list(): Promise<void> {
    const started = process.hrtime.bigint();
    const objects: CachedObject[] = [];
    let bytes = 0;
    let cont = '';
    let listRV: number | undefined;
    const pageSize = String(this.#o.pageSize ?? 500);
    const stopProgress = reportProgress(this.#log, 'list', () => ({ objects: objects.length, bytes }), this.#o.progressIntervalMs);
    try {
      for (;;) {
        const params: Record<string, string> = { limit: pageSize };
        if (cont) params.continue = cont;
        const res = await this.#o.pools.get('own', 'request').request({
          method: 'GET',
          path: this.#query(params),
          headers: await this.#headers(),
          signal: this.#abort.signal,
        });
        if (res.statusCode !== 200) {
          const body = (await res.body.text()).slice(0, MAX_ERROR_BODY);
          // An expired continue token: the list must start over to be consistent.
          if (res.statusCode === 410 && cont) {
            objects.length = 0;
            bytes = 0;
            cont = '';
            listRV = undefined;
            continue;
          }
          throw statusError(res.statusCode, body, 'list');
        }
        const splitter = new ListBodySplitter();
        for await (const chunk of res.body as AsyncIterable<Buffer>) {
          for (const raw of splitter.push(chunk)) {
            const o = this.#decode(raw);
            objects.push(o);
            bytes += o.item.length;
          }
        }
        const envelope = splitter.end();
        const rv = parseResourceVersion(envelope.metadata.resourceVersion ?? '');
        if (rv === undefined) throw new Error(`list answered resourceVersion "${envelope.metadata.resourceVersion}"`);
        listRV ??= rv;
        cont = envelope.metadata.continue ?? '';
        if (!cont) break;
      }
    } finally {
      stopProgress();
    }
    this.#o.store.replace(objects, listRV);
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    this.#o.hooks?.relisted?.(objects.length, bytes, seconds);
    this.#log.info(
      { via: 'list', objects: objects.length, bytes, resourceVersion: listRV, seconds: Math.round(seconds * 1000) / 1000, ...rates({ objects: objects.length, bytes }, seconds) },
      'listed',
    );
  }

  /**
   * Syncs the store through a watch-list stream, then consumes the rest of that stream as the
   * watch. Returns false, having stored nothing, when the state must come from a paged LIST
   * instead: like client-go, on any error before the end of the initial events (remembering that
   * the resource has no watch-list when the upstream showed it). Returns true once the stream,
   * after the sync, ends normally. Throws ExpiredError for a 410 before the sync (relist), and any
   * error after the sync as a watch error.
   */
  async #watchList(): Promise<boolean> {
    const started = process.hrtime.bigint();
    const timeoutSeconds = watchTimeoutSeconds();
    let res;
    try {
      res = await this.#o.pools.get('own', 'longRunning').request({
        method: 'GET',
        path: this.#query({
          watch: 'true',
          sendInitialEvents: 'true',
          resourceVersionMatch: 'NotOlderThan',
          allowWatchBookmarks: 'true',
          // Empty: the initial events are a consistent read, as the first page of a LIST is.
          resourceVersion: '',
          timeoutSeconds: String(timeoutSeconds),
        }),
        headers: await this.#headers(),
        signal: this.#abort.signal,
      });
      if (res.statusCode !== 200) {
        const err = statusError(res.statusCode, (await res.body.text()).slice(0, MAX_ERROR_BODY), 'watch-list');
        // Invalid (422) or BadRequest (400): the parameters were refused, as by a server without
        // the WatchList gate (sendInitialEvents forbidden) or older than 1.27 (resourceVersionMatch
        // forbidden on a watch). Anything else (403, 429, 5xx) says nothing about watch-list.
        return this.#fallBack(err, res.statusCode === 400 || res.statusCode === 422);
      }
    } catch (err) {
      if (this.#abort.signal.aborted) throw err;
      return this.#fallBack(err, false);
    }

    const body = res.body;
    // Until the end bookmark the stream must keep moving: the time is measured from the last chunk
    // (or from the answer's headers), not from the start, so a huge resource may stream for long.
    const idleMs = this.#o.watchListIdleMs ?? 10_000;
    const idle = setTimeout(() => {
      body.destroy(new WatchListUnsupportedError(`no end of initial events after ${idleMs} ms of silence: the upstream seems to ignore sendInitialEvents`));
    }, idleMs);
    const watchdog = setTimeout(() => body.destroy(new Error('watch silent past its deadline')), (timeoutSeconds + 60) * 1000);
    // The state being built, by key: after the initial ADDED events and before the end bookmark
    // the apiserver may already send changes newer than its snapshot (client-go applies them to a
    // temporary store too).
    const pending = new Map<string, CachedObject>();
    let changes = 0;
    let received = 0;
    let synced = false;
    const framer = new WatchFramer();
    const stopProgress = reportProgress(this.#log, 'watch-list', () => ({ objects: pending.size, bytes: received }), this.#o.progressIntervalMs);
    try {
      for await (const chunk of body as AsyncIterable<Buffer>) {
        received += chunk.length;
        if (!synced) idle.refresh();
        for (const frame of framer.push(chunk)) {
          if (synced) {
            this.#event(frame.type, frame.object);
            continue;
          }
          if (frame.type === 'MODIFIED' || frame.type === 'DELETED') changes++;
          const endRV = this.#initialEvent(frame.type, frame.object, pending);
          if (endRV === undefined) continue;
          synced = true;
          stopProgress();
          clearTimeout(idle);
          this.#stored(pending.values(), endRV, started, changes);
          pending.clear();
        }
      }
      if (!synced) {
        const seconds = Number(process.hrtime.bigint() - started) / 1e9;
        throw new Error(`watch-list: the stream ended before the end of the initial events (${pending.size} objects, ${received} bytes, ${seconds.toFixed(3)} s)`);
      }
    } catch (err) {
      if (synced || err instanceof ExpiredError || this.#abort.signal.aborted) throw err;
      return this.#fallBack(err, err instanceof WatchListUnsupportedError);
    } finally {
      stopProgress();
      clearTimeout(idle);
      clearTimeout(watchdog);
    }
    return true;
  }

  /** One event before the end of the initial events; returns the list's resourceVersion at the end bookmark. */
  #initialEvent(type: string, raw: Buffer, pending: Map<string, CachedObject>): number | undefined {
    switch (type) {
      case 'ADDED':
      case 'MODIFIED': {
        const o = this.#decode(raw);
        pending.set(o.key, o);
        return undefined;
      }
      case 'DELETED':
        pending.delete(this.#decode(raw).key);
        return undefined;
      case 'BOOKMARK': {
        const meta = (JSON.parse(raw.toString('utf8')) as { metadata?: { resourceVersion?: string; annotations?: Record<string, string> } }).metadata;
        // The apiserver's first bookmark to a watch-list watcher is the annotated one (earlier ones
        // are dropped); a plain bookmark first means a server that ignored sendInitialEvents and is
        // sending an ordinary watch.
        if (meta?.annotations?.[INITIAL_EVENTS_END] !== 'true') {
          throw new WatchListUnsupportedError(`a bookmark without ${INITIAL_EVENTS_END} before the end of the initial events`);
        }
        const rv = parseResourceVersion(meta.resourceVersion ?? '');
        if (rv === undefined) throw new Error(`watch-list: end bookmark with resourceVersion "${meta.resourceVersion}"`);
        return rv;
      }
      default:
        // ERROR (a 410 relists) or unknown: throws.
        this.#event(type, raw);
        return undefined;
    }
  }

  #stored(objects: Iterable<CachedObject>, resourceVersion: number, started: bigint, changes: number): void {
    this.#o.store.replace(objects, resourceVersion);
    this.#needList = false;
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const count = this.#o.store.size;
    const bytes = this.#o.store.bytes;
    this.#o.hooks?.relisted?.(count, bytes, seconds);
    this.#log.info(
      { via: 'watch-list', objects: count, bytes, resourceVersion, changes, seconds: Math.round(seconds * 1000) / 1000, ...rates({ objects: count, bytes }, seconds) },
      'listed',
    );
  }

  #fallBack(err: unknown, unsupported: boolean): false {
    const message = err instanceof Error ? err.message : String(err);
    if (unsupported) {
      this.#watchListUnsupported = true;
      this.#log.warn({ err: message }, 'watch-list not supported for this resource, listing in pages from now on');
    } else {
      this.#log.warn({ err: message }, 'watch-list failed, listing in pages');
    }
    return false;
  }

  async #watch(fromRV: number): Promise<void> {
    const timeoutSeconds = watchTimeoutSeconds();
    const res = await this.#o.pools.get('own', 'longRunning').request({
      method: 'GET',
      path: this.#query({
        watch: 'true',
        resourceVersion: String(fromRV),
        allowWatchBookmarks: 'true',
        timeoutSeconds: String(timeoutSeconds),
      }),
      headers: await this.#headers(),
      signal: this.#abort.signal,
    });
    if (res.statusCode !== 200) {
      const err = statusError(res.statusCode, (await res.body.text()).slice(0, MAX_ERROR_BODY), 'watch');
      if (res.statusCode === 410) throw new ExpiredError(err.message);
      throw err;
    }
    // The body has no timeout (a quiet watch is normal); a watch silent well past its own deadline is dead.
    const watchdog = setTimeout(() => res.body.destroy(new Error('watch silent past its deadline')), (timeoutSeconds + 60) * 1000);
    const framer = new WatchFramer();
    try {
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        for (const frame of framer.push(chunk)) this.#event(frame.type, frame.object);
      }
    } finally {
      clearTimeout(watchdog);
    }
  }

  #event(type: string, raw: Buffer): void {
    switch (type) {
      case 'ADDED':
      case 'MODIFIED':
      case 'DELETED': {
        const o = this.#decode(raw);
        // Two streams may carry the same events (the watch, and a bookmark probe resumed from the
        // store's resourceVersion): each is complete and ordered from where it began, so an event
        // at or below the store's resourceVersion is already in the store.
        if (o.resourceVersion <= this.#o.store.resourceVersion) return;
        this.#lastEventAt = performance.now();
        this.#o.store.apply(type, o);
        return;
      }
      case 'BOOKMARK': {
        const meta = (JSON.parse(raw.toString('utf8')) as { metadata?: { resourceVersion?: string } }).metadata;
        const rv = parseResourceVersion(meta?.resourceVersion ?? '');
        if (rv !== undefined) this.#o.store.bookmark(rv);
        return;
      }
      case 'ERROR': {
        const status = JSON.parse(raw.toString('utf8')) as { code?: number; reason?: string; message?: string };
        if (status.code === 410) throw new ExpiredError(status.message ?? 'expired');
        throw new UpstreamStatusError(status.code ?? 500, status.reason ?? '', `watch: ${status.message ?? 'error event'}`);
      }
      default:
        throw new Error(`watch: unknown event type ${type}`);
    }
  }
}

// client-go asks for a random 5–10 minute watch; the apiserver ends it, the reflector re-watches.
function watchTimeoutSeconds(): number {
  return 300 + Math.floor(Math.random() * 300);
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(t);
        resolve();
      },
      { once: true },
    );
  });
}

/** Reads a stream to its end, its chunks unused; an error (an abort, a reset) ends it too. */
async function drain(chunks: AsyncIterator<Buffer>): Promise<void> {
  try {
    while (!(await chunks.next()).done);
  } catch {
    // The connection is closed rather than reused; nothing else depends on it.
  }
}
