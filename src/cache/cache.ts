// The cached resources of one Levee: for each, what the apiserver says about it, its store and its
// reflector. Built-in resources are resolved through discovery; custom resources (named, or
// matched by a pattern) follow their CustomResourceDefinitions (definitions.ts) through their
// lifecycle: cached once they exist, restarted when their CRD changes, dropped when it goes.
//
// Readiness: Levee is ready once every configured resource that exists has been listed. A
// resource that does not exist (a CRD not created yet, an API the apiserver does not serve) is
// reported as waiting for the resource to exist and does not hold readiness; neither do resources
// that appear, change or go after Levee became ready (their reads are forwarded until their cache
// has synced). What cannot be cached at all (no list or watch, a selector the resource cannot
// select by) holds readiness until fixed.
import type { Logger } from '../log/logger.ts';
import type { CacheMetrics } from '../metrics/metrics.ts';
import { Reflector } from '../reflector/reflector.ts';
import { Store } from '../store/store.ts';
import type { UpstreamPools } from '../upstream/pools.ts';
import { Backoff } from '../reflector/backoff.ts';
import type { ConsistentReads } from '../api/consistency.ts';
import { ConsistencyProof, listRevision } from './consistency.ts';
import { WatcherRegistry } from '../watch/registry.ts';
import type { Selection } from './selection.ts';
import { parseFieldSelector } from '../selectors/fields.ts';
import { parseLabelSelector } from '../selectors/labels.ts';
import { builtinFields, convertFieldSelector } from '../selectors/selectable.ts';
import { discover, NotCacheableError, NotServedError } from './resources.ts';
import { fieldsOfResource, type ResourceInfo } from '../api/resource.ts';
import { isPattern, matchesPattern, parsePattern, parseResourceSpec, resourceName, type ResourcePattern, type ResourceSpec } from './names.ts';
import { Definitions, DEFINITIONS_NAME, resolveDefinition, WAITING_TO_EXIST } from './definitions.ts';
import type { CachedResource, CacheView } from './view.ts';

export type { CachedResource, CacheView };

/** The consistent-read policy: a default and overrides by resource name (as --cache names them). */
export interface ConsistentReadPolicy {
  default: ConsistentReads;
  byResource: Record<string, ConsistentReads>;
}

/** Per resource (by the name --cache resolves to): an upstream selector and extra field indexes. */
export interface ResourceOptions {
  fieldSelector?: string;
  labelSelector?: string;
  indexes?: string[];
}

// The apiserver indexes pods by spec.nodeName (its only trigger index); Levee does the same by
// default, and indexes nodes by name: every node agent's informer lists and watches its own Node
// with fieldSelector=metadata.name, which would otherwise scan every node for each agent.
const DEFAULT_FIELD_INDEXES: Record<string, readonly string[]> = { pods: ['spec.nodeName'], nodes: ['metadata.name'] };

// How often discovery asks again for a built-in resource the apiserver does not serve (an API
// not enabled yet, an apiserver being upgraded).
const REDISCOVERY_MS = 60_000;

/** Whether a name is a custom resource's: one Levee does not know as built-in, in a group with a dot (as every CRD's). */
function isCustom(spec: ResourceSpec): boolean {
  return spec.group.includes('.') && builtinFields(spec.group, spec.resource) === undefined;
}

/** Told when a resource starts and stops being cached (the feed to worker threads follows it). */
export interface CacheObserver {
  running(r: CachedResource): void;
  dropped(r: CachedResource): void;
}

export interface CacheOptions {
  /** Keep objects' bytes in shared memory, for worker threads to serve. */
  sharedBytes?: boolean | undefined;
}

export class Cache implements CacheView {
  readonly #byGroupResource = new Map<string, CachedResource>();
  readonly #pools: UpstreamPools;
  readonly #logger: Logger;
  readonly #metrics: CacheMetrics;
  readonly #policy: ConsistentReadPolicy;
  readonly #resourceOptions: Record<string, ResourceOptions>;
  /** Built-in resources, as named, resolved through discovery. */
  readonly #builtin: string[] = [];
  /** Custom resources named exactly, by CRD name (plural.group), with the version the name pins ('' for none). */
  readonly #custom = new Map<string, string>();
  readonly #patterns: ResourcePattern[] = [];
  /** Built-in names whose discovery has not answered yet. */
  readonly #discovering = new Set<string>();
  /** Cannot be cached as configured: holds readiness. */
  readonly #failed = new Map<string, string>();
  /** Configured, but the apiserver does not serve it now. */
  readonly #waiting = new Map<string, string>();
  /** Running custom resources: CRD name -> the signature of what they were started on. */
  readonly #customRunning = new Map<string, string>();
  readonly #stopping = new Set<Promise<void>>();
  readonly #abort = new AbortController();
  readonly #observers = new Set<CacheObserver>();
  readonly #sharedBytes: boolean;
  #definitions: Definitions | undefined;
  #watchesEnded = false;
  #startedAt = 0;
  #ready = false;

