// Authorization of every answer Levee gives from its cache: a SubjectAccessReview, sent with
// Levee's own credentials, asks the apiserver's own authorizer chain (RBAC, Node, webhooks) about
// the client's user with the attributes the apiserver would use for the same request. A cache that
// skipped this would hand any object to anyone who can reach it.
import { goQuote } from '../selectors/gostrings.ts';
import { newForbidden } from '../api/status.ts';
import type { Status } from '../api/types.ts';
import { postJson } from '../upstream/client.ts';
import type { UpstreamPools } from '../upstream/pools.ts';
import { ReviewCache } from './reviewcache.ts';
import { isResourceRequest, type Attributes } from '../api/attributes.ts';
import { userKey, type UserInfo } from '../api/user.ts';
import type { LocalRbac } from './rbac.ts';
import type { ReviewLimiter } from './reviewlimit.ts';

const PRIVILEGED_GROUP = 'system:masters';
// How long a broader question's denial is kept (authorizeForName).
const BROADER_DENIED_TTL_MS = 5 * 60_000;
// The privileged-group authorizer allows with no reason.
const PRIVILEGED: Decision = { allowed: true, reason: '' };

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
  /** Answers to the broader questions authorizeForName asks first. */
  readonly #broader: ReviewCache<Decision>;
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
    this.#broader = new ReviewCache({ positiveTtlMs: opts.allowedTtlMs, negativeTtlMs: BROADER_DENIED_TTL_MS, positive: (d) => d.allowed });
  }

  /** The apiserver's decision; rejects with UndecidedError when there is none. */
  authorize(user: UserInfo, attrs: Attributes): Promise<Decision> {
    return this.#decide(user, attrs, this.#cache);
  }

  #decide(user: UserInfo, attrs: Attributes, cache: ReviewCache<Decision>): Promise<Decision> {
    // The apiserver's first authorizer, whatever its modes: system:masters may do anything
    // (pkg/kubeapiserver/authorizer/reload.go, kubernetes.io/system-privileged-group).
    if (user.groups.includes(PRIVILEGED_GROUP)) return Promise.resolve(PRIVILEGED);
    return cache.get(decisionKey(user, attrs), () => {
      if (this.#local?.allows(user, attrs)) {
        this.allowedLocally++;
        return Promise.resolve({ allowed: true, reason: 'allowed by RBAC (evaluated by Levee)' });
      }
      return this.#limiter ? this.#limiter.run(userKey(user), () => this.#send(user, attrs)) : this.#send(user, attrs);
    });
  }

  /**
   * As authorize(), but asks broader questions first, each answered once and cached for every
   * request it covers: every object without selectors, then every name with the request's
   * selectors, then the request itself; the first allowed answers. An authorizer that allows a
   * question allows every narrower one (an RBAC rule without resourceNames matches all names, and
   * one that grants a list grants it with any selector), so one review serves reads of every
   * object, and a client watching a thousand nodes' pods with a thousand field selectors costs one
   * review, not a thousand. Only when the broad question is denied are the narrower ones asked: a
   * kubelet's LIST of its own pods is allowed by its selector (the Node authorizer), whatever the
   * name. A broader question's denial refuses no one (the narrower one is asked next), so it is
   * kept for minutes, not seconds: a kubelet's re-authorized watch costs one review, not two.
   */
  async authorizeForName(user: UserInfo, attrs: Attributes): Promise<Decision> {
    for (const broader of broaderQuestions(attrs)) {
      const d = await this.#decide(user, broader, this.#broader);
      if (d.allowed) return d;
    }
    return this.authorize(user, attrs);
  }

  /**
   * authorizeForName's answer when it is known without asking anyone: the privileged group, or
   * an allowing answer still cached (src/maybe.ts). Undefined otherwise, denials included, which
   * are authorizeForName's to give.
   */
  knownForName(user: UserInfo, attrs: Attributes): Decision | undefined {
    if (user.groups.includes(PRIVILEGED_GROUP)) return PRIVILEGED;
    for (const broader of broaderQuestions(attrs)) {
      const d = this.#broader.peek(decisionKey(user, broader));
      if (d?.allowed) return d;
    }
    const d = this.#cache.peek(decisionKey(user, attrs));
    return d?.allowed ? d : undefined;
  }

  async #send(user: UserInfo, attrs: Attributes): Promise<Decision> {
    this.sent++;
    const review = await postJson<{ status?: SubjectAccessReviewStatus }>(
      this.#pools,
      '/apis/authorization.k8s.io/v1/subjectaccessreviews',
      { apiVersion: 'authorization.k8s.io/v1', kind: 'SubjectAccessReview', spec: subjectAccessReviewSpec(user, attrs) },
    );
    const s = review.status ?? {};
    // A selector Levee read but the apiserver could not (BuildEvaluationError's "... ignored due to
    // parse error"): the two disagree about the request, whose answer is then the apiserver's.
    if (s.evaluationError?.includes('spec.resourceAttributes.')) throw new UndecidedError(s.evaluationError);
    if (s.allowed === true) return { allowed: true, reason: s.reason ?? '' };
    // The apiserver answers 500, not 403, when its authorizer failed; Levee lets it say so.
    if (s.evaluationError) throw new UndecidedError(s.evaluationError);
    return { allowed: false, reason: s.reason ?? '' };
  }
}

