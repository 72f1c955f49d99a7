// Service-account tokens verified by Levee itself, the way the apiserver's service-account token
// authenticator verifies them (k8s.io/kubernetes pkg/serviceaccount/jwt.go and claims.go, 1.37):
// signature by a key the apiserver publishes (OIDC discovery), issuer, time with go-jose's leeway,
// audiences, and the bound objects (the service account, a pod) found in Levee's own cache. A
// thousand agents with their own tokens then cost the apiserver no TokenReview each.
//
// It only ever proves a token good. Whatever it cannot prove (another issuer, an unknown key, a
// bad signature, an expired token, a secret- or node-bound token, an object not in a synced
// cache, audiences not learned yet) is left to a TokenReview: the apiserver's authenticator is a
// union, so a token the service-account authenticator refuses may still be accepted by another
// one, and a refusal from Levee would not be the apiserver's answer.
//
// No JWT library: node:crypto imports JWKs and verifies RS256..RS512 and ES256..ES512, and the
// compact serialization is three base64url segments. A library (jose, jsonwebtoken) would accept
// more than the apiserver does (other algorithms, claim shapes its decoder refuses) or need as
// much code to be narrowed down to it; what matters here is exactly which tokens are accepted.
import { createHash, createPublicKey, verify as verifySignature, type JsonWebKey, type KeyObject } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { Store } from '../store/store.ts';
import { objectKey, type CachedObject } from '../store/object.ts';
import { withAuthenticatedGroup, type UserInfo } from '../api/user.ts';

/** go-jose's jwt.DefaultLeeway: exp, nbf and iat, and deletion timestamps of bound objects. */
export const LEEWAY_MS = 60_000;

export const POD_NAME_KEY = 'authentication.kubernetes.io/pod-name';
export const POD_UID_KEY = 'authentication.kubernetes.io/pod-uid';
export const NODE_NAME_KEY = 'authentication.kubernetes.io/node-name';
export const NODE_UID_KEY = 'authentication.kubernetes.io/node-uid';
export const CREDENTIAL_ID_KEY = 'authentication.kubernetes.io/credential-id';

/** Why a token was left to a TokenReview; a bounded set, for the metrics. */
export type FallbackReason =
  | 'not-a-jwt'
  | 'keys-unavailable'
  | 'issuer'
  | 'unknown-key'
  | 'signature'
  | 'claims'
  | 'legacy'
  | 'bound-object-kind'
  | 'expired'
  | 'not-yet-valid'
  | 'audience-unknown'
  | 'audience'
  | 'not-cached'
  | 'service-account'
  | 'pod';

export type LocalVerdict = { verified: true; user: UserInfo } | { verified: false; reason: FallbackReason };

interface Ref {
  name: string;
  uid: string;
}

/** What a signed token claims, checked for shape once. */
export interface ServiceAccountClaims {
  iss: string;
  aud: string[];
  /** Seconds, as go-jose's NumericDate keeps them (truncated). */
  exp: number;
  nbf: number | undefined;
  iat: number | undefined;
  jti: string;
  namespace: string;
  serviceAccount: Ref;
  pod: Ref | undefined;
  /** The node a pod-bound token names (ServiceAccountTokenPodNodeInfo, GA since 1.32). */
  node: Ref | undefined;
}

export interface Jws {
  header: Record<string, unknown>;
  payload: Record<string, unknown>;
  signingInput: string;
  signature: Buffer;
}

const SEGMENT = /^[A-Za-z0-9_-]+$/;
// The apiserver signs with exactly these header parameters; anything else (crit above all, which
// go-jose refuses unless it knows it) is left to the apiserver.
const HEADER_PARAMETERS = new Set(['alg', 'kid', 'typ']);

/** The JWS compact serialization, or undefined when a token is not one Levee can read. */
export function parseJws(token: string): Jws | undefined {
  const parts = token.split('.');
  if (parts.length !== 3 || !parts.every((p) => SEGMENT.test(p))) return undefined;
  const header = parseJsonObject(Buffer.from(parts[0]!, 'base64url').toString('utf8'));
  const payload = parseJsonObject(Buffer.from(parts[1]!, 'base64url').toString('utf8'));
  if (!header || !payload) return undefined;
  if (typeof header.alg !== 'string' || (header.kid !== undefined && typeof header.kid !== 'string')) return undefined;
  if (Object.keys(header).some((k) => !HEADER_PARAMETERS.has(k))) return undefined;
  return { header, payload, signingInput: `${parts[0]}.${parts[1]}`, signature: Buffer.from(parts[2]!, 'base64url') };
}

