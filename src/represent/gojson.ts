// JSON values written as Go's encoding/json writes them, which is how the apiserver writes every
// byte of its JSON answers: strings with <, > and & escaped (\u003c), U+2028 and U+2029 escaped,
// control characters as \n or \u00XX; float64 as ES6 would write it but for -0; map keys sorted
// by their bytes. Only what Levee writes itself goes through here: stored objects keep the bytes
// the apiserver gave them.
import { compareGo } from '../selectors/gostrings.ts';

const HEX = '0123456789abcdef';

// Characters encoding/json escapes with HTML escaping on (its default, and the apiserver's).
// eslint-disable-next-line no-control-regex
const NEEDS_ESCAPE = /["\\<>&\u0000-\u001f\u2028\u2029]/;

/** A string as encoding/json writes it (appendString with escapeHTML). */
export function goString(s: string): string {
  if (!NEEDS_ESCAPE.test(s)) return `"${s}"`;
  let out = '"';
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    let esc: string | undefined;
    if (c === 0x22) esc = '\\"';
    else if (c === 0x5c) esc = '\\\\';
    else if (c === 0x08) esc = '\\b';
    else if (c === 0x0c) esc = '\\f';
    else if (c === 0x0a) esc = '\\n';
    else if (c === 0x0d) esc = '\\r';
    else if (c === 0x09) esc = '\\t';
    else if (c < 0x20 || c === 0x3c || c === 0x3e || c === 0x26) esc = `\\u00${HEX[c >> 4]}${HEX[c & 0xf]}`;
    else if (c === 0x2028 || c === 0x2029) esc = `\\u202${HEX[c & 0xf]}`;
    if (esc === undefined) continue;
    out += s.slice(start, i) + esc;
    start = i + 1;
  }
  return out + s.slice(start) + '"';
}

/** A float64 as encoding/json writes it: ES6's shortest form, and -0 keeps its sign. */
export function goFloat(f: number): string {
  if (!Number.isFinite(f)) throw new RangeError(`json: unsupported value: ${f}`);
  if (Object.is(f, -0)) return '-0';
  return String(f);
}

/**
 * A value of an unstructured object (the apiserver's map[string]interface{}: unstructured.ts) as
 * json.Marshal writes it: int64 (bigint) as digits, float64 (number) as goFloat, keys sorted.
 */
export function goMarshal(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  switch (typeof v) {
    case 'string':
      return goString(v);
    case 'boolean':
      return v ? 'true' : 'false';
    case 'bigint':
      return v.toString();
    case 'number':
      return goFloat(v);
    default:
  }
  if (Array.isArray(v)) return `[${v.map(goMarshal).join(',')}]`;
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o).sort(compareGo);
  return `{${keys.map((k) => `${goString(k)}:${goMarshal(o[k])}`).join(',')}}`;
}
