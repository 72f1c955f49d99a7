// Every answer from the cache is authorized first: a cache that skips the apiserver's
// authorization would hand any object to anyone. Until Levee authenticates clients itself, it asks
// the apiserver directly with the client's own credentials: a SelfSubjectAccessReview carries the
// client's bearer token, so the apiserver authenticates it and decides with exactly the
// attributes it would use for the read. Denied, or unable to ask (no token, an error): the request
// is forwarded, and the apiserver gives its own answer, 401 or 403 included.
import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { UpstreamPools } from '../upstream/pools.ts';

export interface ResourceAttributes {
  verb: string;
  group: string;
  resource: string;
  namespace: string;
  name: string;
}

export interface AccessOptions {
  allowedTtlMs?: number;
  deniedTtlMs?: number;
  maxEntries?: number;
}

// Allowed decisions may be served for a short while; the apiserver's own webhook authorizer
// caches allowed for 5 minutes and denied for 30 s. Levee stays shorter so revocations bite fast.
const DEFAULT_ALLOWED_TTL_MS = 10_000;
const DEFAULT_DENIED_TTL_MS = 2_000;

export class AccessReviewer {
  readonly #pools: UpstreamPools;
  readonly #decisions: LRUCache<string, boolean>;
  readonly #inflight = new Map<string, Promise<boolean>>();
  readonly #allowedTtl: number;
  readonly #deniedTtl: number;

  constructor(pools: UpstreamPools, opts: AccessOptions = {}) {
    this.#pools = pools;
    this.#allowedTtl = opts.allowedTtlMs ?? DEFAULT_ALLOWED_TTL_MS;
    this.#deniedTtl = opts.deniedTtlMs ?? DEFAULT_DENIED_TTL_MS;
    this.#decisions = new LRUCache({ max: opts.maxEntries ?? 10_000, ttl: this.#allowedTtl });
  }

  /**
   * True when the apiserver says the holder of `authorization` may do this; `undefined` asks for
   * Levee's own identity (trust-loopback). Never throws.
   */
  async allowed(authorization: string | undefined, attrs: ResourceAttributes): Promise<boolean> {
    // The token is kept only as a hash, never as a map key.
    const who = authorization === undefined ? 'own' : createHash('sha256').update(authorization).digest('base64');
    const key = `${who}\u0000${attrs.verb}\u0000${attrs.group}\u0000${attrs.resource}\u0000${attrs.namespace}\u0000${attrs.name}`;
    const cached = this.#decisions.get(key);
    if (cached !== undefined) return cached;
    // Identical reviews asked at once share one: 10,000 agents opening the same watch together
    // made 10,000 reviews and as many upstream connections before any decision was cached.
    let pending = this.#inflight.get(key);
    if (!pending) {
      pending = this.#review(authorization, attrs).then(
        (allowed) => {
          this.#decisions.set(key, allowed, { ttl: allowed ? this.#allowedTtl : this.#deniedTtl });
          return allowed;
        },
        () => false,
      );
      this.#inflight.set(key, pending);
      void pending.finally(() => this.#inflight.delete(key));
    }
    return pending;
  }

  /**
   * As allowed(), but a decision for every name of the resource (name "") answers for each name:
   * an RBAC rule without resourceNames matches all names, so one cached review serves reads of
   * any object instead of one review per object. Denied for all names, the name itself is asked.
   */
  async allowedForName(authorization: string | undefined, attrs: ResourceAttributes): Promise<boolean> {
    if (attrs.name !== '' && (await this.allowed(authorization, { ...attrs, name: '' }))) return true;
    return this.allowed(authorization, attrs);
  }

  async #review(authorization: string | undefined, attrs: ResourceAttributes): Promise<boolean> {
    const resourceAttributes: Record<string, string> = { verb: attrs.verb, group: attrs.group, resource: attrs.resource };
    if (attrs.namespace) resourceAttributes.namespace = attrs.namespace;
    if (attrs.name) resourceAttributes.name = attrs.name;
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json', 'user-agent': 'levee' };
    let identity: 'own' | 'client' = 'client';
    if (authorization === undefined) {
      identity = 'own';
      const own = (await this.#pools.upstream.ownCredentials()).authorization;
      if (own) headers.authorization = own;
    } else {
      headers.authorization = authorization;
    }
    const res = await this.#pools.get(identity, 'request').request({
      method: 'POST',
      path: `${this.#pools.upstream.pathPrefix}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews`,
      headers,
      body: JSON.stringify({ apiVersion: 'authorization.k8s.io/v1', kind: 'SelfSubjectAccessReview', spec: { resourceAttributes } }),
    });
    const text = await res.body.text();
    if (res.statusCode !== 201 && res.statusCode !== 200) return false;
    return (JSON.parse(text) as { status?: { allowed?: boolean } }).status?.allowed === true;
  }
}
