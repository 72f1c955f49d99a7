// Discovery (/api, /apis, their groups and versions, aggregated discovery) and OpenAPI (/openapi/v2,
// /openapi/v3/...) answered from a short-lived cache. Every client, and every agent of a DaemonSet
// restarting at once, asks for the same documents, which the apiserver builds the same for everyone.
// Levee fetches each with its own identity, keeps its bytes and headers per path and representation
// (Accept, Accept-Encoding: what the apiserver varies on), serves them for a few seconds, then
// revalidates with If-None-Match (the apiserver answers 304 when unchanged). Authorization stays the
// apiserver's: these are non-resource paths, and the client's user must be allowed to get the path
// (a SubjectAccessReview with nonResourceAttributes, as RBAC's system:discovery grants) before any
// cached byte reaches it. Anything unusual is left to the apiserver.
import { LRUCache } from 'lru-cache';
import type { Credential } from '../auth/authenticate.ts';
import type { AccessGuard } from '../auth/guard.ts';
import { isImpersonationHeader } from '../auth/impersonation.ts';
import type { DownstreamRequest, DownstreamResponse } from '../http/downstream.ts';
import { writeStatus } from '../http/respond.ts';
import { prettyPrintingAgent } from '../api/negotiation.ts';
import { credentialHeaders } from '../upstream/connector.ts';
import { downstreamResponseHeaders } from '../upstream/headers.ts';
import type { UpstreamPools } from '../upstream/pools.ts';

type Headers = Record<string, string | string[]>;

interface Representation {
  headers: Headers;
  body: Buffer;
  etag: string | undefined;
  /** The apiserver's own 304 for this representation, once it has answered one. */
  notModified: Headers | undefined;
  /** When the apiserver last confirmed these bytes (ms). */
  checkedAt: number;
}

export interface DiscoveryCacheOptions {
  ttlMs: number;
  /** Bytes held in all (default 256 MiB). */
  maxBytes?: number | undefined;
}

export interface DiscoveryObserver {
  /** One request of Levee's own to the apiserver for a discovery document, by its answer. */
  fetched(code: number): void;
}

