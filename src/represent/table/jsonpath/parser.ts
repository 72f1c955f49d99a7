// client-go's JSONPath parser (k8s.io/client-go/util/jsonpath/parser.go), ported line for line:
// custom resources' printer columns are evaluated by it, and no JSONPath library on npm reads
// the same dialect (its {…} actions, filters with quoted or bare operands, unions, slices and
// `..`) with the same results and the same errors.

export type Node =
  | { type: 'list'; nodes: Node[] }
  | { type: 'text'; text: string }
  | { type: 'field'; value: string }
  | { type: 'identifier'; name: string }
  | { type: 'array'; params: [Param, Param, Param] }
  | { type: 'filter'; left: ListNode; right: ListNode; operator: string }
  | { type: 'int'; value: bigint }
  | { type: 'float'; value: number }
  | { type: 'wildcard' }
  | { type: 'recursive' }
  | { type: 'union'; nodes: ListNode[] }
  | { type: 'bool'; value: boolean };

export type ListNode = Extract<Node, { type: 'list' }>;

/** ParamsEntry: one of an array selection's start, end and step. */
export interface Param {
  value: number;
  known: boolean;
  derived: boolean;
}

export class JsonPathSyntaxError extends Error {}

const EOF = -1;
const LEFT = '{';
const RIGHT = '}';
const DICT_KEY = /^'([^']*)'$/;
const SLICE = /^(-?\d*)(:-?\d*)?(:-?\d*)?$/;
const FILTER = /^([^!<>=]+)([!<>=]+)(.+?)$/;

const list = (): ListNode => ({ type: 'list', nodes: [] });

/** Parses a template such as `{.status.conditions[?(@.type=="Ready")].status}`. */
export function parse(text: string): ListNode {
  const p = new Parser(text);
  p.parseText(p.root);
  return p.root;
}

// parseAction: the expression inside one pair of braces.
function parseAction(text: string): ListNode {
  const root = parse(`${LEFT}${text}${RIGHT}`);
  return root.nodes[0] as ListNode;
}

class Parser {
  readonly root = list();
  readonly input: string;
  pos = 0;
  start = 0;
  width = 0;

  constructor(input: string) {
    this.input = input;
  }

  consumeText(): string {
    const value = this.input.slice(this.start, this.pos);
    this.start = this.pos;
    return value;
  }

  next(): number {
    if (this.pos >= this.input.length) {
      this.width = 0;
      return EOF;
    }
    const r = this.input.codePointAt(this.pos)!;
    this.width = r > 0xffff ? 2 : 1;
    this.pos += this.width;
    return r;
  }

  peek(): number {
    const r = this.next();
    this.backup();
    return r;
  }

  backup(): void {
    this.pos -= this.width;
  }

  parseText(cur: ListNode): void {
    for (;;) {
      if (this.input.startsWith(LEFT, this.pos)) {
        if (this.pos > this.start) cur.nodes.push({ type: 'text', text: this.consumeText() });
        this.parseLeftDelim(cur);
        return;
      }
      if (this.next() === EOF) break;
    }
    if (this.pos > this.start) cur.nodes.push({ type: 'text', text: this.consumeText() });
  }

  parseLeftDelim(cur: ListNode): void {
    this.pos += LEFT.length;
    this.consumeText();
    const node = list();
    cur.nodes.push(node);
    this.parseInsideAction(node);
  }

  parseInsideAction(cur: ListNode): void {
    for (;;) {
      const rest = this.input.slice(this.pos);
      if (rest.startsWith(RIGHT)) return this.parseRightDelim();
      if (rest.startsWith('[?(')) return this.parseFilter(cur);
      if (rest.startsWith('..')) return this.parseRecursive(cur);
      const r = this.next();
      if (r === EOF || isEndOfLine(r)) throw new JsonPathSyntaxError('unclosed action');
      if (r === 0x20 || r === 0x40 /* @ */ || r === 0x24 /* $ */) {
        // A space, or the current object: passed over.
        this.consumeText();
        continue;
      }
      if (r === 0x5b /* [ */) return this.parseArray(cur);
      if (r === 0x22 || r === 0x27) return this.parseQuote(cur, r);
      if (r === 0x2e /* . */) return this.parseField(cur);
      if (r === 0x2b || r === 0x2d || isDigit(r)) {
        this.backup();
        return this.parseNumber(cur);
      }
      if (isAlphaNumeric(r)) {
        this.backup();
        return this.parseIdentifier(cur);
      }
      throw new JsonPathSyntaxError(`unrecognized character in action: U+${r.toString(16).toUpperCase().padStart(4, '0')}`);
    }
  }

