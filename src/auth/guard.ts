// The one place that turns a request's credential into what Levee may do with it: answer it from
// the cache (after authorization), refuse it with the apiserver's own 401 or 403, or forward it
// under the right identity.
import { newBadRequest, newInternalError, newUnauthorized, tooManyRequests } from '../api/status.ts';
import type { Status } from '../api/types.ts';
import { postJson } from '../upstream/client.ts';
import type { UpstreamAuth } from '../upstream/connector.ts';
import type { UpstreamPools } from '../upstream/pools.ts';
import { credentialOf, type AuthenticationOptions, type Credential } from './authenticate.ts';
import { forbidden, SubjectAccessReviewer, type AuthorizationOptions } from './authorize.ts';
import type { Attributes, ResourceAttributes } from '../api/attributes.ts';
import { impersonationChecks, impersonationHeaders, ImpersonationError } from './impersonation.ts';
import type { ServiceAccountTokenVerifier } from './satoken.ts';
import { TokenReviewer, tokenKey, type TokenReviewOptions } from './tokenreview.ts';
import { ReviewLimiter, ReviewRejectedError } from './reviewlimit.ts';
import { anonymous, withAuthenticatedGroup, type UserInfo } from '../api/user.ts';
import type { Maybe } from '../maybe.ts';

/** Whether a cached answer may be given, and to whom. */
export type Admission =
  | { allowed: true; user: UserInfo | undefined }
  /** Refused; `busy` when only because reviews are past their bound (a 429: ask again later). */
  | { allowed: false; status: Status; busy?: boolean }
  /** Levee cannot tell (a review failed): forward, and the apiserver decides. */
  | { allowed: 'undecided' };

export interface GuardOptions extends AuthenticationOptions, AuthorizationOptions, TokenReviewOptions {
  /** The bound on reviews sent upstream; DEFAULT_REVIEW_LIMITS when absent. */
  limiter?: ReviewLimiter | undefined;
  /** Verifies service-account tokens locally; what it cannot prove is reviewed upstream. */
  serviceAccountTokens?: ServiceAccountTokenVerifier | undefined;
}

// Levee's own user changes only when its credentials do; asking again now and then notices that.
const OWN_USER_TTL_MS = 5 * 60_000;
const RECENT_MS = 1_000;

export class AccessGuard {
  readonly #opts: GuardOptions;
  readonly #pools: UpstreamPools;
  readonly tokens: TokenReviewer;
  readonly access: SubjectAccessReviewer;
  readonly reviews: ReviewLimiter;
  #own: { at: number; user: Promise<UserInfo> } | undefined;
  /** Levee's own user once a SelfSubjectReview has answered. */
  #ownKnown: UserInfo | undefined;
  readonly #saTokens: ServiceAccountTokenVerifier | undefined;
  // The TokenReview that is learning the API audiences, while one is: tokens that only lack those
  // wait for it instead of each sending a review of its own (agents restarting together).
  #learning: Promise<void> | undefined;
  // One request asks for its user more than once (flow control, then authorization): it is
  // authenticated once. A watch asking again minutes later is authenticated again.
  readonly #recent = new WeakMap<Credential, { at: number; user: Promise<UserInfo | undefined> }>();

  constructor(pools: UpstreamPools, opts: GuardOptions) {
    this.#opts = opts;
    this.#pools = pools;
    // One bound for every review Levee sends, token or access: they share Levee's connections.
    const limiter = opts.limiter ?? new ReviewLimiter();
    this.reviews = limiter;
    this.tokens = new TokenReviewer(pools, { ...opts, limiter });
    this.access = new SubjectAccessReviewer(pools, { ...opts, limiter });
    this.#saTokens = opts.serviceAccountTokens;
    if (this.#saTokens) {
      const verifier = this.#saTokens;
      this.tokens.onAudiences = (auds) => verifier.learnAudiences(auds);
    }
  }

  get serviceAccountTokens(): ServiceAccountTokenVerifier | undefined {
    return this.#saTokens;
  }

  get mode(): AuthenticationOptions['mode'] {
    return this.#opts.mode;
  }

