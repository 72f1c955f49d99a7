// The cached resources of one Levee: for each, what discovery said, its store and its reflector.
import type { Logger } from '../log/logger.ts';
import type { CacheMetrics } from '../metrics/metrics.ts';
import { Reflector } from '../reflector/reflector.ts';
import { Store } from '../store/store.ts';
import type { UpstreamPools } from '../upstream/pools.ts';
import { Backoff } from '../reflector/backoff.ts';
import type { ConsistentReads } from '../serve/decide.ts';
import { ConsistencyProbe } from './consistency.ts';
import { WatcherRegistry } from '../watch/registry.ts';
import type { Selection } from './selection.ts';
import { parseFieldSelector } from '../selectors/fields.ts';
import { parseLabelSelector } from '../selectors/labels.ts';
import { normalizeFieldSelector, selectableFields } from '../selectors/selectable.ts';

/** The consistent-read policy: a default and overrides by resource name (as --cache names them). */
export interface ConsistentReadPolicy {
  default: ConsistentReads;
  byResource: Record<string, ConsistentReads>;
}
import { discover, parseResourceSpec, resourceName, UnknownResourceError, type ResourceInfo } from './resources.ts';

export interface CachedResource {
  name: string;
  info: ResourceInfo;
  store: Store;
  reflector: Reflector;
  probe: ConsistencyProbe;
  consistentReads: ConsistentReads;
  selection?: Selection | undefined;
  watchers: WatcherRegistry;
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

export class Cache {
  readonly #byGroupResource = new Map<string, CachedResource>();
  readonly #pools: UpstreamPools;
  readonly #logger: Logger;
  readonly #metrics: CacheMetrics;
  readonly #specs: string[];
  readonly #failed = new Map<string, string>();
  #stopped = false;
  #watchesEnded = false;
  #startedAt = 0;
  #readyLogged = false;

  readonly #policy: ConsistentReadPolicy;

  readonly #resourceOptions: Record<string, ResourceOptions>;

  constructor(
    pools: UpstreamPools,
    specs: string[],
    logger: Logger,
    metrics: CacheMetrics,
    policy: ConsistentReadPolicy = { default: 'verify', byResource: {} },
    resourceOptions: Record<string, ResourceOptions> = {},
  ) {
    this.#policy = policy;
    this.#resourceOptions = resourceOptions;
    this.#pools = pools;
    this.#specs = specs;
    this.#logger = logger;
    this.#metrics = metrics;
  }

  /**
   * Resolves every resource through discovery and starts its reflector, in the background:
   * requests are forwarded until a resource has synced, and an apiserver that is not there yet is
   * retried with backoff. A resource the apiserver does not have is logged and keeps Levee unready.
   */
  start(): void {
    this.#startedAt = performance.now();
    for (const spec of this.#specs) void this.#startOne(spec);
  }

  /** Logs, once, how long it took until every cached resource had synced: the time to ready. */
  #checkReady(): void {
    if (this.#readyLogged || !this.synced) return;
    this.#readyLogged = true;
    const seconds = (performance.now() - this.#startedAt) / 1000;
    let objects = 0;
    let bytes = 0;
    for (const r of this.resources) {
      objects += r.store.size;
      bytes += r.store.bytes;
    }
    this.#logger.info({ resources: this.resources.length, objects, bytes, seconds: Math.round(seconds * 1000) / 1000 }, 'cache synced: every resource listed, ready');
  }

  async #startOne(spec: string): Promise<void> {
    const backoff = new Backoff();
    let info: ResourceInfo;
    for (;;) {
      if (this.#stopped) return;
      try {
        info = await discover(this.#pools, parseResourceSpec(spec));
        break;
      } catch (err) {
        if (err instanceof UnknownResourceError) {
          this.#failed.set(spec, err.message);
          this.#logger.error({ resource: spec, err: err.message }, 'cannot cache resource');
          return;
        }
        const wait = backoff.next();
        this.#logger.warn({ resource: spec, err: err instanceof Error ? err.message : String(err), retryInMs: Math.round(wait) }, 'discovery failed');
        await new Promise((r) => setTimeout(r, wait));
      }
    }
    if (this.#stopped) return;
    const name = resourceName(info);
    const options = this.#resourceOptions[name] ?? {};
    let selection: Selection | undefined;
    try {
      selection = resolveSelection(info, options);
    } catch (err) {
      this.#failed.set(spec, (err as Error).message);
      this.#logger.error({ resource: spec, err: (err as Error).message }, 'cannot cache resource');
      return;
    }
    const fieldIndexes = [...new Set([...(info.group === '' ? (DEFAULT_FIELD_INDEXES[info.resource] ?? []) : []), ...(options.indexes ?? [])])];
    const store = new Store({ fieldIndexes });
    const reflector = new Reflector({
      info,
      pools: this.#pools,
      store,
      logger: this.#logger,
      selector: selection ? { labelSelector: selection.labelSelector, fieldSelector: selection.fieldSelector } : undefined,
      hooks: {
        relisted: (objects, bytes, seconds) => {
          this.#metrics.relisted(name, objects, bytes, seconds);
          this.#checkReady();
        },
        watchRestarted: (reason) => this.#metrics.watchRestarted(name, reason),
      },
    });
    const watchers = new WatcherRegistry(store);
    if (this.#watchesEnded) watchers.endAll();
    this.#byGroupResource.set(`${info.group}/${info.resource}`, {
      name,
      info,
      store,
      reflector,
      probe: new ConsistencyProbe(this.#pools, info),
      consistentReads: this.#consistentReads(name),
      selection,
      watchers,
    });
    this.#metrics.observe(name, store, watchers);
    reflector.start();
  }

  /** Why each resource is not synced yet, for /readyz; empty when all are. */
  unsynced(): string[] {
    const out = [...this.#failed].map(([spec, why]) => `${spec}: ${why}`);
    const started = new Set(this.resources.map((r) => r.name));
    for (const spec of this.#specs) {
      const p = parseResourceSpec(spec);
      if (!started.has(resourceName(p)) && !this.#failed.has(spec)) out.push(`${spec}: not discovered yet`);
    }
    for (const r of this.resources) if (!r.store.synced) out.push(`${r.name}: not synced yet`);
    return out;
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

  get synced(): boolean {
    return this.unsynced().length === 0;
  }

  /** Ends every watch served from the cache, and any begun from now on (shutdown). */
  endWatches(): void {
    this.#watchesEnded = true;
    for (const r of this.resources) r.watchers.endAll();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await Promise.all(this.resources.map((r) => r.reflector.stop()));
  }
}

/** The upstream selection of a resource, checked against what the apiserver lets it select. */
function resolveSelection(info: ResourceInfo, options: ResourceOptions): Selection | undefined {
  const name = resourceName(info);
  for (const field of options.indexes ?? []) {
    const known = selectableFields(info.group, info.resource);
    if (!known?.has(field)) throw new Error(`${name}: cannot index "${field}": not a field selector of this resource`);
  }
  if (!options.fieldSelector && !options.labelSelector) return undefined;
  const labels = parseLabelSelector(options.labelSelector ?? '');
  const parsed = parseFieldSelector(options.fieldSelector ?? '');
  const fields = normalizeFieldSelector(info.group, info.resource, parsed);
  if (!fields) throw new Error(`${name}: field selector "${options.fieldSelector}" uses a field this resource cannot select by`);
  return { labels, fields, labelSelector: options.labelSelector ?? '', fieldSelector: options.fieldSelector ?? '' };
}