  parseRightDelim(): void {
    this.pos += RIGHT.length;
    this.consumeText();
    this.parseText(this.root);
  }

  parseIdentifier(cur: ListNode): void {
    for (;;) {
      const r = this.next();
      if (isTerminator(r)) {
        this.backup();
        break;
      }
    }
    const value = this.consumeText();
    if (value === 'true' || value === 'false') cur.nodes.push({ type: 'bool', value: value === 'true' });
    else cur.nodes.push({ type: 'identifier', name: value });
    this.parseInsideAction(cur);
  }

  parseRecursive(cur: ListNode): void {
    if (cur.nodes.at(-1)?.type === 'recursive') throw new JsonPathSyntaxError('invalid multiple recursive descent');
    this.pos += 2;
    this.consumeText();
    cur.nodes.push({ type: 'recursive' });
    if (isAlphaNumeric(this.peek())) return this.parseField(cur);
    this.parseInsideAction(cur);
  }

  parseNumber(cur: ListNode): void {
    let r = this.peek();
    if (r === 0x2b || r === 0x2d) this.next();
    for (;;) {
      r = this.next();
      if (r !== 0x2e && !isDigit(r)) {
        this.backup();
        break;
      }
    }
    const value = this.consumeText();
    const i = atoi(value);
    if (i !== undefined) cur.nodes.push({ type: 'int', value: i });
    else {
      const f = parseFloat64(value);
      if (f === undefined) throw new JsonPathSyntaxError(`cannot parse number ${value}`);
      cur.nodes.push({ type: 'float', value: f });
    }
    this.parseInsideAction(cur);
  }

  parseArray(cur: ListNode): void {
    for (;;) {
      const r = this.next();
      if (r === EOF || r === 0x0a) throw new JsonPathSyntaxError('unterminated array');
      if (r === 0x5d) break;
    }
    let text = this.consumeText();
    text = text.slice(1, -1);
    if (text === '*') text = ':';

    const parts = text.split(',');
    if (parts.length > 1) {
      // A union.
      cur.nodes.push({ type: 'union', nodes: parts.map((s) => parseAction(`[${s.replace(/^ +| +$/g, '')}]`)) });
      return this.parseInsideAction(cur);
    }

    const key = DICT_KEY.exec(text);
    if (key) {
      for (const node of parseAction(`.${key[1]}`).nodes) cur.nodes.push(node);
      return this.parseInsideAction(cur);
    }

    const slice = SLICE.exec(text);
    if (!slice) throw new JsonPathSyntaxError(`invalid array index ${text}`);
    const values = [slice[1] ?? '', slice[2] ?? '', slice[3] ?? ''];
    const params: [Param, Param, Param] = [
      { value: 0, known: false, derived: false },
      { value: 0, known: false, derived: false },
      { value: 0, known: false, derived: false },
    ];
    for (let i = 0; i < 3; i++) {
      let v = values[i]!;
      if (v !== '') {
        if (i > 0) v = v.slice(1);
        if (i > 0 && v === '') params[i]!.known = false;
        else {
          params[i]!.known = true;
          const n = atoi(v);
          if (n === undefined) throw new JsonPathSyntaxError(`array index ${v} is not a number`);
          params[i]!.value = Number(n);
        }
      } else if (i === 1) {
        params[i] = { value: params[0].value + 1, known: true, derived: true };
      }
    }
    cur.nodes.push({ type: 'array', params });
    this.parseInsideAction(cur);
  }

  parseFilter(cur: ListNode): void {
    this.pos += 3;
    this.consumeText();
    let begin = false;
    let end = false;
    let pair = 0;
    for (;;) {
      const r = this.next();
      if (r === EOF || r === 0x0a) throw new JsonPathSyntaxError('unterminated filter');
      if (r === 0x22 || r === 0x27) {
        if (!begin) {
          begin = true;
          pair = r;
          continue;
        }
        if (this.input[this.pos - 2] !== '\\' && r === pair) end = true;
      } else if (r === 0x29 /* ) */ && begin === end) {
        break;
      }
    }
    if (this.next() !== 0x5d) throw new JsonPathSyntaxError('unclosed array expect ]');
    let text = this.consumeText();
    text = text.slice(0, -2);
    const m = FILTER.exec(text);
    if (!m) cur.nodes.push({ type: 'filter', left: parseAction(text), right: list(), operator: 'exists' });
    else cur.nodes.push({ type: 'filter', left: parseAction(m[1]!), right: parseAction(m[3]!), operator: m[2]! });
    this.parseInsideAction(cur);
  }

