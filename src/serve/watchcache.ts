// Serves a WATCH from the cache: the window's events after the client's resourceVersion, then live
// events as the store applies them, bookmarks when asked for, ended at the deadline. Registration
// and the read of the window happen in one turn of the event loop, so no event falls between them.
import type { CachedResource } from '../cache/cache.ts';
import type { FieldSelector } from '../selectors/fields.ts';
import type { LabelSelector } from '../selectors/labels.ts';
import { CacheWatcher } from '../watch/watcher.ts';
import type { DownstreamResponse } from './downstream.ts';

export interface WatchPlan {
  namespace: string;
  labels: LabelSelector;
  fields: FieldSelector;
  resourceVersion: number;
  allowBookmarks: boolean;
  timeoutSeconds: number | undefined;
}

// The apiserver's defaults: a bookmark about every minute and 2 s before the deadline; without
// timeoutSeconds a random deadline in [min-request-timeout, 2 × min-request-timeout), 30 to 60 min.
const BOOKMARK_EVERY_MS = 60_000;
const BOOKMARK_BEFORE_DEADLINE_MS = 2_000;
const MIN_REQUEST_TIMEOUT_S = 1800;

/** 'forward' when the window no longer holds the client's resourceVersion: the apiserver may. */
export function serveWatch(r: CachedResource, plan: WatchPlan, res: DownstreamResponse, requestId?: string): 'forward' | Promise<number> {
  const backlog = r.store.events.since(plan.resourceVersion);
  if (!backlog) return 'forward';
  const headers: Record<string, string> = { 'content-type': 'application/json', 'cache-control': 'no-cache, private' };
  if (requestId) headers['audit-id'] = requestId;
  res.writeHead(200, headers);
  res.flushHeaders?.();

  const watcher = new CacheWatcher(r, plan, res);
  for (const e of backlog) watcher.offer(e);
  const unlisten = r.store.listen({
    event: (e) => watcher.offer(e),
    // A relist broke the history this watch continues; the client re-watches and learns.
    replaced: () => watcher.close(),
    progressed: () => undefined,
  });

  const timeoutMs = (plan.timeoutSeconds ?? MIN_REQUEST_TIMEOUT_S * (1 + Math.random())) * 1000;
  const timers: NodeJS.Timeout[] = [setTimeout(() => watcher.close(), timeoutMs)];
  if (plan.allowBookmarks) {
    timers.push(setInterval(() => watcher.bookmark(), BOOKMARK_EVERY_MS));
    if (timeoutMs > BOOKMARK_BEFORE_DEADLINE_MS) timers.push(setTimeout(() => watcher.bookmark(), timeoutMs - BOOKMARK_BEFORE_DEADLINE_MS));
  }
  return watcher.done.then(() => {
    unlisten();
    for (const t of timers) clearTimeout(t);
    return 200;
  });
}
