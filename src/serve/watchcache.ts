// Serves a WATCH from the cache: the window's events after the client's resourceVersion, then live
// events as the store applies them, bookmarks when asked for, ended at the deadline. Registration
// and the read of the window happen in one turn of the event loop, so no event falls between them.
import type { CachedResource } from '../cache/cache.ts';
import type { FieldSelector } from '../selectors/fields.ts';
import type { LabelSelector } from '../selectors/labels.ts';
import { CacheWatcher } from '../watch/watcher.ts';
import { addedLine, initialEventsEndLine } from '../watch/encode.ts';
import { listLive } from '../store/query.ts';
import type { CachedObject } from '../store/object.ts';
import { CONSISTENT_WAIT_MS, FRESHNESS_WAIT_MS, type ConsistentReadObserver } from './readcache.ts';
import type { DownstreamResponse } from './downstream.ts';

export interface WatchPlan {
  namespace: string;
  labels: LabelSelector;
  fields: FieldSelector;
  /** Events after this resourceVersion; with `initial`, the start is the state's own. */
  resourceVersion: number;
  /**
   * Begin with the current state as ADDED events: as of any time (`any`, resourceVersion 0), as
   * new as the apiserver (`consistent`, unset), or not older than resourceVersion.
   */
  initial?: 'any' | 'consistent' | 'notOlderThan' | undefined;
  /** After the initial state, a BOOKMARK annotated k8s.io/initial-events-end (watch-list). */
  initialEventsEnd: boolean;
  allowBookmarks: boolean;
  timeoutSeconds: number | undefined;
}

// Without timeoutSeconds the apiserver picks a random deadline in [min-request-timeout,
// 2 × min-request-timeout), 30 to 60 min.
const MIN_REQUEST_TIMEOUT_S = 1800;

export interface ServedWatch {
  /** Settles with the status code once the watch has ended. */
  done: Promise<number>;
  /** Ends the watch early with a last line (an ERROR event), after what is already queued. */
  endWith(line: Buffer): void;
}

/**
 * 'forward' when the cache cannot start this watch exactly: the window no longer holds the client's
 * resourceVersion, or the state could not be proven fresh in time (the apiserver may do either).
 */
export async function serveWatch(
  r: CachedResource,
  plan: WatchPlan,
  res: DownstreamResponse,
  arrivedAt: bigint,
  observer: ConsistentReadObserver,
  requestId?: string,
): Promise<'forward' | ServedWatch> {
  if (plan.initial === 'consistent') {
    let rv: number;
    try {
      rv = await r.probe.current(arrivedAt);
    } catch {
      return 'forward';
    }
    if (r.store.resourceVersion < rv && !(await r.store.waitUntilFresh(rv, CONSISTENT_WAIT_MS))) {
      observer.consistentRead(r.name, 'forwarded', 0);
      return 'forward';
    }
    observer.consistentRead(r.name, 'verified', 0);
  } else if (plan.initial === 'notOlderThan' && r.store.resourceVersion < plan.resourceVersion) {
    if (!(await r.store.waitUntilFresh(plan.resourceVersion, FRESHNESS_WAIT_MS))) return 'forward';
  }
  // From here to registration nothing awaits: the state read and the live events join exactly.
  let initial: CachedObject[] = [];
  let from = plan.resourceVersion;
  if (plan.initial) {
    initial = listLive(r.store, { namespace: plan.namespace, labels: plan.labels, fields: plan.fields, limit: 0 }).items;
    from = r.store.resourceVersion;
  }
  const backlog = plan.initial ? [] : r.store.events.since(from);
  if (!backlog) return 'forward';
  const headers: Record<string, string> = { 'content-type': 'application/json', 'cache-control': 'no-cache, private' };
  if (requestId) headers['audit-id'] = flat(requestId);
  res.writeHead(200, headers);
  res.flushHeaders?.();

  const timeoutMs = (plan.timeoutSeconds ?? MIN_REQUEST_TIMEOUT_S * (1 + Math.random())) * 1000;
  const filter = { namespace: plan.namespace, labels: plan.labels, fields: plan.fields, resourceVersion: from };
  const watcher = new CacheWatcher(r, filter, res, { timeoutMs, bookmarks: plan.allowBookmarks });
  for (const o of initial) watcher.push(addedLine(r, o));
  if (plan.initial && plan.initialEventsEnd) watcher.push(initialEventsEndLine(r, from));
  for (const e of backlog) watcher.offer(e);
  watcher.start();
  // The watcher is its own handle (done, endWith): no wrapper object or closure per watch.
  return watcher;
}

/**
 * The same string, flattened in place. A generated request id (randomUUID) is built by
 * concatenation, and V8 keeps such a string as a tree of a dozen pieces, about 450 bytes, until
 * something needs it whole; a watch's response headers keep it for as long as the watch lasts.
 * Measuring its UTF-8 length makes V8 flatten it.
 */
function flat(s: string): string {
  Buffer.byteLength(s);
  return s;
}
