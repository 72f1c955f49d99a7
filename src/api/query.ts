// A request's query as the apiserver reads it: Go's url.ParseQuery, which drops a pair that holds
// ";" or a malformed escape (and keeps reading), where URLSearchParams keeps both as text. Every
// decision Levee takes from the query reads this view, so `watch=1;x=y` is no watch and
// `resourceVersion=%zz` no resourceVersion at either.

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

/** The pairs url.ParseQuery keeps, as text (bytes that are no UTF-8 read as U+FFFD). */
export function goQuery(rawQuery: string): URLSearchParams {
  const q = new URLSearchParams();
  for (const [k, v] of goQueryPairs(rawQuery)) q.append(k.toString('utf8'), v.toString('utf8'));
  return q;
}

/** url.Values.Get, as bytes: the first value for `key` among the pairs kept. */
export function goQueryFirst(rawQuery: string, key: string): Buffer | undefined {
  return goQueryPairs(rawQuery).find(([k]) => k.toString('latin1') === key)?.[1];
}

const HEX = /^[0-9A-Fa-f]{2}$/;

// QueryUnescape: %XX is a byte, "+" a space; a "%" without two hex digits is an error.
function unescapeQuery(s: string): Buffer | undefined {
  const raw = Buffer.from(s, 'latin1');
  const out: number[] = [];
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]!;
    if (c === 0x25) {
      const hex = raw.subarray(i + 1, i + 3).toString('latin1');
      if (!HEX.test(hex)) return undefined;
      out.push(parseInt(hex, 16));
      i += 2;
    } else out.push(c === 0x2b ? 0x20 : c);
  }
  return Buffer.from(out);
}

/** The query part of a request target, as sent. */
export function rawQueryOf(url: string): string {
  const q = url.indexOf('?');
  return q === -1 ? '' : url.slice(q + 1);
}