  parseQuote(cur: ListNode, quote: number): void {
    for (;;) {
      const r = this.next();
      if (r === EOF || r === 0x0a) throw new JsonPathSyntaxError('unterminated quoted string');
      if (r === quote && this.input[this.pos - 2] !== '\\') break;
    }
    const value = this.consumeText();
    cur.nodes.push({ type: 'text', text: unquoteExtend(value) });
    this.parseInsideAction(cur);
  }

  parseField(cur: ListNode): void {
    this.consumeText();
    while (this.advance());
    const value = this.consumeText();
    if (value === '*') cur.nodes.push({ type: 'wildcard' });
    else cur.nodes.push({ type: 'field', value: value.replaceAll('\\', '') });
    this.parseInsideAction(cur);
  }

  advance(): boolean {
    const r = this.next();
    if (r === 0x5c) this.next();
    else if (isTerminator(r)) {
      this.backup();
      return false;
    }
    return true;
  }
}

function isTerminator(r: number): boolean {
  if (r === 0x20 || r === 0x09 || isEndOfLine(r)) return true;
  // eof . , [ ] $ @ { }
  return r === EOF || r === 0x2e || r === 0x2c || r === 0x5b || r === 0x5d || r === 0x24 || r === 0x40 || r === 0x7b || r === 0x7d;
}

const isEndOfLine = (r: number): boolean => r === 0x0d || r === 0x0a;
// unicode.IsDigit and unicode.IsLetter.
const isDigit = (r: number): boolean => r >= 0 && /\p{Nd}/u.test(String.fromCodePoint(r));
const isAlphaNumeric = (r: number): boolean => r === 0x5f || (r >= 0 && /[\p{L}\p{Nd}]/u.test(String.fromCodePoint(r)));

// strconv.Atoi on a 64-bit platform.
function atoi(s: string): bigint | undefined {
  if (!/^[+-]?\d+$/.test(s)) return undefined;
  const n = BigInt(s);
  return n >= -(2n ** 63n) && n < 2n ** 63n ? n : undefined;
}

// strconv.ParseFloat(s, 64) for what parseNumber reads: a sign, digits and dots.
function parseFloat64(s: string): number | undefined {
  if (!/^[+-]?(\d+\.?\d*|\.\d+)$/.test(s)) return undefined;
  const f = Number(s);
  return Number.isFinite(f) ? f : undefined;
}

/** UnquoteExtend: strconv.Unquote, for single quotes too. */
export function unquoteExtend(s: string): string {
  if (s.length < 2) throw new JsonPathSyntaxError('invalid syntax');
  const quote = s[0]!;
  if (quote !== s.at(-1) || (quote !== '"' && quote !== "'")) throw new JsonPathSyntaxError('invalid syntax');
  s = s.slice(1, -1);
  if (!s.includes('\\') && !s.includes(quote)) return s;
  let out = '';
  let i = 0;
  while (i < s.length) {
    const c = s[i]!;
    if (c === quote) throw new JsonPathSyntaxError('invalid syntax');
    if (c !== '\\') {
      const cp = s.codePointAt(i)!;
      out += String.fromCodePoint(cp);
      i += cp > 0xffff ? 2 : 1;
      continue;
    }
    const e = s[i + 1];
    i += 2;
    switch (e) {
      case 'a': out += '\x07'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case '\\': out += '\\'; break;
      case "'":
      case '"':
        if (e !== quote) throw new JsonPathSyntaxError('invalid syntax');
        out += e;
        break;
      case 'x':
      case 'u':
      case 'U': {
        const n = e === 'x' ? 2 : e === 'u' ? 4 : 8;
        const hex = s.slice(i, i + n);
        if (hex.length !== n || !/^[0-9a-fA-F]+$/.test(hex)) throw new JsonPathSyntaxError('invalid syntax');
        const v = parseInt(hex, 16);
        i += n;
        if (e === 'x') {
          // A byte: only whole UTF-8 sequences make text; a lone one is not representable here.
          if (v >= 0x80) throw new JsonPathSyntaxError('invalid syntax');
          out += String.fromCharCode(v);
        } else {
          if (v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) throw new JsonPathSyntaxError('invalid syntax');
          out += String.fromCodePoint(v);
        }
        break;
      }
      default: {
        if (e !== undefined && e >= '0' && e <= '7') {
          const oct = s.slice(i - 1, i + 2);
          if (!/^[0-7]{3}$/.test(oct)) throw new JsonPathSyntaxError('invalid syntax');
          const v = parseInt(oct, 8);
          if (v > 255 || v >= 0x80) throw new JsonPathSyntaxError('invalid syntax');
          out += String.fromCharCode(v);
          i += 2;
          break;
        }
        throw new JsonPathSyntaxError('invalid syntax');
      }
    }
  }
  return out;
}