const DISCOVERY = /^\/(api|apis|api\/[^/]+|apis\/[^/]+|apis\/[^/]+\/[^/]+)$/;
const OPENAPI = /^\/openapi\/(v2|v3|v3\/[^?#]+)$/;

// OpenAPI v3 documents are addressed by content (?hash=): a different hash is a different document.
// `timeout` bounds the request and changes nothing in the answer (kubectl's discovery sends it).
// Any other parameter goes to the apiserver.
function cacheableQuery(path: string, query: URLSearchParams): { hash: string | undefined } | undefined {
  let hash: string | undefined;
  for (const [name, value] of query) {
    if (name === 'timeout') continue;
    if (name === 'hash' && hash === undefined && path.startsWith('/openapi/v3/')) {
      hash = value;
      continue;
    }
    return undefined;
  }
  return { hash };
}

/** Whether a path is discovery or OpenAPI, which this cache may answer. */
export function isDiscoveryPath(path: string): boolean {
  return DISCOVERY.test(path) || OPENAPI.test(path);
}

// Headers that change what the apiserver answers, beyond the representation: with any of them the
// request goes upstream as it came (a range of bytes, a date comparison, another user).
const UNUSUAL = new Set(['range', 'if-range', 'if-modified-since', 'if-unmodified-since', 'if-match']);
// Headers the apiserver sets per request, or for the identity that asked (Levee's own, not the
// client's flow schema): never replayed.
const PER_REQUEST = new Set(['audit-id', 'date', 'x-kubernetes-pf-flowschema-uid', 'x-kubernetes-pf-prioritylevel-uid', 'content-length']);
// The representation is chosen by these; an answer that varies on anything else is not kept.
const VARIES_ON = new Set(['accept', 'accept-encoding']);

const MAX_ENTRY_BYTES = 64 * 1024 * 1024;

function single(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v.join(', ') : v;
}

function varyNames(h: Headers): string[] {
  const v = h.vary;
  const values = Array.isArray(v) ? v : v ? [v] : [];
  return values.flatMap((x) => x.split(',')).map((x) => x.trim().toLowerCase()).filter((x) => x !== '');
}

function replayable(h: Record<string, string | string[] | undefined>): Headers {
  const out = downstreamResponseHeaders(h);
  for (const name of PER_REQUEST) delete out[name];
  return out;
}

export class DiscoveryCache {
  readonly #pools: UpstreamPools;
  readonly #guard: AccessGuard;
  readonly #ttlMs: number;
  readonly #entries: LRUCache<string, Representation>;
  /** Fetches and revalidations in flight, one per representation. */
  readonly #inflight = new Map<string, Promise<Representation | undefined>>();
  observer: DiscoveryObserver | undefined;

  constructor(pools: UpstreamPools, guard: AccessGuard, opts: DiscoveryCacheOptions) {
    this.#pools = pools;
    this.#guard = guard;
    this.#ttlMs = opts.ttlMs;
    this.#entries = new LRUCache({
      maxSize: opts.maxBytes ?? 256 * 1024 * 1024,
      maxEntrySize: MAX_ENTRY_BYTES,
      sizeCalculation: (r) => r.body.length + 1,
    });
  }

  /**
   * Answers the request from the cache, authorized for the client's user first; 'forward' when the
   * apiserver must answer it (not a plain discovery GET, a review that could not decide, an answer
   * Levee could not keep).
   */
  async serve(req: DownstreamRequest, res: DownstreamResponse, credential: Credential, requestId: string): Promise<number | 'forward'> {
    if (req.method !== 'GET') return 'forward';
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    if (!isDiscoveryPath(path)) return 'forward';
    const query = cacheableQuery(path, new URLSearchParams(q === -1 ? '' : url.slice(q + 1)));
    if (!query) return 'forward';
    for (const name of Object.keys(req.headers)) {
      if (UNUSUAL.has(name) || isImpersonationHeader(name)) return 'forward';
    }
    if (req.headers['content-length'] !== undefined && req.headers['content-length'] !== '0') return 'forward';
    if (req.headers['transfer-encoding'] !== undefined) return 'forward';
    // Levee fetches as itself, whose answers are not indented; those who get indented ones ask the
    // apiserver (few do, and none of them is an agent restarting by the thousand).
    if (prettyPrintingAgent(req.headers['user-agent'])) return 'forward';

    const admission = await this.#guard.admit(credential, { verb: 'get', path });
    if (admission.allowed === 'undecided') return 'forward';
    if (admission.allowed === false) {
      writeStatus(res, admission.status);
      return admission.status.code;
    }

    const accept = single(req.headers.accept);
    const acceptEncoding = single(req.headers['accept-encoding']);
    const target = query.hash === undefined ? path : `${path}?hash=${encodeURIComponent(query.hash)}`;
    const key = `${target}\u0000${accept ?? ''}\u0000${acceptEncoding ?? ''}`;
    const ifNoneMatch = single(req.headers['if-none-match']);
    let rep = await this.#current(key, target, accept, acceptEncoding, false);
    if (!rep) return 'forward';
    if (ifNoneMatch !== undefined && rep.etag !== undefined) {
      if (ifNoneMatch === rep.etag && !rep.notModified) {
        // Levee has not seen the apiserver's 304 for this document yet: asking now both learns it
        // and confirms the client's copy.
        rep = await this.#current(key, target, accept, acceptEncoding, true);
        if (!rep) return 'forward';
      }
      if (ifNoneMatch === rep.etag && rep.notModified) {
        res.writeHead(304, { ...rep.notModified, 'audit-id': requestId });
        res.end();
        return 304;
      }
      // The apiserver's matching differs between its handlers (exact string for discovery, lists
      // and weak tags for OpenAPI): a tag that is not exactly the current one is its to judge, and
      // so is a match whose 304 Levee has not seen.
      if (ifNoneMatch !== rep.etag || !rep.notModified) return 'forward';
    }
    res.writeHead(200, { ...rep.headers, 'content-length': String(rep.body.length), 'audit-id': requestId });
    res.end(rep.body);
    return 200;
  }

  /** The representation, fresh within the TTL, fetched or revalidated once for all who wait. */
  #current(key: string, target: string, accept: string | undefined, acceptEncoding: string | undefined, revalidate: boolean): Promise<Representation | undefined> {
    const kept = this.#entries.get(key);
    if (kept && !revalidate && Date.now() - kept.checkedAt < this.#ttlMs) return Promise.resolve(kept);
    let pending = this.#inflight.get(key);
    if (!pending) {
      pending = this.#fetch(target, accept, acceptEncoding, kept).then(
        (rep) => {
          if (rep) this.#entries.set(key, rep);
          else this.#entries.delete(key);
          return rep;
        },
        () => {
          this.#entries.delete(key);
          return undefined;
        },
      );
      pending.finally(() => this.#inflight.delete(key)).catch(() => undefined);
      this.#inflight.set(key, pending);
    }
    return pending;
  }

  async #fetch(target: string, accept: string | undefined, acceptEncoding: string | undefined, kept: Representation | undefined): Promise<Representation | undefined> {
    const headers: string[] = ['user-agent', 'levee'];
    if (accept !== undefined) headers.push('accept', accept);
    if (acceptEncoding !== undefined) headers.push('accept-encoding', acceptEncoding);
    if (kept?.etag) headers.push('if-none-match', kept.etag);
    headers.push(...(await credentialHeaders(this.#pools.upstream, { identity: 'own' })));
    const res = await this.#pools.get('own', 'request').request({ method: 'GET', path: this.#pools.upstream.pathPrefix + target, headers });
    this.observer?.fetched(res.statusCode);
    if (res.statusCode === 304 && kept) {
      res.body.resume();
      return { ...kept, notModified: replayable(res.headers), checkedAt: Date.now() };
    }
    if (res.statusCode !== 200) {
      // Not a document (a group that is gone, an aggregated apiserver that is down): the client's
      // own request goes upstream and gets the apiserver's answer.
      res.body.resume();
      return undefined;
    }
    const h = replayable(res.headers);
    if (varyNames(h).some((n) => !VARIES_ON.has(n))) {
      res.body.resume();
      return undefined;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of res.body as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > MAX_ENTRY_BYTES) {
        res.body.destroy();
        return undefined;
      }
      chunks.push(chunk);
    }
    return { headers: h, body: Buffer.concat(chunks, size), etag: single(h.etag), notModified: undefined, checkedAt: Date.now() };
  }
}
