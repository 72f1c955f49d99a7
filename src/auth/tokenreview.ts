// Bearer tokens are authenticated by the apiserver that issued them: a TokenReview, sent with
// Levee's own credentials, says whose token it is (static tokens, service-account tokens, OIDC,
// webhooks: whatever the apiserver accepts). Answers are cached under a hash of the token, never
// the token itself.
import { hash } from 'node:crypto';
import { postJson } from '../upstream/client.ts';
import type { UpstreamPools } from '../upstream/pools.ts';
import { ReviewCache } from './reviewcache.ts';
import type { ReviewLimiter } from './reviewlimit.ts';
import { withAuthenticatedGroup, type UserInfo } from '../api/user.ts';

export type TokenAnswer = { authenticated: true; user: UserInfo } | { authenticated: false; error: string };

interface TokenReviewStatus {
  authenticated?: boolean;
  user?: { username?: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> };
  error?: string;
  audiences?: string[];
}

export interface TokenReviewOptions {
  acceptedTtlMs: number;
  rejectedTtlMs: number;
  /** Bounds the reviews sent at once; without it they are sent as they come. */
  limiter?: ReviewLimiter | undefined;
}

export class TokenReviewer {
  readonly #pools: UpstreamPools;
  readonly #cache: ReviewCache<TokenAnswer>;
  readonly #limiter: ReviewLimiter | undefined;
  /** Reviews sent upstream, for the metrics. */
  sent = 0;
  /** Told the audiences of every token the apiserver accepted: its API audiences, as far as the token names them. */
  onAudiences: ((audiences: string[]) => void) | undefined;

  constructor(pools: UpstreamPools, opts: TokenReviewOptions) {
    this.#pools = pools;
    this.#limiter = opts.limiter;
    this.#cache = new ReviewCache({
      positiveTtlMs: opts.acceptedTtlMs,
      negativeTtlMs: opts.rejectedTtlMs,
      positive: (a) => a.authenticated,
    });
  }

  /** Who holds this bearer token. Rejects when the apiserver could not be asked. */
  review(token: string): Promise<TokenAnswer> {
    const key = tokenKey(token);
    return this.#cache.get(key, () => this.#send(key, token));
  }

  /** The user of a token reviewed recently, if the answer is still cached; never sends a review. */
  known(token: string): UserInfo | undefined {
    const answer = this.#cache.peek(tokenKey(token));
    return answer?.authenticated ? answer.user : undefined;
  }

  async #send(key: string, token: string): Promise<TokenAnswer> {
    const post = (): Promise<{ status?: TokenReviewStatus }> => {
      this.sent++;
      return postJson(this.#pools, '/apis/authentication.k8s.io/v1/tokenreviews', { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token } });
    };
    const review = await (this.#limiter ? this.#limiter.run(key, post) : post());
    const s = review.status ?? {};
    if (!s.authenticated || !s.user?.username) return { authenticated: false, error: s.error ?? 'token not authenticated' };
    if (Array.isArray(s.audiences)) this.onAudiences?.(s.audiences.filter((a) => typeof a === 'string'));
    return {
      authenticated: true,
      user: withAuthenticatedGroup({
        username: s.user.username,
        uid: s.user.uid ?? '',
        groups: s.user.groups ?? [],
        extra: s.user.extra ?? {},
      }),
    };
  }
}

// The last token hashed and its hash: a request asks for its token's key three or four times
// (flow control, the review cache, the log's user), and a keep-alive client sends the same token
// on every request. Only the most recent token is held, as the requests in flight hold theirs.
let lastToken = '';
let lastKey = '';

/** A token stands for its client by this hash (never the token itself): review caches, flows. */
export function tokenKey(token: string): string {
  if (token !== lastToken) {
    lastKey = hash('sha256', token, 'base64');
    lastToken = token;
  }
  return lastKey;
}

/**
 * The apiserver's bearertoken authenticator: "Bearer TOKEN" (scheme in any case, split on single
 * spaces). undefined when the header is absent or another scheme, so other authenticators (or
 * anonymous) may apply; '' for "Bearer " with an empty token, which the apiserver rejects.
 */
export function bearerToken(authorization: string | undefined): string | undefined {
  if (authorization === undefined) return undefined;
  const parts = authorization.trim().split(' ');
  if (parts.length < 2 || parts[0]!.toLowerCase() !== 'bearer') return undefined;
  return parts[1]!;
}
