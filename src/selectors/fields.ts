// Field selectors as the apiserver parses (fields.ParseSelector) and matches them. The grammar is
// an AND of "field=value", "field==value" or "field!=value" terms split on unescaped commas; only
// the value side knows escapes (\\ \, \=), the field side is everything before the first operator.
import { SelectorParseError } from './errors.ts';
import { compareGo } from './gostrings.ts';
import { ParseMemo } from './memo.ts';

export { SelectorParseError };

export interface FieldTerm {
  readonly field: string;
  // "==" parses to the same term as "=".
  readonly op: '=' | '!=';
  readonly value: string;
}

// fields.TransformFunc: maps a term's field and value; both empty drops the term.
export type FieldTransform = (field: string, value: string) => [field: string, value: string];

export class FieldSelector {
  // In the order ParseSelector leaves them: the raw terms sorted byte-wise.
  readonly terms: readonly FieldTerm[];
  readonly empty: boolean;

  constructor(terms: readonly FieldTerm[]) {
    // A copy of exactly their length: an array built by push has room for 17 terms, 150 bytes that
    // every watch with a selector would keep for as long as it lasts.
    this.terms = terms.slice();
    this.empty = terms.length === 0;
  }

  // A field missing from the set reads as "" (fields.Set.Get).
  matches(fields: Readonly<Record<string, string>>): boolean {
    for (const t of this.terms) {
      const actual = Object.hasOwn(fields, t.field) ? fields[t.field] : '';
      if ((actual === t.value) !== (t.op === '=')) return false;
    }
    return true;
  }

  // Selector.RequiresExactMatch: the value of the first "=" term on that field; "!=" terms never pin.
  exact(field: string): string | undefined {
    return this.terms.find((t) => t.op === '=' && t.field === field)?.value;
  }

  // Selector.Transform, as the apiserver applies its field label conversion to every term. A term
  // whose field and value both map to "" is dropped. fn may throw to reject a term.
  transform(fn: FieldTransform): FieldSelector {
    if (this.empty) return this;
    const terms: FieldTerm[] = [];
    for (const t of this.terms) {
      const [field, value] = fn(t.field, t.value);
      if (field.length === 0 && value.length === 0) continue;
      terms.push({ field, op: t.op, value });
    }
    return new FieldSelector(terms);
  }

  // Selector.String(): "==" renders as "=", values re-escaped.
  toString(): string {
    return this.terms.map((t) => t.field + t.op + escapeFieldValue(t.value)).join(',');
  }
}

// Selectors are immutable, and most watches and lists have none: they share one.
const EVERYTHING = new FieldSelector([]);

// fields.EscapeValue.
export function escapeFieldValue(value: string): string {
  return value.replace(/[\\,=]/g, (c) => '\\' + c);
}

// fields.UnescapeValue. Unknown escapes (including "\!", which the value side never needs) and
// unescaped "=" are errors; the rune in the latter is printed as its number, as Go's %v does.
export function unescapeFieldValue(s: string): string {
  if (!/[\\,=]/.test(s)) return s;
  let out = '';
  let inSlash = false;
  for (const c of s) {
    if (inSlash) {
      if (c !== '\\' && c !== ',' && c !== '=') {
        throw new SelectorParseError(`invalid field selector: invalid escape sequence: \\${c}`);
      }
      out += c;
      inSlash = false;
    } else if (c === '\\') {
      inSlash = true;
    } else if (c === ',' || c === '=') {
      throw new SelectorParseError(`invalid field selector: unescaped character in value: ${c.codePointAt(0)}`);
    } else {
      out += c;
    }
  }
  if (inSlash) throw new SelectorParseError('invalid field selector: invalid escape sequence: \\');
  return out;
}

// splitTerms: commas split terms unless escaped; the escape is kept for unescapeFieldValue.
function splitTerms(selector: string): string[] {
  if (selector.length === 0) return [];
  const terms: string[] = [];
  let start = 0;
  let inSlash = false;
  for (let i = 0; i < selector.length; i++) {
    const c = selector[i];
    if (inSlash) {
      inSlash = false;
    } else if (c === '\\') {
      inSlash = true;
    } else if (c === ',') {
      terms.push(selector.slice(start, i));
      start = i + 1;
    }
  }
  terms.push(selector.slice(start));
  return terms;
}

// splitTerm: the first position where "!=", "==" or "=" starts (in that order of preference).
const OPERATORS = ['!=', '==', '='] as const;
function splitTerm(term: string): [string, string, string] | undefined {
  for (let i = 0; i < term.length; i++) {
    for (const op of OPERATORS) {
      if (term.startsWith(op, i)) return [term.slice(0, i), op, term.slice(i + op.length)];
    }
  }
  return undefined;
}

// fields.ParseSelector. Throws SelectorParseError with apimachinery's message. No whitespace is
// trimmed anywhere: " a = b" selects field " a " against value " b".
export function parseFieldSelector(selector: string): FieldSelector {
  if (selector === '') return EVERYTHING;
  return parsedFields.get(selector);
}

const parsedFields = new ParseMemo(parseFields, { max: 1024, maxKeyLength: 1024 });

function parseFields(selector: string): FieldSelector {
  // Terms are sorted before parsing, so with several bad terms the error names the first in
  // byte order, not in input order.
  const parts = splitTerms(selector).sort(compareGo);
  const terms: FieldTerm[] = [];
  for (const part of parts) {
    if (part === '') continue;
    const split = splitTerm(part);
    if (split === undefined) throw new SelectorParseError(`invalid selector: '${selector}'; can't understand '${part}'`);
    const [field, op, rhs] = split;
    terms.push({ field, op: op === '!=' ? '!=' : '=', value: unescapeFieldValue(rhs) });
  }
  // ParseSelector ends with an identity Transform, which drops bare "=", "==" and "!=" terms.
  return new FieldSelector(terms).transform((field, value) => [field, value]);
}
