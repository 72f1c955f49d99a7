// The claim checks of local service-account token verification, edge by edge, as the apiserver's
// authenticator (pkg/serviceaccount/jwt.go, claims.go) and go-jose decide them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import {
  checkAudiences,
  checkBound,
  checkTime,
  parseJws,
  readClaims,
  ServiceAccountTokenVerifier,
  signatureValid,
  userInfoFor,
  type ServiceAccountClaims,
} from '../../src/auth/satoken.ts';
import type { Store } from '../../src/store/store.ts';
import type { CachedObject } from '../../src/store/object.ts';

const b64 = (v: unknown): string => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');
const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
const ec = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
const ec384 = generateKeyPairSync('ec', { namedCurve: 'secp384r1' });

function jwt(header: unknown, payload: unknown, key: KeyObject = rsa.privateKey, alg = 'RS256'): string {
  const input = `${b64(header)}.${b64(payload)}`;
  const hash = `sha${alg.slice(2)}`;
  const sig = alg.startsWith('ES') ? sign(hash, Buffer.from(input), { key, dsaEncoding: 'ieee-p1363' }) : sign(hash, Buffer.from(input), key);
  return `${input}.${sig.toString('base64url')}`;
}

const NOW = 1_800_000_000_000;
const claims = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  iss: 'https://issuer',
  aud: ['https://issuer'],
  exp: NOW / 1000 + 3600,
  iat: NOW / 1000,
  nbf: NOW / 1000,
  jti: 'id-1',
  sub: 'system:serviceaccount:ns:sa',
  'kubernetes.io': { namespace: 'ns', serviceaccount: { name: 'sa', uid: 'sa-uid' } },
  ...extra,
});

test('only a plain compact JWS with alg, kid and typ in its header is read', () => {
  const ok = jwt({ alg: 'RS256', kid: 'k' }, claims());
  assert.ok(parseJws(ok));
  assert.equal(parseJws(ok.split('.').slice(0, 2).join('.')), undefined);
  assert.equal(parseJws(`${ok}.x`), undefined);
  assert.equal(parseJws(`${ok.slice(0, -2)}==`), undefined, 'padding');
  assert.equal(parseJws(` ${ok}`), undefined);
  assert.equal(parseJws(jwt({ alg: 'RS256', crit: ['exp'] }, claims())), undefined, 'crit');
  assert.equal(parseJws(jwt({ kid: 'k' }, claims())), undefined, 'no alg');
  assert.equal(parseJws(jwt({ alg: 'RS256', kid: 1 }, claims())), undefined, 'kid not a string');
  assert.equal(parseJws(jwt({ alg: 'RS256' }, [claims()])), undefined, 'payload not an object');
});

test('a document with duplicate members, which go-jose refuses, is not read', () => {
  const dup = JSON.stringify(claims()).replace('{', '{"exp":1,');
  assert.equal(parseJws(jwt({ alg: 'RS256' }, dup)), undefined);
  const nested = JSON.stringify(claims()).replace('"namespace":"ns"', '"namespace":"ns","namespace":"other"');
  assert.equal(parseJws(jwt({ alg: 'RS256' }, nested)), undefined);
  assert.equal(parseJws(jwt('{"alg":"RS256","alg":"none"}', claims())), undefined);
  // Colons and quotes inside strings are not members.
  assert.ok(parseJws(jwt({ alg: 'RS256' }, claims({ jti: 'a:"b\\":c' }))));
});