  credential(req: Parameters<typeof credentialOf>[0]): Credential {
    return credentialOf(req, this.#opts);
  }

  /**
   * The identity a forwarded request travels under, or the Status that refuses it. Bearer tokens
   * and anonymous requests go as they came, so the apiserver authenticates and authorizes them
   * itself (impersonation included); a certificate's user is impersonated with Levee's credentials.
   */
  async upstreamAuth(c: Credential, rawHeaders: readonly string[]): Promise<UpstreamAuth | Status> {
    switch (c.kind) {
      case 'unauthorized':
        return newUnauthorized();
      case 'token':
      case 'anonymous':
        return { identity: 'client' };
      case 'own':
        return this.#asLevee(rawHeaders);
      case 'unchecked':
        return hasAuthorization(rawHeaders) ? { identity: 'client' } : this.#asLevee(rawHeaders);
      case 'x509': {
        let checks: ResourceAttributes[];
        try {
          checks = impersonationChecks(rawHeaders);
        } catch (err) {
          if (!(err instanceof ImpersonationError)) throw err;
          // The apiserver's impersonation filter answers a request without a user to impersonate with a 400.
          return newBadRequest(err.message);
        }
        if (checks.length === 0) return { identity: 'own', impersonate: impersonationHeaders(c.user) };
        for (const attrs of checks) {
          let d;
          try {
            d = await this.access.authorize(c.user, attrs);
          } catch (err) {
            return newInternalError(`impersonation could not be authorized: ${(err as Error).message}`);
          }
          if (!d.allowed) return forbidden(c.user, attrs, d.reason);
        }
        return { identity: 'own' };
      }
    }
  }

  /**
   * A request that travels as Levee itself (trust-loopback or none, without credentials). Levee's
   * identity may impersonate (a central gateway's role needs it for certificate clients), so a
   * client's own Impersonate-* headers would borrow that right: they are refused with the
   * apiserver's 403 for impersonation, never forwarded and never silently dropped. The empty
   * impersonate list makes the connector drop any such header anyway.
   */
  async #asLevee(rawHeaders: readonly string[]): Promise<UpstreamAuth | Status> {
    let checks: ResourceAttributes[];
    try {
      checks = impersonationChecks(rawHeaders);
    } catch (err) {
      if (!(err instanceof ImpersonationError)) throw err;
      return newBadRequest(err.message);
    }
    const [first] = checks;
    if (first === undefined) return { identity: 'own', impersonate: [] };
    let levee: UserInfo;
    try {
      levee = await this.#ownUser();
    } catch {
      levee = { username: 'levee', uid: '', groups: [], extra: {} };
    }
    return forbidden(levee, first, `Levee does not lend its own identity to impersonate (--auth ${this.#opts.mode})`);
  }

  /**
   * The user an answer of Levee's own is for (from the cache, or a /debug/levee path):
   * authenticated, then authorized for `attrs`. At once when both are known without asking
   * anyone (src/maybe.ts).
   */
  admit(c: Credential, attrs: Attributes): Maybe<Admission> {
    if (c.kind === 'unchecked') return { allowed: true, user: undefined };
    if (c.kind === 'unauthorized') return { allowed: false, status: newUnauthorized() };
    const known = this.knownUser(c);
    const decided = known && this.access.knownForName(known, attrs);
    if (decided) return { allowed: true, user: known };
    return this.#admit(c, attrs);
  }