/**
 * JSON.parse keeps the last of duplicate members, go-jose's decoder refuses the document: a
 * document with duplicates is not one Levee reads. Every member of every object has exactly one
 * colon outside strings, so counting those against the members parsed finds them.
 */
function parseJsonObject(text: string): Record<string, unknown> | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!isObject(value)) return undefined;
  return colonsOutsideStrings(text) === memberCount(value) ? value : undefined;
}

function colonsOutsideStrings(text: string): number {
  let n = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x3a) n++;
  }
  return n;
}

function memberCount(v: unknown): number {
  if (Array.isArray(v)) return v.reduce((n: number, x) => n + memberCount(x), 0);
  if (!isObject(v)) return 0;
  let n = 0;
  for (const x of Object.values(v)) n += 1 + memberCount(x);
  return n;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * The claims of a token whose signature is good, in the shapes go-jose's decoder and the
 * apiserver's privateClaims accept; a reason when they are not, or when the token is of a kind
 * Levee leaves to the apiserver (legacy without audiences, bound to a secret, a node alone or a
 * webhook configuration).
 */
export function readClaims(p: Record<string, unknown>): ServiceAccountClaims | { reason: FallbackReason } {
  const iss = p.iss;
  if (typeof iss !== 'string') return { reason: 'claims' };
  const aud = audiences(p.aud);
  if (aud === undefined) return { reason: 'claims' };
  // No audience: a legacy token, whose audiences are the apiserver's; the apiserver judges those.
  if (aud.length === 0) return { reason: 'legacy' };
  const exp = numericDate(p.exp);
  const nbf = numericDate(p.nbf);
  const iat = numericDate(p.iat);
  // Without exp go-jose checks no expiry at all; the apiserver never issues such a bound token.
  if (exp === null || exp === undefined || nbf === null || iat === null) return { reason: 'claims' };
  if (p.jti !== undefined && typeof p.jti !== 'string') return { reason: 'claims' };
  if (p.sub !== undefined && typeof p.sub !== 'string') return { reason: 'claims' };
  const k = p['kubernetes.io'];
  if (!isObject(k)) return { reason: 'claims' };
  if (k.secret !== undefined || k.validatingwebhookconfiguration !== undefined || k.mutatingwebhookconfiguration !== undefined) {
    return { reason: 'bound-object-kind' };
  }
  const namespace = k.namespace;
  const serviceAccount = ref(k.serviceaccount);
  const pod = k.pod === undefined ? undefined : ref(k.pod);
  const node = k.node === undefined ? undefined : ref(k.node);
  if (typeof namespace !== 'string' || namespace === '' || !serviceAccount || serviceAccount.name === '' || pod === null || node === null) {
    return { reason: 'claims' };
  }
  // A node-bound token (no pod) needs the node looked up: left to the apiserver.
  if (node && !pod) return { reason: 'bound-object-kind' };
  if (pod && (pod.name === '' || pod.uid === '')) return { reason: 'claims' };
  return { iss, aud, exp, nbf, iat, jti: (p.jti) ?? '', namespace, serviceAccount, pod, node };
}

/** go-jose's Audience: one string or an array of strings; undefined when neither. */
function audiences(v: unknown): string[] | undefined {
  if (v === undefined) return [];
  if (typeof v === 'string') return [v];
  if (Array.isArray(v) && v.every((a) => typeof a === 'string')) return v;
  return undefined;
}

/** go-jose's NumericDate: a JSON number, truncated to whole seconds. undefined when absent, null when malformed. */
function numericDate(v: unknown): number | undefined | null {
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v)) return null;
  return Math.trunc(v);
}

/** The apiserver's ref{name, uid}: both optional strings. */
function ref(v: unknown): Ref | null {
  if (!isObject(v)) return null;
  const { name = '', uid = '' } = v;
  if (typeof name !== 'string' || typeof uid !== 'string') return null;
  return { name, uid };
}

/** jwt.Claims.ValidateWithLeeway with jwt.DefaultLeeway, as validator.Validate calls it. */
export function checkTime(c: Pick<ServiceAccountClaims, 'exp' | 'nbf' | 'iat'>, nowMs: number): FallbackReason | undefined {
  if (c.nbf !== undefined && nowMs + LEEWAY_MS < c.nbf * 1000) return 'not-yet-valid';
  if (nowMs - LEEWAY_MS > c.exp * 1000) return 'expired';
  if (c.iat !== undefined && nowMs + LEEWAY_MS < c.iat * 1000) return 'not-yet-valid';
  return undefined;
}