test('claims are read in the shapes the apiserver accepts, and unusual bindings are left to it', () => {
  const read = (c: Record<string, unknown>): ServiceAccountClaims | { reason: string } => readClaims(c);
  const ok = read(claims()) as ServiceAccountClaims;
  assert.deepEqual(ok.aud, ['https://issuer']);
  assert.equal((read(claims({ aud: 'https://issuer' })) as ServiceAccountClaims).aud[0], 'https://issuer');
  assert.equal((read(claims({ exp: NOW / 1000 + 0.9 })) as ServiceAccountClaims).exp, NOW / 1000, 'NumericDate truncates');
  const without = (key: string): Record<string, unknown> => Object.fromEntries(Object.entries(claims()).filter(([k]) => k !== key));
  assert.deepEqual(read(without('aud')), { reason: 'legacy' });
  assert.deepEqual(read(claims({ aud: [1] })), { reason: 'claims' });
  assert.deepEqual(read(claims({ aud: null })), { reason: 'claims' });
  assert.deepEqual(read(without('exp')), { reason: 'claims' });
  assert.deepEqual(read(claims({ exp: '1' })), { reason: 'claims' });
  assert.deepEqual(read(claims({ jti: 1 })), { reason: 'claims' });
  assert.deepEqual(read(claims({ 'kubernetes.io': { namespace: '', serviceaccount: { name: 'sa', uid: 'u' } } })), { reason: 'claims' });
  assert.deepEqual(read(claims({ 'kubernetes.io': { namespace: 'ns' } })), { reason: 'claims' });
  const k = (more: Record<string, unknown>): Record<string, unknown> => claims({ 'kubernetes.io': { namespace: 'ns', serviceaccount: { name: 'sa', uid: 'u' }, ...more } });
  assert.deepEqual(read(k({ secret: { name: 's', uid: 'x' } })), { reason: 'bound-object-kind' });
  assert.deepEqual(read(k({ node: { name: 'n', uid: 'x' } })), { reason: 'bound-object-kind' });
  assert.deepEqual(read(k({ validatingwebhookconfiguration: { name: 'v', uid: 'x' } })), { reason: 'bound-object-kind' });
  assert.deepEqual(read(k({ pod: { name: 'p' } })), { reason: 'claims' });
  const podNode = read(k({ pod: { name: 'p', uid: 'pu' }, node: { name: 'n', uid: 'nu' }, warnafter: 1 })) as ServiceAccountClaims;
  assert.deepEqual([podNode.pod, podNode.node], [{ name: 'p', uid: 'pu' }, { name: 'n', uid: 'nu' }]);
});

test("time is checked with go-jose's one-minute leeway, boundaries included", () => {
  const t = (exp: number, nbf?: number, iat?: number): string | undefined => checkTime({ exp, nbf, iat }, NOW);
  const s = NOW / 1000;
  assert.equal(t(s - 60), undefined, 'expired exactly a minute ago: still valid');
  assert.equal(checkTime({ exp: s - 60, nbf: undefined, iat: undefined }, NOW + 1), 'expired');
  assert.equal(t(s + 10, s + 60), undefined);
  assert.equal(t(s + 100, s + 61), 'not-yet-valid');
  assert.equal(t(s + 100, undefined, s + 61), 'not-yet-valid', 'issued in the future');
  assert.equal(t(s + 100, undefined, s + 60), undefined);
});

test('audiences must meet the API audiences Levee has learned', () => {
  assert.equal(checkAudiences(['a'], new Set()), 'audience-unknown');
  assert.equal(checkAudiences(['a', 'b'], new Set(['b'])), undefined);
  assert.equal(checkAudiences(['a'], new Set(['b'])), 'audience');
});

test("the user is ServiceAccountInfo.UserInfo()'s", () => {
  const base = readClaims(claims()) as ServiceAccountClaims;
  assert.deepEqual(userInfoFor(base), {
    username: 'system:serviceaccount:ns:sa',
    uid: 'sa-uid',
    groups: ['system:serviceaccounts', 'system:serviceaccounts:ns', 'system:authenticated'],
    extra: { 'authentication.kubernetes.io/credential-id': ['JTI=id-1'] },
  });
  const bound = { ...base, jti: '', pod: { name: 'p', uid: 'pu' }, node: { name: 'n', uid: '' } };
  assert.deepEqual(userInfoFor(bound).extra, {
    'authentication.kubernetes.io/pod-name': ['p'],
    'authentication.kubernetes.io/pod-uid': ['pu'],
    'authentication.kubernetes.io/node-name': ['n'],
  });
});

