// A request's query as the apiserver reads it: Go's url.ParseQuery, which drops a pair that holds
// ";" or a malformed escape (and keeps reading), where URLSearchParams keeps both as text. Every
// decision Levee takes from the query reads this view, so `watch=1;x=y` is no watch and
// `resourceVersion=%zz` no resourceVersion at either.
import { ParseMemo } from '../selectors/memo.ts';

/** url.ParseQuery's pairs, as bytes, in order. The request target's characters are its bytes. */
export function goQueryPairs(rawQuery: string): Array<[Buffer, Buffer]> {
  const out: Array<[Buffer, Buffer]> = [];
  for (const pair of rawQuery.split('&')) {
    if (pair === '' || pair.includes(';')) continue;
    const eq = pair.indexOf('=');
    const k = unescapeQuery(eq === -1 ? pair : pair.slice(0, eq));
    const v = unescapeQuery(eq === -1 ? '' : pair.slice(eq + 1));
    if (k !== undefined && v !== undefined) out.push([k, v]);
  }
  return out;
}

// A query of printable ASCII with nothing to unescape and no ";" reads the same as text as it does
// as bytes: most queries (every one client-go sends without a selector), read on each request.
const PLAIN_QUERY = /^[!-$&-*,-:<-~]*$/;

/** The pairs url.ParseQuery keeps, as text (bytes that are no UTF-8 read as U+FFFD). */
export function goQuery(rawQuery: string): URLSearchParams {
  return parsedQueries.get(rawQuery);
}

// Shared by the stages that read one request's query, and by requests that repeat one: readers
// only get from it, never set.
const parsedQueries = new ParseMemo(parseGoQuery, { max: 256, maxKeyLength: 2048 });

function parseGoQuery(rawQuery: string): URLSearchParams {
  const q = new URLSearchParams();
  if (PLAIN_QUERY.test(rawQuery)) {
    for (const pair of rawQuery.split('&')) {
      if (pair === '') continue;
      const eq = pair.indexOf('=');
      if (eq === -1) q.append(pair, '');
      else q.append(pair.slice(0, eq), pair.slice(eq + 1));
    }
    return q;
  }
  for (const [k, v] of goQueryPairs(rawQuery)) q.append(k.toString('utf8'), v.toString('utf8'));
  return q;
}

/** url.Values.Get, as bytes: the first value for `key` among the pairs kept. */
export function goQueryFirst(rawQuery: string, key: string): Buffer | undefined {
  // Without an escape ("%XX", or "+" for a space) a pair can only be named `key` if `key` is
  // written out: every request asks for `timeout`, and almost none sends it.
  if (!key.includes(' ') && !rawQuery.includes(key) && !rawQuery.includes('%')) return undefined;
  return goQueryPairs(rawQuery).find(([k]) => k.toString('latin1') === key)?.[1];
}

/** A hex digit's value, or -1. */
function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  return -1;
}

// QueryUnescape: %XX is a byte, "+" a space; a "%" without two hex digits is an error. The result
// is never longer than the input, so it is written in place into the input's bytes.
function unescapeQuery(s: string): Buffer | undefined {
  const raw = Buffer.from(s, 'latin1');
  let n = 0;
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]!;
    if (c === 0x25) {
      const hi = i + 2 < raw.length ? hexValue(raw[i + 1]!) : -1;
      const lo = hi === -1 ? -1 : hexValue(raw[i + 2]!);
      if (lo === -1) return undefined;
      raw[n++] = hi * 16 + lo;
      i += 2;
    } else raw[n++] = c === 0x2b ? 0x20 : c;
  }
  return raw.subarray(0, n);
}

/** The query part of a request target, as sent. */
export function rawQueryOf(url: string): string {
  const q = url.indexOf('?');
  return q === -1 ? '' : url.slice(q + 1);
}
