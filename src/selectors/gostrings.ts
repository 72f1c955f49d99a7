// Go string semantics that show through in selector behaviour: byte-wise ordering (sort.Strings,
// sets.String.List, Go's < on strings), byte lengths (len), and %q quoting in error messages.

// Orders as Go compares strings: by UTF-8 bytes, which is code point order. UTF-16 code units
// differ from that only where a surrogate (an astral character) meets U+E000..U+FFFF.
export function compareGo(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return codePointRank(x) - codePointRank(y);
  }
  return a.length - b.length;
}

function codePointRank(unit: number): number {
  if (unit < 0xd800) return unit;
  return unit >= 0xe000 ? unit - 0x800 : unit + 0x2000;
}

export function byteLength(s: string): number {
  return Buffer.byteLength(s, 'utf8');
}

// strconv.IsPrint: letters, marks, numbers, punctuation, symbols and the ASCII space.
const printable = /^[\p{L}\p{M}\p{N}\p{P}\p{S} ]$/u;

const shortEscapes: Readonly<Record<number, string>> = {
  0x07: '\\a', 0x08: '\\b', 0x0c: '\\f', 0x0a: '\\n', 0x0d: '\\r', 0x09: '\\t', 0x0b: '\\v',
};

// fmt's %q for a string (strconv.Quote), as field.Error renders a bad string value.
export function goQuote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const cp = ch.codePointAt(0) ?? 0;
    if (ch === '"' || ch === '\\') {
      out += '\\' + ch;
    } else if (printable.test(ch)) {
      out += ch;
    } else if (shortEscapes[cp] !== undefined) {
      out += shortEscapes[cp];
    } else if (cp < 0x20 || cp === 0x7f) {
      out += '\\x' + hex(cp, 2);
    } else if (cp >= 0xd800 && cp <= 0xdfff) {
      // A lone surrogate; Go would see invalid UTF-8 here, which has no JS string equivalent.
      out += '\\ufffd';
    } else if (cp < 0x10000) {
      out += '\\u' + hex(cp, 4);
    } else {
      out += '\\U' + hex(cp, 8);
    }
  }
  return out + '"';
}

function hex(n: number, width: number): string {
  return n.toString(16).padStart(width, '0');
}