test('signatures: RS256..RS512 with RSA keys, ES256..ES512 on their own curves, nothing else', () => {
  const p = claims();
  const check = (token: string, key: KeyObject): boolean => signatureValid(parseJws(token)!, key);
  assert.ok(check(jwt({ alg: 'RS256' }, p), rsa.publicKey));
  assert.ok(check(jwt({ alg: 'RS512' }, p, rsa.privateKey, 'RS512'), rsa.publicKey));
  assert.ok(!check(jwt({ alg: 'RS384' }, p, rsa.privateKey, 'RS256'), rsa.publicKey), 'alg is the one signed with');
  assert.ok(check(jwt({ alg: 'ES256' }, p, ec.privateKey, 'ES256'), ec.publicKey));
  assert.ok(!check(jwt({ alg: 'ES384' }, p, ec.privateKey, 'ES384'), ec.publicKey), 'curve must match alg');
  assert.ok(check(jwt({ alg: 'ES384' }, p, ec384.privateKey, 'ES384'), ec384.publicKey));
  assert.ok(!check(jwt({ alg: 'ES256' }, p, ec.privateKey, 'ES256'), rsa.publicKey));
  assert.ok(!check(jwt({ alg: 'RS256' }, p), ec.publicKey));
  const token = jwt({ alg: 'RS256' }, p);
  assert.ok(!check(token.replace(/\.[^.]+$/, `.${b64('x')}`), rsa.publicKey));
  assert.ok(!check(`${token.split('.').slice(0, 2).join('.')}.${token.split('.')[2]!.slice(2)}`, rsa.publicKey), 'short signature');
  for (const alg of ['none', 'HS256', 'PS256']) assert.ok(!check(jwt({ alg }, p), rsa.publicKey), alg);
});

function resource(objects: Record<string, { uid: string; deletionTimestamp?: string }>, synced = true): Store {
  const store = {
    synced,
    get: (key: string): CachedObject | undefined => {
      const o = objects[key];
      return o ? ({ item: Buffer.from(JSON.stringify({ metadata: o })) } as CachedObject) : undefined;
    },
  };
  return store as unknown as Store;
}

test('bound objects must exist with the UID claimed and not be deleted more than a minute ago', () => {
  const ref = { name: 'p', uid: 'u' };
  const at = (ms: number): string => new Date(ms).toISOString();
  assert.equal(checkBound(resource({ '/ns/p': { uid: 'u' } }), 'ns', ref, NOW, 'pod'), undefined);
  assert.equal(checkBound(resource({ '/ns/p': { uid: 'u' } }, false), 'ns', ref, NOW, 'pod'), 'not-cached');
  assert.equal(checkBound(undefined, 'ns', ref, NOW, 'pod'), 'not-cached');
  assert.equal(checkBound(resource({}), 'ns', ref, NOW, 'pod'), 'pod');
  assert.equal(checkBound(resource({ '/ns/p': { uid: 'other' } }), 'ns', ref, NOW, 'pod'), 'pod');
  assert.equal(checkBound(resource({ '/ns/p': { uid: 'u', deletionTimestamp: at(NOW + 30_000) } }), 'ns', ref, NOW, 'pod'), undefined);
  assert.equal(checkBound(resource({ '/ns/p': { uid: 'u', deletionTimestamp: at(NOW - 60_000) } }), 'ns', ref, NOW, 'pod'), undefined);
  assert.equal(checkBound(resource({ '/ns/p': { uid: 'u', deletionTimestamp: at(NOW - 61_000) } }), 'ns', ref, NOW, 'service-account'), 'service-account');
});

