// Levee's Prometheus metrics, on a private registry so tests and embedded uses stay isolated.
// Names follow Prometheus conventions and mirror kube-apiserver's where the meaning is the same
// (apiserver_request_total, apiserver_request_duration_seconds, apiserver_longrunning_requests).
import type { FlowObserver } from '../flow/flowcontrol.ts';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { readFileSync } from 'node:fs';
import type { Store } from '../store/store.ts';
import { ThreadMetrics } from './threads.ts';
import { collectRuntimeMetrics } from './runtime.ts';

// package.json sits next to src/ and next to dist/ (the image copies it), one level above this folder's parent.
const LEVEE_VERSION = ((): string => {
  try {
    return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: string }).version ?? 'unknown';
  } catch {
    return 'unknown';
  }
})();

export type Source = 'cache' | 'upstream' | 'local';

export interface RequestLabels {
  verb: string;
  group: string;
  resource: string;
  subresource: string;
  source: Source;
}

// The apiserver's request duration buckets (k8s.io/apiserver/pkg/endpoints/metrics).
const DURATION_BUCKETS = [0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45, 60];

// Group and resource come from the request path, which any client can invent. Bounding the
// distinct values keeps a scanner from growing the series count without limit.
const MAX_LABEL_VALUES = 512;

export class GatewayMetrics {
  readonly registry = new Registry();
  readonly requests: Counter<'verb' | 'group' | 'resource' | 'subresource' | 'source' | 'code'>;
  readonly duration: Histogram<'verb' | 'group' | 'resource' | 'subresource' | 'source' | 'code'>;
  readonly longRunning: Gauge<'verb' | 'group' | 'resource' | 'subresource' | 'source'>;
  readonly forwards: Counter<'reason'>;
  readonly cache: CacheMetrics;
  readonly #seen = new Set<string>();
  readonly #threads: ThreadMetrics | undefined;

  /**
   * `threads`: how many threads of the process keep metrics (workers.ts); each scrape adds theirs
   * up. `worker`: this is not the main thread, whose process_ and nodejs_ metrics and build info
   * speak for the process (added up, the process's would count once per thread).
   */
  constructor(opts: { threads?: number; worker?: boolean } = {}) {
    const threads = opts.threads ?? 1;
    if (threads > 1) this.#threads = new ThreadMetrics(this.registry, threads);
    if (!opts.worker) {
      collectRuntimeMetrics(this.registry);
      // As kubernetes_build_info: which Levee and which Node a series came from.
      new Gauge({
        name: 'levee_build_info',
        help: 'Always 1; labelled with the version of Levee and of the Node.js runtime.',
        labelNames: ['version', 'node_version'],
        registers: [this.registry],
      }).set({ version: LEVEE_VERSION, node_version: process.version }, 1);
    }
    this.cache = new CacheMetrics(this.registry);
    this.forwards = new Counter({
      name: 'levee_read_forwarded_total',
      help: 'GET and LIST requests on cached resources that were forwarded upstream, by reason.',
      labelNames: ['reason'],
      registers: [this.registry],
    });
    const labelNames = ['verb', 'group', 'resource', 'subresource', 'source'] as const;
    this.requests = new Counter({
      name: 'levee_request_total',
      help: 'Requests answered, by verb, group, resource, subresource, source (cache, upstream, local) and HTTP code.',
      labelNames: [...labelNames, 'code'],
      registers: [this.registry],
    });
    this.duration = new Histogram({
      name: 'levee_request_duration_seconds',
      help: 'Time to answer a request that is not long-running, from its arrival to the end of the response, by verb, group, resource, subresource, source and HTTP code.',
      labelNames: [...labelNames, 'code'],
      buckets: DURATION_BUCKETS,
      registers: [this.registry],
    });
    this.longRunning = new Gauge({
      name: 'levee_longrunning_requests',
      help: 'Long-running requests (watches, logs, proxies, upgrades) open now.',
      labelNames,
      registers: [this.registry],
    });
  }

  /** The process's metrics in the text format: every thread's, added up. */
  render(): Promise<string> {
    return this.#threads ? this.#threads.metrics() : this.registry.metrics();
  }

  close(): void {
    this.#threads?.close();
  }