/** The broader questions authorizeForName asks before the request's own, broadest first. */
function broaderQuestions(attrs: Attributes): Attributes[] {
  if (!isResourceRequest(attrs)) return [];
  const selected = Boolean(attrs.fieldSelector || attrs.labelSelector);
  const out: Attributes[] = [];
  if (selected || attrs.name !== '') out.push({ ...attrs, name: '', fieldSelector: undefined, labelSelector: undefined });
  if (selected && attrs.name !== '') out.push({ ...attrs, name: '' });
  return out;
}

/**
 * The key a decision is cached under: every attribute the review carries, selectors included (a
 * kubelet allowed to list its own pods is not allowed to list another node's). JSON, so no value
 * can run into the next.
 */
export function decisionKey(user: UserInfo, attrs: Attributes): string {
  return isResourceRequest(attrs)
    ? JSON.stringify([
        userKey(user),
        'r',
        attrs.verb,
        attrs.group,
        attrs.version ?? '',
        attrs.resource,
        attrs.subresource ?? '',
        attrs.namespace,
        attrs.name,
        attrs.fieldSelector ?? '',
        attrs.labelSelector ?? '',
      ])
    : JSON.stringify([userKey(user), 'n', attrs.verb, attrs.path]);
}

/**
 * The SubjectAccessReview spec that makes the apiserver's authorizers see what they see for the
 * request itself. Selectors go as rawSelector, the request's own text: the apiserver parses it
 * with the parsers its authorization filter uses on the request (fields.ParseSelector and
 * labels.Parse, then Requirements(); pkg/registry/authorization/util ResourceAttributesFrom and
 * apiserver's filters.GetAuthorizerAttributes), so the authorizers get the same requirements, the
 * same operators (a label's "=" stays Equals, "x>1" stays GreaterThan, which `requirements` cannot
 * carry) and the same parse errors. An empty selector is left out, as the filter leaves it.
 */
export function subjectAccessReviewSpec(user: UserInfo, attrs: Attributes): Record<string, unknown> {
  const spec: Record<string, unknown> = { user: user.username, groups: user.groups };
  if (isResourceRequest(attrs)) {
    const resourceAttributes: Record<string, unknown> = { verb: attrs.verb, group: attrs.group, resource: attrs.resource };
    if (attrs.version) resourceAttributes.version = attrs.version;
    if (attrs.subresource) resourceAttributes.subresource = attrs.subresource;
    if (attrs.namespace) resourceAttributes.namespace = attrs.namespace;
    if (attrs.name) resourceAttributes.name = attrs.name;
    if (attrs.fieldSelector) resourceAttributes.fieldSelector = { rawSelector: attrs.fieldSelector };
    if (attrs.labelSelector) resourceAttributes.labelSelector = { rawSelector: attrs.labelSelector };
    spec.resourceAttributes = resourceAttributes;
  } else {
    spec.nonResourceAttributes = { path: attrs.path, verb: attrs.verb };
  }
  if (user.uid) spec.uid = user.uid;
  if (Object.keys(user.extra).length > 0) spec.extra = user.extra;
  return spec;
}

/** The apiserver's Forbidden answer (responsewriters.Forbidden) to a request it did not authorize. */
export function forbidden(user: UserInfo, attrs: Attributes, reason: string): Status {
  // forbiddenMessage: every name quoted as Go's %q quotes it.
  if (!isResourceRequest(attrs)) {
    const message = sanitize(`User ${goQuote(user.username)} cannot ${attrs.verb} path ${goQuote(attrs.path)}`);
    return newForbidden({ group: '', resource: '' }, '', reason ? `${message}: ${reason}` : message);
  }
  let resource = attrs.resource;
  if (attrs.subresource) resource += `/${attrs.subresource}`;
  const where = attrs.namespace ? `in the namespace ${goQuote(attrs.namespace)}` : 'at the cluster scope';
  // The apiserver HTML-escapes the user-controlled parts of this message.
  const message = sanitize(`User ${goQuote(user.username)} cannot ${attrs.verb} resource ${goQuote(resource)} in API group ${goQuote(attrs.group)} ${where}`);
  return newForbidden({ group: attrs.group, resource: attrs.resource }, attrs.name, reason ? `${message}: ${reason}` : message);
}

function sanitize(s: string): string {
  return s.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
}
