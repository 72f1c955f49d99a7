// Keeps one store in step with the upstream apiserver, as client-go's Reflector does: a paged LIST
// (consistent first page, later pages at the same resourceVersion through continue tokens), then a
// WATCH from the list's resourceVersion with bookmarks; re-watch from the last resourceVersion seen
// when a watch ends or breaks; relist only when the window is lost (410 Expired/Gone); every retry
// waits an exponential, jittered backoff. Bodies are split into items as bytes while they arrive.
import type { ResourceInfo } from '../cache/resources.ts';
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
}

/** The window is gone: the only way on is a fresh list. */
class ExpiredError extends Error {}

const MAX_ERROR_BODY = 64 * 1024;

export class Reflector {
  readonly #o: ReflectorOptions;
  readonly #decode: Decoder;
  readonly #abort = new AbortController();
  readonly #backoff = new Backoff();
  readonly #log: Logger;
  #running: Promise<void> | undefined;

  constructor(opts: ReflectorOptions) {
    this.#o = opts;
    this.#decode = decoder(opts.info);
    this.#log = opts.logger.child({ resource: `${opts.info.resource}${opts.info.group ? `.${opts.info.group}` : ''}` });
  }

  start(): void {
    this.#running ??= this.#run();
  }

  async stop(): Promise<void> {
    this.#abort.abort();
    await this.#running;
  }

  async #run(): Promise<void> {
    let needList = true;
    while (!this.#abort.signal.aborted) {
      try {
        if (needList) {
          await this.#list();
          needList = false;
        }
        await this.#watch(this.#o.store.resourceVersion);
        this.#backoff.reset();
      } catch (err) {
        if (this.#abort.signal.aborted) return;
        if (err instanceof ExpiredError) {
          // client-go relists from scratch after 410: the window it knew is compacted away.
          this.#log.info({ err: err.message }, 'watch window lost, relisting');
          this.#o.hooks?.watchRestarted?.('expired');
          needList = true;
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
    this.#o.store.replace(objects, listRV);
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    this.#o.hooks?.relisted?.(objects.length, bytes, seconds);
    this.#log.info({ objects: objects.length, bytes, resourceVersion: listRV, seconds: Math.round(seconds * 1000) / 1000 }, 'listed');
  }

  async #watch(fromRV: number): Promise<void> {
    // client-go asks for a random 5–10 minute watch; the apiserver ends it, the reflector re-watches.
    const timeoutSeconds = 300 + Math.floor(Math.random() * 300);
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
      case 'DELETED':
        this.#o.store.apply(type, this.#decode(raw));
        return;
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