  /**
   * Reviews sent upstream, read from the reviewers when scraped: how much authenticating and
   * authorizing clients costs the apiserver (decisions answered from Levee's caches are not sent).
   */
  observeReviews(reviewers: {
    tokens: { sent: number };
    access: { sent: number; allowedLocally: number };
    serviceAccountTokens?: { counts: { verified: number; fallback: Partial<Record<string, number>>; signatures: number } } | undefined;
    reviews: { inFlight: number; queued: number; rejected: number };
  }): void {
    const counterOf = (name: string, help: string, read: () => number): void =>
      void new Counter({
        name,
        help,
        registers: [this.registry],
        collect() {
          this.reset();
          this.inc(read());
        },
      });
    counterOf('levee_token_reviews_total', 'TokenReviews sent upstream to authenticate bearer tokens.', () => reviewers.tokens.sent);
    counterOf('levee_subject_access_reviews_total', 'SubjectAccessReviews sent upstream to authorize requests.', () => reviewers.access.sent);
    counterOf('levee_reviews_rejected_total', 'Reviews (TokenReviews and SubjectAccessReviews) not sent because too many were waiting or one waited too long; the request that needed it got a 429.', () => reviewers.reviews.rejected);
    for (const [name, help, read] of [
      ['levee_reviews_inflight', 'Reviews (TokenReviews and SubjectAccessReviews) on their way upstream now.', () => reviewers.reviews.inFlight],
      ['levee_reviews_inqueue', 'Reviews waiting for one of the seats that bound how many are sent at once.', () => reviewers.reviews.queued],
    ] as const) {
      new Gauge({
        name,
        help,
        registers: [this.registry],
        collect() {
          this.set(read());
        },
      });
    }
    counterOf('levee_authorization_local_rbac_allowed_total', 'Authorization decisions RBAC allowed from Levee\'s cache of roles and bindings, with no review sent.', () => reviewers.access.allowedLocally);
    // Registered with or without the flag, so dashboards and alerts find the series either way.
    const sa = (): { verified: number; fallback: Partial<Record<string, number>>; signatures: number } | undefined => reviewers.serviceAccountTokens?.counts;
    counterOf('levee_serviceaccount_tokens_verified_locally_total', 'Bearer tokens authenticated as service-account tokens by Levee itself, with no TokenReview sent.', () => sa()?.verified ?? 0);
    counterOf('levee_serviceaccount_token_signatures_checked_total', 'Service-account token signatures Levee checked (once per token while it is remembered; the rest of a verification is from memory).', () => sa()?.signatures ?? 0);
    new Counter({
      name: 'levee_serviceaccount_tokens_fallback_total',
      help: 'Bearer tokens Levee could not verify itself and left to a TokenReview (answered from the review cache or sent), by reason.',
      labelNames: ['reason'],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [reason, n] of Object.entries(sa()?.fallback ?? {})) this.inc({ reason }, n ?? 0);
      },
    });
  }

  /**
   * Flow control, per class (long-running, read, mutating) and stage (requests taken by Levee,
   * requests sent upstream): seats in use and queued (read when scraped), wait time, rejections.
   */
  observeFlow(flow: { snapshot(): Array<{ cls: string; stage: string; inFlight: number; queued: number; seats: number }> }): FlowObserver {
    const gauge = (name: string, help: string, read: (s: ReturnType<typeof flow.snapshot>[number]) => number): void =>
      void new Gauge({
        name,
        help,
        labelNames: ['class', 'stage'],
        registers: [this.registry],
        collect() {
          for (const s of flow.snapshot()) this.set({ class: s.cls, stage: s.stage }, read(s));
        },
      });
    gauge('levee_flowcontrol_current_inflight_requests', 'Requests holding a seat, by class and stage (requests: all Levee takes; upstream: forwards).', (s) => s.inFlight);
    gauge('levee_flowcontrol_current_inqueue_requests', 'Requests waiting for a seat, by class and stage.', (s) => s.queued);
    gauge('levee_flowcontrol_seats', 'Seats configured, by class and stage.', (s) => s.seats);
    const wait = new Histogram({
      name: 'levee_flowcontrol_request_wait_duration_seconds',
      help: 'Time requests waited for a seat, by class and stage.',
      labelNames: ['class', 'stage'],
      buckets: [0, 0.001, 0.005, 0.025, 0.1, 0.5, 1, 2.5, 5, 15, 30],
      registers: [this.registry],
    });
    const rejected = new Counter({
      name: 'levee_flowcontrol_rejected_requests_total',
      help: 'Requests answered 429, by class, stage and why (queue-full, timeout, cancelled).',
      labelNames: ['class', 'stage', 'reason'],
      registers: [this.registry],
    });
    return {
      waited: (cls, stage, ms) => wait.observe({ class: cls, stage }, ms / 1000),
      rejected: (cls, stage, why) => rejected.inc({ class: cls, stage, reason: why }),
    };
  }

  /**
   * Upstream protection: reads answered with another identical read's upstream answer (requests
   * the apiserver did not see), and Levee's own requests for discovery and OpenAPI documents by
   * their answer (200 fetched, 304 confirmed unchanged). Discovery answered from the cache counts
   * in levee_request_total with source "cache".
   */
  observeUpstreamProtection(coalescer: { saved: number } | undefined): { fetched(code: number): void } {
    new Counter({
      name: 'levee_upstream_requests_coalesced_total',
      help: 'Reads answered with the upstream answer of an identical read in flight at the same time: upstream requests saved.',
      registers: [this.registry],
      collect() {
        this.reset();
        this.inc(coalescer?.saved ?? 0);
      },
    });
    const fetched = new Counter({
      name: 'levee_discovery_upstream_requests_total',
      help: 'Requests Levee sent upstream to fill or revalidate its discovery and OpenAPI cache, by HTTP code (304: unchanged).',
      labelNames: ['code'],
      registers: [this.registry],
    });
    return { fetched: (code) => fetched.inc({ code: String(code) }) };
  }

  /** The labels for a request, with path-derived values bounded. */
  labels(verb: string, group: string, resource: string, subresource: string, source: Source): RequestLabels {
    return {
      verb,
      group: this.#bounded(group),
      resource: this.#bounded(resource),
      subresource: this.#bounded(subresource),
      source,
    };
  }

  #bounded(value: string): string {
    if (value === '' || this.#seen.has(value)) return value;
    if (this.#seen.size >= MAX_LABEL_VALUES || !/^[a-z0-9.-]{1,253}$/.test(value)) return 'other';
    this.#seen.add(value);
    return value;
  }
}