/**
 * Whether the token's audiences meet the apiserver's: their intersection must not be empty. Levee
 * knows only the API audiences TokenReviews have shown it; a token for any other is the
 * apiserver's to judge.
 */
export function checkAudiences(aud: readonly string[], known: ReadonlySet<string>): FallbackReason | undefined {
  if (known.size === 0) return 'audience-unknown';
  return aud.some((a) => known.has(a)) ? undefined : 'audience';
}

/** ServiceAccountInfo.UserInfo() for what validator.Validate returns, with system:authenticated added. */
export function userInfoFor(c: ServiceAccountClaims): UserInfo {
  const extra: Record<string, string[]> = {};
  if (c.pod && c.pod.name !== '' && c.pod.uid !== '') {
    extra[POD_NAME_KEY] = [c.pod.name];
    extra[POD_UID_KEY] = [c.pod.uid];
  }
  if (c.jti !== '') extra[CREDENTIAL_ID_KEY] = [`JTI=${c.jti}`];
  // Node claims count only on a pod-bound token (node-bound ones never get here).
  if (c.pod && c.node && c.node.name !== '') {
    extra[NODE_NAME_KEY] = [c.node.name];
    if (c.node.uid !== '') extra[NODE_UID_KEY] = [c.node.uid];
  }
  return withAuthenticatedGroup({
    username: `system:serviceaccount:${c.namespace}:${c.serviceAccount.name}`,
    uid: c.serviceAccount.uid,
    groups: ['system:serviceaccounts', `system:serviceaccounts:${c.namespace}`],
    extra,
  });
}

interface ObjectMeta {
  uid: string;
  /** Milliseconds, when the object is being deleted. */
  deletion: number | undefined;
}

// Parsed once per stored object: a new version of an object is a new CachedObject.
const metas = new WeakMap<CachedObject, ObjectMeta>();

function metaOf(o: CachedObject): ObjectMeta {
  let m = metas.get(o);
  if (!m) {
    const parsed = JSON.parse(o.item.toString()) as { metadata?: { uid?: string; deletionTimestamp?: string } };
    const ts = parsed.metadata?.deletionTimestamp;
    m = { uid: parsed.metadata?.uid ?? '', deletion: ts ? Date.parse(ts) : undefined };
    metas.set(o, m);
  }
  return m;
}

/**
 * The bound-object checks of validator.Validate against Levee's cache: the object exists with the
 * claimed UID and was not deleted before now minus the leeway. An object not in a synced cache is
 * no proof either way: the apiserver looks it up itself.
 */
export function checkBound(
  store: Store | undefined,
  namespace: string,
  r: Ref,
  nowMs: number,
  missing: FallbackReason,
): FallbackReason | undefined {
  if (!store?.synced) return 'not-cached';
  const o = store.get(objectKey(namespace, r.name));
  if (!o) return missing;
  const m = metaOf(o);
  if (m.uid !== r.uid) return missing;
  if (m.deletion !== undefined && !(m.deletion >= nowMs - LEEWAY_MS)) return missing;
  return undefined;
}

interface VerificationKey {
  kid: string;
  key: KeyObject;
}

interface KeySet {
  issuer: string;
  all: VerificationKey[];
  byKid: Map<string, VerificationKey[]>;
  /** Changes when the keys do: verified signatures are remembered per generation. */
  fingerprint: string;
}

const HASHES: Record<string, string> = { '256': 'sha256', '384': 'sha384', '512': 'sha512' };
const CURVES: Record<string, { curve: string; size: number }> = {
  ES256: { curve: 'prime256v1', size: 32 },
  ES384: { curve: 'secp384r1', size: 48 },
  ES512: { curve: 'secp521r1', size: 66 },
};

/** The signature check of go-jose for RS256..RS512 and ES256..ES512; other algorithms are not proven here. */
export function signatureValid(jws: Jws, key: KeyObject): boolean {
  const alg = jws.header.alg as string;
  const input = Buffer.from(jws.signingInput);
  if (/^RS(256|384|512)$/.test(alg)) {
    if (key.asymmetricKeyType !== 'rsa') return false;
    // rsa.VerifyPKCS1v15 wants a signature exactly as long as the modulus.
    if (jws.signature.length !== Math.ceil((key.asymmetricKeyDetails?.modulusLength ?? 0) / 8)) return false;
    return verifySignature(HASHES[alg.slice(2)], input, key, jws.signature);
  }
  const ec = CURVES[alg];
  if (ec) {
    if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== ec.curve) return false;
    if (jws.signature.length !== 2 * ec.size) return false;
    return verifySignature(HASHES[alg.slice(2)], input, { key, dsaEncoding: 'ieee-p1363' }, jws.signature);
  }
  return false;
}

