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

/** Undefined for anything the apiserver would reject or that Levee cannot serve (it then forwards). */
export function decodeContinue(token: string): ContinueToken | undefined {
  if (!/^[A-Za-z0-9_-]+={0,2}$/.test(token)) return undefined;
  try {
    const t = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as { v?: unknown; rv?: unknown; start?: unknown };
    if (t.v !== 'meta.k8s.io/v1' || typeof t.rv !== 'number' || !Number.isSafeInteger(t.rv) || t.rv <= 0) return undefined;
    if (typeof t.start !== 'string' || !t.start.startsWith('/')) return undefined;
    return { resourceVersion: t.rv, start: t.start };
  } catch {
    return undefined;
  }
}