/** The apiserver's metric verb: the HTTP-ish verb in capitals, WATCH for watches, APPLY for server-side apply. */
export function metricVerb(verb: string, method: string, contentType: string | undefined, upgrade: boolean): string {
  if (upgrade) return 'CONNECT';
  switch (verb) {
    case 'list':
      return 'LIST';
    case 'watch':
      return 'WATCH';
    case 'get':
      return method === 'HEAD' ? 'HEAD' : 'GET';
    case 'create':
      return 'POST';
    case 'update':
      return 'PUT';
    case 'patch':
      return contentType?.startsWith('application/apply-patch') ? 'APPLY' : 'PATCH';
    case 'delete':
    case 'deletecollection':
      return 'DELETE';
    case 'proxy':
      return 'CONNECT';
    default:
      return method.toUpperCase();
  }
}

/** Per cached resource: what the store holds and how its reflector fares. */
export class CacheMetrics {
  readonly #stores = new Map<string, Store>();
  // Counted in plain numbers on the event path and handed to the counter when scraped.
  readonly #events = new Map<string, Record<'ADDED' | 'MODIFIED' | 'DELETED', number>>();
  readonly #watchers = new Map<string, { readonly size: number }>();
  readonly #relists: Counter<'resource'>;
  readonly #restarts: Counter<'resource' | 'reason'>;
  readonly #listSeconds: Histogram<'resource'>;
  readonly #consistentReads: Counter<'resource' | 'result'>;
  readonly #consistentWait: Histogram<'resource'>;
  readonly #consistentBytes: Counter<'resource' | 'source'>;