test('the verifier fetches keys again for an unknown key id, at most once per interval', async () => {
  let now = NOW;
  const fetched: string[] = [];
  let keys = [{ ...rsa.publicKey.export({ format: 'jwk' }), kid: 'old', use: 'sig', alg: 'RS256' }];
  const verifier = new ServiceAccountTokenVerifier({
    fetch: <T>(path: string): Promise<T> => {
      fetched.push(path);
      return Promise.resolve((path.includes('openid-configuration') ? { issuer: 'https://issuer' } : { keys }) as T);
    },
    objects: () => resource({ '/ns/sa': { uid: 'sa-uid' } }),
    now: () => now,
    unknownKeyRefreshMs: 10_000,
  });
  verifier.learnAudiences(['https://issuer']);
  const other = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const token = jwt({ alg: 'RS256', kid: 'new' }, claims(), other.privateKey);
  now += 10_000;
  assert.deepEqual(await verifier.verify(jwt({ alg: 'RS256', kid: 'old' }, claims())), {
    verified: true,
    user: userInfoFor(readClaims(claims()) as ServiceAccountClaims),
  });
  const first = fetched.length;
  now += 10_000;
  assert.deepEqual(await verifier.verify(token), { verified: false, reason: 'unknown-key' });
  assert.equal(fetched.length, first + 2, 'an unknown key id fetched discovery and keys again');
  assert.deepEqual(await verifier.verify(token), { verified: false, reason: 'unknown-key' });
  assert.equal(fetched.length, first + 2, 'not again within the interval');
  keys = [...keys, { ...other.publicKey.export({ format: 'jwk' }), kid: 'new', use: 'sig', alg: 'RS256' }];
  now += 10_000;
  assert.equal((await verifier.verify(token)).verified, true);
  // A token signed with a key the apiserver no longer publishes is not accepted from memory.
  keys = keys.slice(1);
  now += 10_000;
  await verifier.verify(jwt({ alg: 'RS256', kid: 'missing' }, claims()));
  assert.deepEqual(await verifier.verify(jwt({ alg: 'RS256', kid: 'old' }, claims())), { verified: false, reason: 'unknown-key' });
  assert.deepEqual(await verifier.verify(jwt({ alg: 'RS256', kid: 'new' }, claims({ iss: 'https://other' }), other.privateKey)), { verified: false, reason: 'issuer' });
  // Learned audiences are trusted for a while only: the apiserver's may change.
  now += 11 * 60_000;
  assert.deepEqual(await verifier.verify(token), { verified: false, reason: 'audience-unknown' });
});

test("one token's requests arriving together share one signature check", async () => {
  const verifier = new ServiceAccountTokenVerifier({
    fetch: <T>(path: string): Promise<T> =>
      Promise.resolve((path.includes('openid-configuration') ? { issuer: 'https://issuer' } : { keys: [{ ...rsa.publicKey.export({ format: 'jwk' }), kid: 'k', use: 'sig' }] }) as T),
    objects: () => resource({ '/ns/sa': { uid: 'sa-uid' } }),
    now: () => NOW,
  });
  verifier.learnAudiences(['https://issuer']);
  const token = jwt({ alg: 'RS256', kid: 'k' }, claims());
  await verifier.verify(jwt({ alg: 'RS256', kid: 'k' }, claims({ jti: 'warm' })));
  const before = verifier.counts.signatures;
  const [a, b] = await Promise.all([verifier.verify(token), verifier.verify(token)]);
  assert.equal(a.verified && b.verified, true);
  assert.equal(verifier.counts.signatures, before + 1);
  // A bad signature is not remembered as checked: it is refused each time, and checked each time.
  const forged = `${token.slice(0, token.lastIndexOf('.'))}.${b64('x'.repeat(256))}`;
  assert.deepEqual(await Promise.all([verifier.verify(forged), verifier.verify(forged)]), [
    { verified: false, reason: 'signature' },
    { verified: false, reason: 'signature' },
  ]);
  assert.equal(verifier.counts.signatures, before + 2);
  assert.deepEqual(await verifier.verify(forged), { verified: false, reason: 'signature' });
  assert.equal(verifier.counts.signatures, before + 3);
});
