// Finding values inside a stored object's JSON bytes without parsing the object: the spans of an
// object's members, so a representation can reuse the apiserver's own bytes for a part of it
// (docs/design.md, "Representations").

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const COLON = 0x3a;
const COMMA = 0x2c;

export class MalformedJson extends Error {}

function skipSpace(b: Uint8Array, i: number): number {
  while (i < b.length && (b[i] === 0x20 || b[i] === 0x0a || b[i] === 0x0d || b[i] === 0x09)) i++;
  return i;
}

// The index after the string whose opening quote is at i.
function stringEnd(b: Uint8Array, i: number): number {
  for (let j = i + 1; j < b.length; j++) {
    if (b[j] === BACKSLASH) j++;
    else if (b[j] === QUOTE) return j + 1;
  }
  throw new MalformedJson('unterminated string');
}

/** The index just after the JSON value that begins at `i` (whitespace before it is skipped). */
export function valueEnd(b: Uint8Array, i: number): number {
  i = skipSpace(b, i);
  const c = b[i];
  if (c === QUOTE) return stringEnd(b, i);
  if (c !== OPEN_BRACE && c !== OPEN_BRACKET) {
    // A number, true, false or null: up to the next delimiter.
    let j = i;
    while (j < b.length && b[j] !== COMMA && b[j] !== CLOSE_BRACE && b[j] !== CLOSE_BRACKET && b[j] !== 0x20 && b[j] !== 0x0a && b[j] !== 0x0d && b[j] !== 0x09) j++;
    if (j === i) throw new MalformedJson(`no value at ${i}`);
    return j;
  }
  let depth = 0;
  for (let j = i; j < b.length; j++) {
    const d = b[j];
    if (d === QUOTE) j = stringEnd(b, j) - 1;
    else if (d === OPEN_BRACE || d === OPEN_BRACKET) depth++;
    else if (d === CLOSE_BRACE || d === CLOSE_BRACKET) {
      depth--;
      if (depth === 0) return j + 1;
    }
  }
  throw new MalformedJson('unterminated value');
}

/** A member's value: where it starts and ends in the buffer. */
export interface Span {
  start: number;
  end: number;
}

/** Each member of the object that begins at `i`, by key, with the span of its value. */
export function members(b: Uint8Array, i: number): Map<string, Span> {
  const out = new Map<string, Span>();
  i = skipSpace(b, i);
  if (b[i] !== OPEN_BRACE) throw new MalformedJson(`no object at ${i}`);
  i = skipSpace(b, i + 1);
  if (b[i] === CLOSE_BRACE) return out;
  for (;;) {
    if (b[i] !== QUOTE) throw new MalformedJson(`no key at ${i}`);
    const keyEnd = stringEnd(b, i);
    const raw = Buffer.from(b.buffer, b.byteOffset + i, keyEnd - i);
    const key = raw.includes(BACKSLASH) ? (JSON.parse(raw.toString('utf8')) as string) : raw.toString('utf8', 1, raw.length - 1);
    i = skipSpace(b, keyEnd);
    if (b[i] !== COLON) throw new MalformedJson(`no colon at ${i}`);
    const start = skipSpace(b, i + 1);
    const end = valueEnd(b, start);
    out.set(key, { start, end });
    i = skipSpace(b, end);
    if (b[i] === CLOSE_BRACE) return out;
    if (b[i] !== COMMA) throw new MalformedJson(`no comma at ${i}`);
    i = skipSpace(b, i + 1);
  }
}