  constructor(
    pools: UpstreamPools,
    specs: string[],
    logger: Logger,
    metrics: CacheMetrics,
    policy: ConsistentReadPolicy = { default: 'verify', byResource: {} },
    resourceOptions: Record<string, ResourceOptions> = {},
    options: CacheOptions = {},
  ) {
    this.#sharedBytes = options.sharedBytes ?? false;
    this.#policy = policy;
    this.#resourceOptions = resourceOptions;
    this.#pools = pools;
    this.#logger = logger;
    this.#metrics = metrics;
    for (const spec of specs) {
      try {
        if (isPattern(spec)) {
          this.#patterns.push(parsePattern(spec));
          continue;
        }
        const parsed = parseResourceSpec(spec);
        if (isCustom(parsed)) this.#custom.set(resourceName(parsed), parsed.version);
        else this.#builtin.push(spec);
      } catch (err) {
        this.#failed.set(spec, (err as Error).message);
      }
    }
  }

  /**
   * Resolves every resource and starts its reflector, in the background: requests are forwarded
   * until a resource has synced, and an apiserver that is not there yet is retried with backoff.
   */
  start(): void {
    this.#startedAt = performance.now();
    for (const [spec, why] of this.#failed) this.#logger.error({ resource: spec, err: why }, 'cannot cache resource');
    for (const spec of this.#builtin) void this.#startBuiltin(spec);
    if (this.#custom.size > 0 || this.#patterns.length > 0) {
      this.#definitions = new Definitions({ pools: this.#pools, logger: this.#logger, metrics: this.#metrics, changed: () => this.#followDefinitions() });
      this.#definitions.start();
    }
  }

  /** Becomes ready when it can, and logs, once, how long that took: the time to ready. */
  #checkReady(): void {
    if (this.#ready || !this.#everythingListed()) return;
    this.#ready = true;
    const seconds = (performance.now() - this.#startedAt) / 1000;
    let objects = 0;
    let bytes = 0;
    for (const r of this.resources) {
      objects += r.store.size;
      bytes += r.store.bytes;
    }
    this.#logger.info({ resources: this.resources.length, objects, bytes, seconds: Math.round(seconds * 1000) / 1000 }, 'cache synced: every resource listed, ready');
  }

  async #startBuiltin(spec: string): Promise<void> {
    const backoff = new Backoff();
    const parsed = parseResourceSpec(spec);
    const name = resourceName(parsed);
    this.#discovering.add(spec);
    let info: ResourceInfo;
    for (;;) {
      if (this.#abort.signal.aborted) return;
      try {
        info = await discover(this.#pools, parsed);
        break;
      } catch (err) {
        if (err instanceof NotServedError) {
          // Not an error of Levee's configuration: the resource may exist later.
          if (!this.#waiting.has(name)) this.#logger.warn({ resource: spec, err: err.message }, 'resource not served by the apiserver; waiting for it to exist');
          this.#waiting.set(name, `${WAITING_TO_EXIST} (${err.message})`);
          this.#discovering.delete(spec);
          await sleep(REDISCOVERY_MS, this.#abort.signal);
          continue;
        }
        if (err instanceof NotCacheableError) {
          this.#discovering.delete(spec);
          this.#failed.set(spec, err.message);
          this.#logger.error({ resource: spec, err: err.message }, 'cannot cache resource');
          return;
        }
        const wait = backoff.next();
        this.#logger.warn({ resource: spec, err: err instanceof Error ? err.message : String(err), retryInMs: Math.round(wait) }, 'discovery failed');
        await sleep(wait, this.#abort.signal);
      }
    }
    this.#waiting.delete(name);
    this.#discovering.delete(spec);
    if (this.#abort.signal.aborted) return;
    this.#run(info);
  }

  /** Starts caching a resource; false when it cannot be cached as configured. */
  #run(info: ResourceInfo): boolean {
    const name = resourceName(info);
    const options = this.#resourceOptions[name] ?? {};
    let selection: Selection | undefined;
    try {
      selection = resolveSelection(info, options);
    } catch (err) {
      this.#failed.set(name, (err as Error).message);
      this.#logger.error({ resource: name, err: (err as Error).message }, 'cannot cache resource');
      return false;
    }
    this.#failed.delete(name);
    const store = new Store({ fieldIndexes: fieldIndexesFor(info, options) });
    const selector = upstreamSelector(selection);
    const reflector = new Reflector({
      info,
      pools: this.#pools,
      store,
      logger: this.#logger,
      selector,
      sharedBytes: this.#sharedBytes,
      hooks: {
        relisted: (objects, bytes, seconds) => {
          this.#metrics.relisted(name, objects, bytes, seconds);
          this.#checkReady();
        },
        watchRestarted: (reason) => this.#metrics.watchRestarted(name, reason),
      },
    });
    const resource = cachedResource(this.#pools, { name, info, store, reflector, selection, consistentReads: this.#consistentReads(name) }, this.#watchesEnded);
    this.#byGroupResource.set(`${info.group}/${info.resource}`, resource);
    this.#metrics.observe(name, store, resource.watchers);
    for (const o of this.#observers) o.running(resource);
    reflector.start();
    return true;
  }

  /** Tells `o` of every resource cached now and from now on, and of each one dropped. */
  observe(o: CacheObserver): () => void {
    this.#observers.add(o);
    for (const r of this.resources) o.running(r);
    return () => this.#observers.delete(o);
  }

  /**
   * Stops caching a resource, as the apiserver tears down a custom resource's storage: requests are
   * the apiserver's to answer from now on, and watches served from this cache end (their clients
   * watch again, through Levee to the apiserver or to the resource's new cache).
   */
  #drop(r: CachedResource): void {
    this.#byGroupResource.delete(`${r.info.group}/${r.info.resource}`);
    r.watchers.endAll();
    this.#metrics.forget(r.name);
    for (const o of this.#observers) o.dropped(r);
    const stopped = r.reflector.stop().finally(() => this.#stopping.delete(stopped));
    this.#stopping.add(stopped);
  }

  /** After any change of the CRDs: start, restart or drop each custom resource to match them. */
  #followDefinitions(): void {
    const defs = this.#definitions;
    if (!defs || this.#abort.signal.aborted) return;
    const names = new Set([...this.#custom.keys(), ...this.#customRunning.keys()]);
    for (const def of defs.all()) if (this.#patterns.some((p) => matchesPattern(p, def.group, def.plural))) names.add(def.name);
    for (const name of names) {
      const def = defs.get(name);
      const wanted = this.#custom.has(name) || (def !== undefined && this.#patterns.some((p) => matchesPattern(p, def.group, def.plural)));
      const running = this.#customRunning.has(name) ? this.#byCrdName(name) : undefined;
      if (!wanted) {
        if (running) this.#stopCustom(name, running, 'no longer matched');
        this.#waiting.delete(name);
        continue;
      }
      const resolved = resolveDefinition(name, def, this.#custom.get(name) ?? '');
      if ('waiting' in resolved) {
        if (running) this.#stopCustom(name, running, resolved.waiting);
        this.#waiting.set(name, resolved.waiting);
        this.#failed.delete(name);
        continue;
      }
      this.#waiting.delete(name);
      if (running && this.#customRunning.get(name) === resolved.signature) continue;
      if (running) this.#stopCustom(name, running, 'its CustomResourceDefinition changed');
      this.#logger.info({ resource: name, version: resolved.info.version, selectableFields: [...(resolved.info.selectableFields?.selectable ?? [])] }, running ? 'caching custom resource anew' : 'caching custom resource');
      if (this.#run(resolved.info)) this.#customRunning.set(name, resolved.signature);
    }
    this.#checkReady();
  }

  #byCrdName(name: string): CachedResource | undefined {
    const dot = name.indexOf('.');
    return this.#byGroupResource.get(`${name.slice(dot + 1)}/${name.slice(0, dot)}`);
  }

  #stopCustom(name: string, r: CachedResource, why: string): void {
    this.#logger.info({ resource: name, why }, 'stopped caching custom resource');
    this.#customRunning.delete(name);
    this.#drop(r);
  }

  /** Why each configured resource is not answered from memory, for /debug/levee/cache; empty when all are. */
  unsynced(): string[] {
    const out = [...this.#failed].map(([spec, why]) => `${spec}: ${why}`);
    for (const [name, why] of this.#waiting) out.push(`${name}: ${why}`);
    for (const spec of this.#discovering) out.push(`${spec}: not discovered yet`);
    if (this.#definitions && !this.#definitions.synced) {
      out.push(`${DEFINITIONS_NAME}: not synced yet (needed to find the custom resources to cache)`);
      for (const name of this.#custom.keys()) out.push(`${name}: not discovered yet`);
    }
    for (const r of this.resources) if (!r.store.synced) out.push(`${r.name}: not synced yet`);
    return out;
  }

  /** The configured resources that do not exist now. */
  waiting(): string[] {
    return [...this.#waiting.keys()].sort();
  }

  #consistentReads(name: string): ConsistentReads {
    return this.#policy.byResource[name] ?? this.#policy.default;
  }

  lookup(group: string, resource: string): CachedResource | undefined {
    return this.#byGroupResource.get(`${group}/${resource}`);
  }

  get resources(): CachedResource[] {
    return [...this.#byGroupResource.values()];
  }

  /**
   * Ready: every configured resource that exists has been listed (see the top of this file). Once
   * true it stays true: resources that come, change or go later do not take Levee out of service.
   */
  get synced(): boolean {
    this.#checkReady();
    return this.#ready;
  }

  #everythingListed(): boolean {
    return (
      this.#failed.size === 0 &&
      this.#discovering.size === 0 &&
      (this.#definitions?.synced ?? true) &&
      this.resources.every((r) => r.store.synced)
    );
  }

  /** Ends every watch served from the cache, and any begun from now on (shutdown). */
  endWatches(): void {
    this.#watchesEnded = true;
    for (const r of this.resources) r.watchers.endAll();
  }

  async stop(): Promise<void> {
    this.#abort.abort();
    await Promise.all([...this.resources.map((r) => r.reflector.stop()), this.#definitions?.stop(), ...this.#stopping]);
  }
}

/**
 * A cached resource around its store and reflector (the owner's, or a replica's view of it): the
 * proof of freshness asks upstream with the reflector's own selection, and watches opened after
 * shutdown began end at once.
 */
export function cachedResource(
  pools: UpstreamPools,
  r: Pick<CachedResource, 'name' | 'info' | 'store' | 'reflector' | 'selection' | 'consistentReads'>,
  watchesEnded: boolean,
): CachedResource {
  const watchers = new WatcherRegistry(r.store);
  if (watchesEnded) watchers.endAll();
  return { ...r, consistency: new ConsistencyProof(listRevision(pools, r.info, upstreamSelector(r.selection)), r.store, r.reflector), watchers };
}

/** The selector a reflector lists and watches with, from the configured selection. */
function upstreamSelector(selection: Selection | undefined): { labelSelector: string; fieldSelector: string } | undefined {
  return selection ? { labelSelector: selection.labelSelector, fieldSelector: selection.fieldSelector } : undefined;
}

/** The fields a resource's store indexes: the defaults for a built-in one and those configured. */
export function fieldIndexesFor(info: ResourceInfo, options: ResourceOptions): string[] {
  return [...new Set([...(info.group === '' ? (DEFAULT_FIELD_INDEXES[info.resource] ?? []) : []), ...(options.indexes ?? [])])];
}

/** The upstream selection of a resource, checked against what the apiserver lets it select. */
export function resolveSelection(info: ResourceInfo, options: ResourceOptions): Selection | undefined {
  const name = resourceName(info);
  const selectable = fieldsOfResource(info);
  for (const field of options.indexes ?? []) {
    if (!selectable?.selectable.has(field)) throw new Error(`${name}: cannot index "${field}": not a field selector of this resource`);
  }
  if (!options.fieldSelector && !options.labelSelector) return undefined;
  const labels = parseLabelSelector(options.labelSelector ?? '');
  const parsed = parseFieldSelector(options.fieldSelector ?? '');
  const fields = convertFieldSelector(selectable, parsed);
  if (!fields) throw new Error(`${name}: field selector "${options.fieldSelector}" uses a field this resource cannot select by`);
  return { labels, fields, labelSelector: options.labelSelector ?? '', fieldSelector: options.fieldSelector ?? '' };
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done(): void {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
