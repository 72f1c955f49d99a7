// Continue tokens in the apiserver's own format (k8s.io/apiserver/pkg/storage/continue.go):
// base64url (no padding) of {"v":"meta.k8s.io/v1","rv":N,"start":"<key below the list prefix>"},
// so a token Levee issues can also be served by the apiserver and the other way round.

export interface ContinueToken {
  resourceVersion: number;
  /** The start key relative to the list's prefix, as in the token ("/name\u0000" or "/ns/name\u0000"). */
  start: string;
}

export function encodeContinue(resourceVersion: number, lastKeyRelative: string): string {
  // The next page starts right after the last key returned.
  const json = JSON.stringify({ v: 'meta.k8s.io/v1', rv: resourceVersion, start: `${lastKeyRelative}\u0000` });
  return Buffer.from(json).toString('base64url');
}

/**
 * Undefined for anything the apiserver would reject or that Levee cannot serve (it then forwards).
 * Levee serves only a token written exactly as the apiserver and Levee write them (json.Marshal of
 * the struct, base64.RawURLEncoding): whatever else the apiserver might still read (padding, keys in
 * another case or order, `5.0`, a key `path.Clean` changes, which it refuses) is its to judge.
 */
export function decodeContinue(token: string): ContinueToken | undefined {
  // RawURLEncoding: the URL alphabet without padding; 4n+1 characters encode no whole byte.
  if (!/^[A-Za-z0-9_-]+$/.test(token) || token.length % 4 === 1) return undefined;
  const raw = Buffer.from(token, 'base64url');
  let t: { v?: unknown; rv?: unknown; start?: unknown };
  try {
    t = JSON.parse(raw.toString('utf8')) as typeof t;
  } catch {
    return undefined;
  }
  if (t.v !== 'meta.k8s.io/v1' || typeof t.rv !== 'number' || !Number.isSafeInteger(t.rv) || t.rv <= 0) return undefined;
  if (typeof t.start !== 'string' || !t.start.startsWith('/') || !isCleanPath(t.start)) return undefined;
  if (!raw.equals(Buffer.from(`{"v":"meta.k8s.io/v1","rv":${t.rv},"start":${goJSONString(t.start)}}`))) return undefined;
  return { resourceVersion: t.rv, start: t.start };
}

/**
 * Whether Go's path.Clean leaves a rooted path as it is: the apiserver refuses a start key it would
 * change ("continue key is not valid"), which keeps a token from reaching above its list's prefix.
 */
function isCleanPath(p: string): boolean {
  if (p === '/') return true;
  return !p.endsWith('/') && p.slice(1).split('/').every((segment) => segment !== '' && segment !== '.' && segment !== '..');
}

/** A string as encoding/json writes it: HTML-safe (<, >, & escaped) and with U+2028 and U+2029 escaped. */
function goJSONString(s: string): string {
  return JSON.stringify(s).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