  async #admit(c: Exclude<Credential, { kind: 'unchecked' | 'unauthorized' }>, attrs: Attributes): Promise<Admission> {
    let user: UserInfo;
    try {
      const u = await this.#userOf(c);
      if (!u) return { allowed: false, status: newUnauthorized() };
      user = u;
      const d = await this.access.authorizeForName(user, attrs);
      return d.allowed ? { allowed: true, user } : { allowed: false, status: forbidden(user, attrs, d.reason) };
    } catch (err) {
      // Past the bound on reviews: the client comes back later, as from a full queue.
      if (err instanceof ReviewRejectedError) return { allowed: false, status: tooManyRequests(), busy: true };
      // A review that failed or could not decide (UndecidedError) gives no cached bytes away.
      return { allowed: 'undecided' };
    }
  }

  /**
   * The user behind a credential, reviewing a token if need be: undefined when there is none (no
   * checks, or a token the apiserver does not accept). Rejects when it cannot be learned now (a
   * review failed or was past its bound). Only what Levee decides itself needs this: an answer
   * from the cache, a rule that names users. A forwarded token is the apiserver's to review.
   */
  async userOf(c: Credential): Promise<UserInfo | undefined> {
    if (c.kind === 'unchecked' || c.kind === 'unauthorized') return undefined;
    return this.#userOf(c);
  }

  /**
   * The user behind a credential when Levee knows it without asking anyone: a certificate,
   * anonymous, itself (once learned), or a token whose review is still cached. Flow control keys
   * and exempts by this; it never sends a review.
   */
  knownUser(c: Credential): UserInfo | undefined {
    switch (c.kind) {
      case 'x509':
        return c.user;
      case 'anonymous':
        return anonymous;
      case 'own':
        return this.#ownKnown;
      case 'token':
        return this.tokens.known(c.token);
      default:
        return undefined;
    }
  }

  /**
   * Who a request stands for in flow control: its user when known, else a hash of its token (one
   * client, one flow, without a review), else its address.
   */
  flowOf(c: Credential, remoteAddress: string | undefined): string {
    const user = this.knownUser(c);
    if (user) return user.username;
    if (c.kind === 'token') return `token:${tokenKey(c.token)}`;
    return `address:${remoteAddress ?? ''}`;
  }

  async #userOf(c: Exclude<Credential, { kind: 'unchecked' | 'unauthorized' }>): Promise<UserInfo | undefined> {
    switch (c.kind) {
      case 'x509':
        return c.user;
      case 'anonymous':
        return anonymous;
      case 'own':
        return this.#ownUser();
      case 'token': {
        const now = Date.now();
        const recent = this.#recent.get(c);
        if (recent && now - recent.at < RECENT_MS) return recent.user;
        const user = this.#tokenUser(c.token);
        this.#recent.set(c, { at: now, user });
        user.catch(() => this.#recent.delete(c));
        return user;
      }
    }
  }

  async #tokenUser(token: string): Promise<UserInfo | undefined> {
    const verifier = this.#saTokens;
    let learner = false;
    if (verifier) {
      let local = await verifier.verify(token);
      if (!local.verified && local.reason === 'audience-unknown' && this.#learning) {
        await this.#learning;
        local = await verifier.verify(token);
      }
      verifier.count(local);
      if (local.verified) return local.user;
      learner = local.reason === 'audience-unknown' && !this.#learning;
    }
    const review = this.tokens.review(token);
    if (learner) {
      const learning = review.then(
        () => undefined,
        () => undefined,
      );
      this.#learning = learning;
      void learning.then(() => {
        if (this.#learning === learning) this.#learning = undefined;
      });
    }
    const answer = await review;
    return answer.authenticated ? answer.user : undefined;
  }


  /** Levee's own user, as the apiserver sees its credentials (SelfSubjectReview). */
  #ownUser(): Promise<UserInfo> {
    const now = Date.now();
    if (!this.#own || now - this.#own.at > OWN_USER_TTL_MS) {
      const user = postJson<{ status?: { userInfo?: { username?: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> } } }>(
        this.#pools,
        '/apis/authentication.k8s.io/v1/selfsubjectreviews',
        { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
      ).then((r) => {
        const u = r.status?.userInfo;
        if (!u?.username) throw new Error('SelfSubjectReview named no user');
        this.#ownKnown = withAuthenticatedGroup({ username: u.username, uid: u.uid ?? '', groups: u.groups ?? [], extra: u.extra ?? {} });
        return this.#ownKnown;
      });
      const entry = { at: now, user };
      this.#own = entry;
      user.catch(() => {
        if (this.#own === entry) this.#own = undefined;
      });
    }
    return this.#own.user;
  }
}

function hasAuthorization(rawHeaders: readonly string[]): boolean {
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i]!.toLowerCase() === 'authorization') return true;
  return false;
}
