// A request's query as the apiserver reads it: Go's url.ParseQuery, which drops a pair that holds
// ";" or a malformed escape (and keeps reading), where URLSearchParams keeps both as text. Every
// decision Levee takes from the query reads this view, so `watch=1;x=y` is no watch and
// `resourceVersion=%zz` no resourceVersion at either.
import { ParseMemo } from '../selectors/memo.ts';

/** url.ParseQuery's pairs, as bytes, in order. The request target's characters are its bytes. */
export function goQueryPairs(rawQuery: string): Array<[Buffer, Buffer]> {
  const out: Array<[Buffer, Buffer]> = [];
  for (const pair of rawQuery.split('&')) {
    const kv = goPair(pair);
    if (kv) out.push(kv);
  }
  return out;
}

/** One pair as url.ParseQuery keeps it, as bytes; undefined when it drops the pair. */
function goPair(pair: string): [Buffer, Buffer] | undefined {
  if (pair === '' || pair.includes(';')) return undefined;
  const eq = pair.indexOf('=');
  const k = unescapeQuery(eq === -1 ? pair : pair.slice(0, eq));
  const v = unescapeQuery(eq === -1 ? '' : pair.slice(eq + 1));
  return k !== undefined && v !== undefined ? [k, v] : undefined;
}

// A pair of printable ASCII with nothing to unescape and no ";" reads the same as text as it does
// as bytes: most pairs (every one client-go sends, but for a selector's), read on each request.
const PLAIN_PAIR = /^[!-$&-*,-:<-~]*$/;

/** The pairs url.ParseQuery keeps, as text (bytes that are no UTF-8 read as U+FFFD). */
export function goQuery(rawQuery: string): URLSearchParams {
  return parsedQueries.get(rawQuery);
}

// Shared by the stages that read one request's query, and by requests that repeat one: readers
// only get from it, never set.
const parsedQueries = new ParseMemo(parseGoQuery, { max: 256, maxKeyLength: 2048 });

function parseGoQuery(rawQuery: string): URLSearchParams {
  const q = new URLSearchParams();
  for (const pair of rawQuery.split('&')) {
    if (pair === '') continue;
    if (PLAIN_PAIR.test(pair)) {
      const eq = pair.indexOf('=');
      if (eq === -1) q.append(pair, '');
      else q.append(pair.slice(0, eq), pair.slice(eq + 1));
      continue;
    }
    // Only a pair with an escape (a selector's "%3D") is read as bytes: ~10 µs a request when the
    // whole query was, for a LIST by node.
    const kv = goPair(pair);
    if (kv) q.append(kv[0].toString('utf8'), kv[1].toString('utf8'));
  }
  return q;
}

/** url.Values.Get, as bytes: the first value for `key` among the pairs kept. */
export function goQueryFirst(rawQuery: string, key: string): Buffer | undefined {
  // Every request asks for `timeout`, twice, and almost none sends it: the query is read only when
  // some pair may be named so. An escape elsewhere (a selector's value) is no reason to.
  if (!mayName(rawQuery, key)) return undefined;
  return goQueryPairs(rawQuery).find(([k]) => k.toString('latin1') === key)?.[1];
}

/**
 * Whether some pair of the query may be named `key`: its name is written out as `key`, or holds an
 * escape ("%XX", or "+" for a space) that could read as it. Looks at the names without copying them.
 */
function mayName(rawQuery: string, key: string): boolean {
  for (let start = 0; start <= rawQuery.length; ) {
    let end = rawQuery.indexOf('&', start);
    if (end === -1) end = rawQuery.length;
    let eq = rawQuery.indexOf('=', start);
    if (eq === -1 || eq > end) eq = end;
    if (eq - start === key.length && rawQuery.startsWith(key, start)) return true;
    for (let i = start; i < eq; i++) {
      const c = rawQuery.charCodeAt(i);
      if (c === 0x25 || c === 0x2b) return true;
    }
    start = end + 1;
  }
  return false;
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