export interface VerifierOptions {
  /** A GET of a small JSON document of this media type, with Levee's own credentials. */
  fetch: <T>(path: string, accept: string) => Promise<T>;
  /** The cached resource, by its plural name in the core group (serviceaccounts, pods). */
  objects: (resource: 'serviceaccounts' | 'pods') => Store | undefined;
  /** How often the issuer and keys are fetched again. */
  refreshMs?: number;
  /** How long an API audience a TokenReview showed is trusted without another showing it. */
  audienceTtlMs?: number;
  /** The least time between two fetches for a key a token names and Levee does not know. */
  unknownKeyRefreshMs?: number;
  now?: () => number;
  onError?: (err: Error) => void;
}

export interface VerifierCounts {
  verified: number;
  fallback: Partial<Record<FallbackReason, number>>;
  /** Signatures checked (the RSA or ECDSA verification itself), once per token while it is remembered. */
  signatures: number;
}

type SignedClaims = ServiceAccountClaims & { fingerprint: string };

export class ServiceAccountTokenVerifier {
  readonly #opts: Required<Omit<VerifierOptions, 'onError'>> & Pick<VerifierOptions, 'onError'>;
  #keys: KeySet | undefined;
  #loading: Promise<KeySet | undefined> | undefined;
  #lastFetch = 0;
  #timer: NodeJS.Timeout | undefined;
  readonly #audiences = new Map<string, number>();
  // Signatures already verified, under a hash of the token (never the token): the checks that can
  // change (time, audiences, bound objects) run on every request.
  readonly #verified = new LRUCache<string, SignedClaims>({ max: 50_000 });
  // Checks in flight, under the same hash, for the key set they check against. A node agent opens
  // its first watches together, so its first requests arrive in one read and each would check
  // the same signature again before the first check is remembered (bench:massrestart: 3,999
  // authentications of 2,000 agents now take 2,000 checks).
  readonly #checking = new Map<string, { keys: KeySet; signed: Promise<SignedClaims | { reason: FallbackReason }> }>();
  readonly counts: VerifierCounts = { verified: 0, fallback: {}, signatures: 0 };

