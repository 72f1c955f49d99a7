// Authorization of every answer Levee gives from its cache: a SubjectAccessReview, sent with
// Levee's own credentials, asks the apiserver's own authorizer chain (RBAC, Node, webhooks) about
// the client's user with the attributes the apiserver would use for the same request. A cache that
// skipped this would hand any object to anyone who can reach it.
import { newForbidden } from '../api/status.ts';
import type { Status } from '../api/types.ts';
import { postJson } from '../upstream/client.ts';
import type { UpstreamPools } from '../upstream/pools.ts';
import { ReviewCache } from './reviewcache.ts';
import { userKey, type UserInfo } from './user.ts';
import type { LocalRbac } from './rbac.ts';
import type { ReviewLimiter } from './reviewlimit.ts';

/** authorizer.Attributes of a resource request. */
export interface ResourceAttributes {
  verb: string;
  group: string;
  version?: string | undefined;
  resource: string;
  subresource?: string | undefined;
  namespace: string;
  name: string;
}

/** authorizer.Attributes of a request for a path that is not an API resource (/debug/levee/...). */
export interface NonResourceAttributes {
  verb: string;
  path: string;
}

export type Attributes = ResourceAttributes | NonResourceAttributes;

export function isResourceRequest(attrs: Attributes): attrs is ResourceAttributes {
  return 'resource' in attrs;
}

export interface Decision {
  allowed: boolean;
  /** The authorizers' reason, which the apiserver appends to its Forbidden message. */
  reason: string;
}

export interface AuthorizationOptions {
  allowedTtlMs: number;
  deniedTtlMs: number;
  /** RBAC evaluated from Levee's cache first; only what it does not grant is reviewed upstream. */
  localRbac?: LocalRbac | undefined;
  /** Bounds the reviews sent at once; without it they are sent as they come. */
  limiter?: ReviewLimiter | undefined;
}

interface SubjectAccessReviewStatus {
  allowed?: boolean;
  denied?: boolean;
  reason?: string;
  evaluationError?: string;
}

/** The authorizer could not decide (an evaluation error, or the review failed): ask the apiserver itself. */
export class UndecidedError extends Error {}

export class SubjectAccessReviewer {
  readonly #pools: UpstreamPools;
  readonly #cache: ReviewCache<Decision>;
  readonly #local: LocalRbac | undefined;
  readonly #limiter: ReviewLimiter | undefined;
  /** Reviews sent upstream, for the metrics. */
  sent = 0;
  /** Decisions RBAC allowed from the local cache, with no review sent. */
  allowedLocally = 0;

  constructor(pools: UpstreamPools, opts: AuthorizationOptions) {
    this.#pools = pools;
    this.#local = opts.localRbac;
    this.#limiter = opts.limiter;
    this.#cache = new ReviewCache({ positiveTtlMs: opts.allowedTtlMs, negativeTtlMs: opts.deniedTtlMs, positive: (d) => d.allowed });
  }

  /** The apiserver's decision; rejects with UndecidedError when there is none. */
  authorize(user: UserInfo, attrs: Attributes): Promise<Decision> {
    const key = isResourceRequest(attrs)
      ? `${userKey(user)}\u0000r\u0000${attrs.verb}\u0000${attrs.group}\u0000${attrs.version ?? ''}\u0000${attrs.resource}\u0000${attrs.subresource ?? ''}\u0000${attrs.namespace}\u0000${attrs.name}`
      : `${userKey(user)}\u0000n\u0000${attrs.verb}\u0000${attrs.path}`;
    return this.#cache.get(key, () => {
      if (this.#local?.allows(user, attrs)) {
        this.allowedLocally++;
        return Promise.resolve({ allowed: true, reason: 'allowed by RBAC (evaluated by Levee)' });
      }
      return this.#limiter ? this.#limiter.run(userKey(user), () => this.#send(user, attrs)) : this.#send(user, attrs);
    });
  }

  /**
   * As authorize(), but asks for every name (name "") first: an RBAC rule without resourceNames
   * matches all names, so one cached review serves reads of every object instead of one review per
   * object. Only when that is denied is the name itself asked.
   */
  async authorizeForName(user: UserInfo, attrs: Attributes): Promise<Decision> {
    if (isResourceRequest(attrs) && attrs.name !== '') {
      const all = await this.authorize(user, { ...attrs, name: '' });
      if (all.allowed) return all;
    }
    return this.authorize(user, attrs);
  }

  async #send(user: UserInfo, attrs: Attributes): Promise<Decision> {
    this.sent++;
    const spec: Record<string, unknown> = { user: user.username, groups: user.groups };
    if (isResourceRequest(attrs)) {
      const resourceAttributes: Record<string, string> = { verb: attrs.verb, group: attrs.group, resource: attrs.resource };
      if (attrs.version) resourceAttributes.version = attrs.version;
      if (attrs.subresource) resourceAttributes.subresource = attrs.subresource;
      if (attrs.namespace) resourceAttributes.namespace = attrs.namespace;
      if (attrs.name) resourceAttributes.name = attrs.name;
      spec.resourceAttributes = resourceAttributes;
    } else {
      spec.nonResourceAttributes = { path: attrs.path, verb: attrs.verb };
    }
    if (user.uid) spec.uid = user.uid;
    if (Object.keys(user.extra).length > 0) spec.extra = user.extra;
    const review = await postJson<{ status?: SubjectAccessReviewStatus }>(
      this.#pools,
      '/apis/authorization.k8s.io/v1/subjectaccessreviews',
      { apiVersion: 'authorization.k8s.io/v1', kind: 'SubjectAccessReview', spec },
    );
    const s = review.status ?? {};
    if (s.allowed === true) return { allowed: true, reason: s.reason ?? '' };
    // The apiserver answers 500, not 403, when its authorizer failed; Levee lets it say so.
    if (s.evaluationError) throw new UndecidedError(s.evaluationError);
    return { allowed: false, reason: s.reason ?? '' };
  }
}

/** The apiserver's Forbidden answer (responsewriters.Forbidden) to a request it did not authorize. */
export function forbidden(user: UserInfo, attrs: Attributes, reason: string): Status {
  if (!isResourceRequest(attrs)) {
    const message = sanitize(`User "${user.username}" cannot ${attrs.verb} path "${attrs.path}"`);
    return newForbidden({ group: '', resource: '' }, '', reason ? `${message}: ${reason}` : message);
  }
  let resource = attrs.resource;
  if (attrs.subresource) resource += `/${attrs.subresource}`;
  const where = attrs.namespace ? `in the namespace "${attrs.namespace}"` : 'at the cluster scope';
  // The apiserver HTML-escapes the user-controlled parts of this message.
  const message = sanitize(`User "${user.username}" cannot ${attrs.verb} resource "${resource}" in API group "${attrs.group}" ${where}`);
  return newForbidden({ group: attrs.group, resource: attrs.resource }, attrs.name, reason ? `${message}: ${reason}` : message);
}

function sanitize(s: string): string {
  return s.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
}
