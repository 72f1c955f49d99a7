// Levee's own state for an operator, as JSON under /debug/levee/: per cached resource the objects,
// bytes, resourceVersion, event window and watchers. Only after authentication, and only for users
// the apiserver allows to get the path (a SubjectAccessReview with nonResourceAttributes, as the
// apiserver guards its own /debug paths: RBAC `nonResourceURLs: ["/debug/levee/*"]`). Every other
// /debug path belongs to the apiserver and is forwarded.
import { threadId } from 'node:worker_threads';
import { newInternalError } from '../api/status.ts';
import type { Credential } from '../auth/authenticate.ts';
import type { AccessGuard } from '../auth/guard.ts';
import type { CacheView, CachedResource } from '../cache/view.ts';
import type { DownstreamResponse } from '../http/downstream.ts';
import { writeStatus, writeText } from '../http/respond.ts';

const PREFIX = '/debug/levee/';

/** Whether Levee answers this request itself, as a debug endpoint. */
export function isDebugRequest(method: string | undefined, path: string): boolean {
  return method === 'GET' && path.startsWith(PREFIX);
}

export interface ResourceState {
  resource: string;
  group: string;
  version: string;
  namespaced: boolean;
  synced: boolean;
  objects: number;
  bytes: number;
  resourceVersion: string;
  /** The events kept for watches that resume from a resourceVersion. */
  window: { events: number; resumableFrom: string; oldestEventAgeSeconds: number | null };
  watchers: number;
  watchList: boolean;
  consistentReads: string;
  indexes: string[];
  selector?: { fieldSelector?: string; labelSelector?: string };
}

export interface CacheState {
  /** The thread that answered: 0 for the main thread, which owns the cache; others serve replicas of it. */
  thread: number;
  resources: ResourceState[];
  /** Resources not answered from memory yet, and why. */
  unsynced: string[];
  /** Configured resources that do not exist now (a CRD not created yet, or deleted): they do not hold readiness. */
  waiting: string[];
}

export function resourceState(r: CachedResource, now = Date.now()): ResourceState {
  const oldest = r.store.events.oldest;
  const state: ResourceState = {
    resource: r.name,
    group: r.info.group,
    version: r.info.version,
    namespaced: r.info.namespaced,
    synced: r.store.synced,
    objects: r.store.size,
    bytes: r.store.bytes,
    resourceVersion: String(r.store.resourceVersion),
    window: {
      events: r.store.events.size,
      resumableFrom: String(r.store.events.resumableFrom),
      oldestEventAgeSeconds: oldest ? Math.round(now - oldest.at) / 1000 : null,
    },
    watchers: r.watchers.size,
    watchList: r.reflector.watchListSupported,
    consistentReads: r.consistentReads,
    indexes: [...r.store.indexedFields],
  };
  if (r.selection) {
    state.selector = {};
    if (r.selection.fieldSelector) state.selector.fieldSelector = r.selection.fieldSelector;
    if (r.selection.labelSelector) state.selector.labelSelector = r.selection.labelSelector;
  }
  return state;
}

export function cacheState(cache: CacheView | undefined): CacheState {
  if (!cache) return { thread: threadId, resources: [], unsynced: [], waiting: [] };
  return {
    thread: threadId,
    resources: cache.resources.map((r) => resourceState(r)).sort((a, b) => a.resource.localeCompare(b.resource)),
    unsynced: cache.unsynced(),
    waiting: cache.waiting(),
  };
}

/**
 * Answers a debug request (isDebugRequest) once the user may get its path; resolves with the
 * status code sent.
 */
export async function serveDebug(
  path: string,
  res: DownstreamResponse,
  credential: Credential,
  guard: AccessGuard,
  cache: CacheView | undefined,
): Promise<number> {
  const admission = await guard.admit(credential, { verb: 'get', path });
  if (admission.allowed === false) {
    writeStatus(res, admission.status);
    return admission.status.code;
  }
  if (admission.allowed === 'undecided') {
    // The apiserver answers a failed authorization with a 500, and there is no one to forward to.
    const status = newInternalError(`the request for ${path} could not be authorized`);
    writeStatus(res, status);
    return status.code;
  }
  const rest = path.slice(PREFIX.length).replace(/\/+$/, '');
  let body: unknown;
  if (rest === 'cache') {
    body = cacheState(cache);
  } else if (rest.startsWith('cache/')) {
    const name = rest.slice('cache/'.length);
    const r = cache?.resources.find((c) => c.name === name);
    if (r) body = resourceState(r);
  }
  if (body === undefined) {
    // What the apiserver answers for a path it does not serve.
    writeText(res, 404, '404 page not found\n');
    return 404;
  }
  writeText(res, 200, JSON.stringify(body, null, 2) + '\n', 'application/json');
  return 200;
}