  constructor(opts: VerifierOptions) {
    this.#opts = {
      refreshMs: 5 * 60_000,
      audienceTtlMs: 10 * 60_000,
      unknownKeyRefreshMs: 10_000,
      now: Date.now,
      ...opts,
    };
  }

  /** Fetches the issuer and keys now and then periodically. */
  start(): void {
    void this.#load();
    this.#timer = setInterval(() => void this.#load(), this.#opts.refreshMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  /** API audiences a TokenReview answered with (status.audiences: the token's, intersected with the apiserver's). */
  learnAudiences(auds: readonly string[]): void {
    const until = this.#opts.now() + this.#opts.audienceTtlMs;
    for (const a of auds) if (a !== '') this.#audiences.set(a, until);
  }

  /** The API audiences learned and not yet expired. */
  knownAudiences(): Set<string> {
    const now = this.#opts.now();
    const known = new Set<string>();
    for (const [a, until] of this.#audiences) {
      if (until > now) known.add(a);
      else this.#audiences.delete(a);
    }
    return known;
  }

  /** Counts the verdict a token finally got (once per token authenticated, for the metrics). */
  count(v: LocalVerdict): void {
    if (v.verified) this.counts.verified++;
    else this.counts.fallback[v.reason] = (this.counts.fallback[v.reason] ?? 0) + 1;
  }

  async verify(token: string): Promise<LocalVerdict> {
    const fail = (reason: FallbackReason): LocalVerdict => ({ verified: false, reason });
    const keys = this.#keys ?? (this.#loading || this.#mayFetch() ? await this.#load() : undefined);
    if (!keys) return fail('keys-unavailable');
    const hash = createHash('sha256').update(token).digest('base64');
    let claims = this.#verified.get(hash);
    if (!claims || claims.fingerprint !== keys.fingerprint) {
      const signed = await this.#checkOnce(hash, token, keys);
      if ('reason' in signed) return fail(signed.reason);
      claims = signed;
      this.#verified.set(hash, claims);
    }
    const now = this.#opts.now();
    const reason =
      checkTime(claims, now) ??
      checkAudiences(claims.aud, this.knownAudiences()) ??
      checkBound(this.#opts.objects('serviceaccounts'), claims.namespace, claims.serviceAccount, now, 'service-account') ??
      (claims.pod ? checkBound(this.#opts.objects('pods'), claims.namespace, claims.pod, now, 'pod') : undefined);
    return reason ? fail(reason) : { verified: true, user: userInfoFor(claims) };
  }

  /** One signature check per token and key set at a time; requests that arrive meanwhile share it. */
  #checkOnce(hash: string, token: string, keys: KeySet): Promise<SignedClaims | { reason: FallbackReason }> {
    const inflight = this.#checking.get(hash);
    if (inflight?.keys === keys) return inflight.signed;
    const signed = this.#verifySignature(token, keys);
    const entry = { keys, signed };
    this.#checking.set(hash, entry);
    const clear = (): void => {
      if (this.#checking.get(hash) === entry) this.#checking.delete(hash);
    };
    signed.then(clear, clear);
    return signed;
  }

  async #verifySignature(token: string, initial: KeySet): Promise<SignedClaims | { reason: FallbackReason }> {
    const jws = parseJws(token);
    if (!jws) return { reason: 'not-a-jwt' };
    // As hasCorrectIssuer: a token of another issuer is another authenticator's.
    if (jws.payload.iss !== initial.issuer) return { reason: 'issuer' };
    const kid = (jws.header.kid as string | undefined) ?? '';
    let keys = initial;
    let candidates = kid === '' ? keys.all : keys.byKid.get(kid);
    if (!candidates?.length && this.#mayFetch()) {
      // A key the apiserver may have begun signing with since the last fetch.
      keys = (await this.#load()) ?? keys;
      candidates = kid === '' ? keys.all : keys.byKid.get(kid);
    }
    if (!candidates?.length) return { reason: 'unknown-key' };
    if (jws.payload.iss !== keys.issuer) return { reason: 'issuer' };
    this.counts.signatures++;
    if (!candidates.some((k) => signatureValid(jws, k.key))) return { reason: 'signature' };
    const claims = readClaims(jws.payload);
    if ('reason' in claims) return claims;
    return { ...claims, fingerprint: keys.fingerprint };
  }

  // Tokens naming unknown keys, or arriving while discovery fails, must not become a fetch each.
  #mayFetch(): boolean {
    return this.#opts.now() - this.#lastFetch >= this.#opts.unknownKeyRefreshMs;
  }

  /** Issuer and keys from the apiserver's OIDC discovery; one fetch at a time; the old set stays on failure. */
  #load(): Promise<KeySet | undefined> {
    if (!this.#loading) {
      this.#lastFetch = this.#opts.now();
      this.#loading = this.#fetchKeys()
        .then(
          (k) => (this.#keys = k),
          (err: unknown) => {
            this.#opts.onError?.(err as Error);
            return this.#keys;
          },
        )
        .finally(() => (this.#loading = undefined));
    }
    return this.#loading;
  }

  async #fetchKeys(): Promise<KeySet> {
    const config = await this.#opts.fetch<{ issuer?: unknown }>('/.well-known/openid-configuration', 'application/json');
    if (typeof config.issuer !== 'string' || config.issuer === '') throw new Error('OIDC discovery names no issuer');
    // The apiserver serves its keys here whatever jwks_uri says (that may name an address outside).
    const jwks = await this.#opts.fetch<{ keys?: unknown }>('/openid/v1/jwks', 'application/jwk-set+json');
    if (!Array.isArray(jwks.keys)) throw new Error('JWKS has no keys');
    const set: KeySet = { issuer: config.issuer, all: [], byKid: new Map(), fingerprint: '' };
    const fingerprint = createHash('sha256').update(config.issuer);
    for (const jwk of jwks.keys as Array<JsonWebKey & { kid?: string; use?: string }>) {
      if (!isObject(jwk) || (jwk.use !== undefined && jwk.use !== 'sig')) continue;
      let key: KeyObject;
      try {
        key = createPublicKey({ key: jwk, format: 'jwk' });
      } catch {
        continue; // a key type node:crypto does not know cannot verify anything here
      }
      const vk = { kid: jwk.kid ?? '', key };
      set.all.push(vk);
      if (vk.kid !== '') set.byKid.set(vk.kid, [...(set.byKid.get(vk.kid) ?? []), vk]);
      fingerprint.update(JSON.stringify(jwk));
    }
    set.fingerprint = fingerprint.digest('base64');
    return set;
  }
}