  constructor(registry: Registry) {
    const stores = this.#stores;
    new Gauge({
      name: 'levee_cache_objects',
      help: 'Objects held in the cache, by resource.',
      labelNames: ['resource'],
      registers: [registry],
      // Reset first: a resource no longer cached (its CRD deleted) must leave no series behind.
      collect() {
        this.reset();
        for (const [resource, store] of stores) this.set({ resource }, store.size);
      },
    });
    new Gauge({
      name: 'levee_cache_bytes',
      help: 'Raw JSON bytes of the objects held in the cache, by resource.',
      labelNames: ['resource'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [resource, store] of stores) this.set({ resource }, store.bytes);
      },
    });
    new Gauge({
      name: 'levee_cache_resource_version',
      help: 'The resourceVersion the cache has seen, by resource.',
      labelNames: ['resource'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [resource, store] of stores) this.set({ resource }, store.resourceVersion);
      },
    });
    const events = this.#events;
    new Counter({
      name: 'levee_watch_cache_events_total',
      help: 'Events the reflectors received from the apiserver\'s watches and applied to the cache, by resource and type (as apiserver_watch_cache_events_received_total).',
      labelNames: ['resource', 'type'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [resource, counts] of events) {
          for (const [type, n] of Object.entries(counts)) this.inc({ resource, type }, n);
        }
      },
    });
    const watchers = this.#watchers;
    new Gauge({
      name: 'levee_watchers',
      help: 'Client watches served from the cache now, by resource.',
      labelNames: ['resource'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [resource, w] of watchers) this.set({ resource }, w.size);
      },
    });
    this.#relists = new Counter({ name: 'levee_reflector_lists_total', help: 'Full lists made by reflectors (initial and relists).', labelNames: ['resource'], registers: [registry] });
    this.#restarts = new Counter({ name: 'levee_reflector_watch_restarts_total', help: 'Reflector watch restarts, by reason (expired window, error).', labelNames: ['resource', 'reason'], registers: [registry] });
    this.#consistentReads = new Counter({
      name: 'levee_consistent_reads_total',
      help: 'Reads without resourceVersion on cached resources: proven fresh and served from the cache, served under the cache policy, forwarded (levee_read_forwarded_total says why), or failed (a watch-list whose initial events went out before the proof, which did not come: ended with a 504).',
      labelNames: ['resource', 'result'],
      registers: [registry],
    });
    this.#consistentWait = new Histogram({
      name: 'levee_consistent_read_wait_seconds',
      help: 'Time a read without resourceVersion waited for the proof that the cache is as new as the apiserver (learning its resourceVersion, then a bookmark), whether it came or not.',
      labelNames: ['resource'],
      // The apiserver's own apiserver_watch_cache_read_wait_seconds buckets.
      buckets: [0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 1.25, 1.5, 2, 3],
      registers: [registry],
    });
    this.#consistentBytes = new Counter({
      name: 'levee_consistent_read_bytes_total',
      help: 'Bytes of the answers to reads without resourceVersion on cached resources, by who gave them: the cache or the apiserver (for a watch, its initial state from the cache, and all it carried when forwarded).',
      labelNames: ['resource', 'source'],
      registers: [registry],
    });
    this.#listSeconds = new Histogram({
      name: 'levee_reflector_list_duration_seconds',
      help: 'Time a reflector took to list a resource.',
      labelNames: ['resource'],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
      registers: [registry],
    });
  }

  consistentRead(resource: string, result: 'verified' | 'cache-policy' | 'forwarded' | 'failed', waitSeconds?: number): void {
    this.#consistentReads.inc({ resource, result });
    if (waitSeconds !== undefined) this.#consistentWait.observe({ resource }, waitSeconds);
  }

  consistentBytes(resource: string, source: 'cache' | 'upstream', bytes: number): void {
    this.#consistentBytes.inc({ resource, source }, bytes);
  }

  /** A worker thread's replica of a resource: only its watchers count here; the owner's store counts the rest once. */
  observeWatchers(resource: string, watchers: { readonly size: number }): void {
    this.#watchers.set(resource, watchers);
  }

  observe(resource: string, store: Store, watchers?: { readonly size: number }): void {
    this.#stores.set(resource, store);
    // A resource cached anew (its CRD changed version) keeps counting where it was.
    const counts = this.#events.get(resource) ?? { ADDED: 0, MODIFIED: 0, DELETED: 0 };
    this.#events.set(resource, counts);
    // Only events from the upstream watch: a relist's differences are counted as a list.
    store.listen({ event: (e) => void counts[e.type]++, replaced: () => undefined, progressed: () => undefined });
    if (watchers) this.#watchers.set(resource, watchers);
  }

  /** The resource is no longer cached (its CRD was deleted): its series end. */
  forget(resource: string): void {
    this.#stores.delete(resource);
    this.#events.delete(resource);
    this.#watchers.delete(resource);
  }

  relisted(resource: string, _objects: number, _bytes: number, seconds: number): void {
    this.#relists.inc({ resource });
    this.#listSeconds.observe({ resource }, seconds);
  }

  watchRestarted(resource: string, reason: string): void {
    this.#restarts.inc({ resource, reason });
  }
}
