// Serves a WATCH from the cache: the window's events after the client's resourceVersion, then live
// events as the store applies them, bookmarks when asked for, ended at the deadline. Registration
// and the read of the window happen in one turn of the event loop, so no event falls between them.
import type { CachedResource } from '../cache/cache.ts';
import { CacheWatcher } from '../watch/watcher.ts';
import { JSON_WATCH, type WatchEncoding } from '../watch/encode.ts';
import { PROTOBUF_METADATA_WATCH, PROTOBUF_OBJECT_WATCH } from '../watch/protobuf.ts';
import { JSON_METADATA_WATCH } from '../watch/metadata.ts';
import { tableWatch } from '../watch/table.ts';
import type { Status } from '../api/types.ts';
import type { Representation } from '../api/negotiation.ts';
import { listLive } from '../store/query.ts';
import type { CachedObject } from '../store/object.ts';
import { prove, type ConsistentReadObserver, type Proof, type Stale } from './freshness.ts';
import { newTimeout, newTooLargeResourceVersion } from '../api/status.ts';
import type { DownstreamResponse } from '../http/downstream.ts';
import type { WatchPlan } from './decide.ts';

// Without timeoutSeconds the apiserver picks a random deadline in [min-request-timeout,
// 2 × min-request-timeout), 30 to 60 min.
const MIN_REQUEST_TIMEOUT_S = 1800;

export interface ServedWatch {
  /** Calls `listener` with the status code once the watch has ended. */
  whenEnded(listener: (code: number) => void): void;
  /** Ends the watch early with an ERROR event carrying this Status, after what is already queued. */
  endWith(status: Status): void;
}

/**
 * A reason to forward when the cache cannot start this watch exactly: the window no longer holds
 * the client's resourceVersion, or the state could not be proven fresh in time (the apiserver may
 * do either). A consistent watch-list is answered at once instead, and ended with the apiserver's
 * 504 if its proof does not come.
 */
export async function serveWatch(
  r: CachedResource,
  plan: WatchPlan,
  res: DownstreamResponse,
  arrivedAt: bigint,
  observer: ConsistentReadObserver,
  requestId?: string,
): Promise<{ forward: Stale | 'window-expired' | 'representation' } | ServedWatch> {
  // A consistent watch-list that ends its initial events with a bookmark does not wait for the
  // proof: its initial events go out at once, from the store as it is, the watcher takes the
  // events that follow, and only the end bookmark waits until the store holds the resourceVersion
  // the proof asks for. What the client holds at that bookmark is the store's state there, as new
  // as a consistent read must be; client-go applies every event before it, as the apiserver also
  // sends changes between a watch-list's initial events and its end bookmark (cache_watcher.go,
  // process). The wait for the bookmark probe (about a second) then overlaps the writing of the
  // initial events instead of preceding it (docs/design.md, "Consistent reads").
  let proving: Promise<Proof> | undefined;
  if (plan.initial) {
    const freshness =
      plan.initial === 'notOlderThan' ? { mode: plan.initial, resourceVersion: plan.resourceVersion } : { mode: plan.initial };
    // Only a consistent one: a resourceVersion ahead of the store (NotOlderThan) is rare and, when
    // the store does not get there in time, better forwarded than ended with an error.
    const early = plan.initial === 'consistent' && plan.initialEventsEnd;
    const proof = prove(r, freshness, plan.consistentRead === true, arrivedAt, observer, early);
    if (proof instanceof Promise && early) proving = proof;
    else {
      const proven = await proof;
      if (!proven.fresh) return { forward: proven.stale };
    }
  }
  // From here to registration nothing awaits: the state read and the live events join exactly.
  let initial: CachedObject[] = [];
  let from = plan.resourceVersion;
  if (plan.initial) {
    initial = listLive(r.store, { namespace: plan.namespace, labels: plan.labels, fields: plan.fields, limit: 0 }).items;
    from = r.store.resourceVersion;
  }
  const backlog = plan.initial ? [] : r.store.events.since(from);
  if (!backlog) return { forward: 'window-expired' };
  const encoding = watchEncoding(plan.representation);
  if (!encoding) return { forward: 'representation' };
  const headers: Record<string, string> = { 'content-type': encoding.contentType, 'cache-control': 'no-cache, private' };
  if (requestId) headers['audit-id'] = flat(requestId);
  res.writeHead(200, headers);
  res.flushHeaders?.();

  const timeoutMs = (plan.timeoutSeconds ?? MIN_REQUEST_TIMEOUT_S * (1 + Math.random())) * 1000;
  const filter = { namespace: plan.namespace, labels: plan.labels, fields: plan.fields, resourceVersion: from };
  const watcher = new CacheWatcher(r, filter, res, { timeoutMs, bookmarks: plan.allowBookmarks }, encoding);
  const counted = plan.initial === 'consistent' || plan.consistentRead;
  watcher.sendInitial(initial, counted ? (bytes) => observer.consistentBytes(r.name, 'cache', bytes) : undefined);
  if (proving) watcher.awaitInitialEventsEnd();
  else if (plan.initial && plan.initialEventsEnd) watcher.pushInitialEventsEnd(from);
  watcher.sendBacklog(backlog);
  watcher.start();
  if (proving) {
    void proving.then((proven) => {
      if (proven.fresh) watcher.endInitialEvents();
      // The apiserver's answer when its cache does not reach a resourceVersion in time; the
      // client starts again (client-go after a second), as it would from the apiserver.
      else if (proven.wanted !== undefined) watcher.endWith(newTooLargeResourceVersion(proven.wanted, r.store.resourceVersion));
      else watcher.endWith(newTimeout('the apiserver\'s current resourceVersion could not be learned'));
    });
  }
  // The watcher is its own handle (whenEnded, endWith): no wrapper object or closure per watch.
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

/** How the watch writes its events, for the representation negotiated; undefined: not by the cache. */
function watchEncoding(rep: Representation): WatchEncoding | undefined {
  if (rep.as === 'object') return rep.media === 'json' ? JSON_WATCH : PROTOBUF_OBJECT_WATCH;
  // Each Table watch has an encoding of its own: it sends the columns once.
  if (rep.as === 'Table') return tableWatch(rep);
  if (rep.as === 'PartialObjectMetadata') return (rep.media === 'protobuf' ? PROTOBUF_METADATA_WATCH : JSON_METADATA_WATCH)[rep.version];
  return undefined;
}
