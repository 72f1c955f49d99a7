// A port of apimachinery's label selector Lexer and Parser (pkg/labels/selector.go). The control
// flow is kept as close to the Go code as possible because the error texts (which token was
// "found", what was "expected") fall out of exactly where each check happens.
import { SelectorParseError } from './errors.ts';
import { compareGo } from './gostrings.ts';
import { invalidValue, isLabelKey } from './validation.ts';
import { newRequirement, type CompiledRequirement, type LabelOperator } from './requirement.ts';

type Token =
  | 'Error' | 'EndOfString' | 'ClosedPar' | 'Comma' | 'DoesNotExist' | 'DoubleEquals' | 'Equals'
  | 'GreaterThan' | 'Identifier' | 'In' | 'LessThan' | 'NotEquals' | 'NotIn' | 'OpenPar';

const string2token: ReadonlyMap<string, Token> = new Map<string, Token>([
  [')', 'ClosedPar'], [',', 'Comma'], ['!', 'DoesNotExist'], ['==', 'DoubleEquals'], ['=', 'Equals'],
  ['>', 'GreaterThan'], ['in', 'In'], ['<', 'LessThan'], ['!=', 'NotEquals'], ['notin', 'NotIn'], ['(', 'OpenPar'],
]);

// strings.Join(binaryOperators, ", ") in the "expected" part of an unknown-operator error.
const binaryOperators = 'in, notin, =, ==, !=, gt, lt';

interface Item {
  tok: Token;
  lit: string;
}

// Whitespace is ' ', '\t', '\r', '\n' only; every other byte that is not special belongs to an
// identifier. Byte 0 (and the end of input) reads as 0, which ends the token stream.
function isWhitespace(ch: number): boolean {
  return ch === 0x20 || ch === 0x09 || ch === 0x0d || ch === 0x0a;
}

function isSpecialSymbol(ch: number): boolean {
  // = ! ( ) , > <
  return ch === 0x3d || ch === 0x21 || ch === 0x28 || ch === 0x29 || ch === 0x2c || ch === 0x3e || ch === 0x3c;
}

// Go indexes bytes and JS indexes UTF-16 code units; every byte the lexer looks at is ASCII and
// neither encoding puts ASCII values inside a multi-unit character, so the token stream is the same.
class Lexer {
  private readonly s: string;
  private pos = 0;

  constructor(s: string) {
    this.s = s;
  }

  private read(): number {
    if (this.pos < this.s.length) return this.s.charCodeAt(this.pos++);
    return 0;
  }

  private unread(): void {
    this.pos--;
  }

  private scanIDOrKeyword(): Item {
    const start = this.pos;
    let end: number;
    for (;;) {
      end = this.pos;
      const ch = this.read();
      if (ch === 0) break;
      if (isSpecialSymbol(ch) || isWhitespace(ch)) {
        this.unread();
        break;
      }
    }
    const lit = this.s.slice(start, end);
    return { tok: string2token.get(lit) ?? 'Identifier', lit };
  }

  // The longest run of special symbols that is still a token: "!=" rather than "!" then "=".
  private scanSpecialSymbol(): Item {
    let last: Item | undefined;
    let buffer = '';
    for (;;) {
      const ch = this.read();
      if (ch === 0) break;
      if (!isSpecialSymbol(ch)) {
        this.unread();
        break;
      }
      buffer += String.fromCharCode(ch);
      const tok = string2token.get(buffer);
      if (tok !== undefined) {
        last = { tok, lit: buffer };
      } else if (last !== undefined) {
        this.unread();
        break;
      }
    }
    return last ?? { tok: 'Error', lit: `error expected: keyword found '${buffer}'` };
  }

  lex(): Item {
    let ch = this.read();
    while (isWhitespace(ch)) ch = this.read();
    if (ch === 0) return { tok: 'EndOfString', lit: '' };
    this.unread();
    return isSpecialSymbol(ch) ? this.scanSpecialSymbol() : this.scanIDOrKeyword();
  }
}

// In a value position "in" and "notin" are plain identifiers ("x in (in)", "notin=in").
type Context = 'KeyAndOperator' | 'Values';

class Parser {
  private readonly items: Item[] = [];
  private position = 0;

  constructor(selector: string) {
    const lexer = new Lexer(selector);
    for (;;) {
      const item = lexer.lex();
      this.items.push(item);
      if (item.tok === 'EndOfString') break;
    }
  }

  private at(index: number, context: Context): Item {
    // Never past the end: every path stops at the EndOfString item.
    const item = this.items[Math.min(index, this.items.length - 1)] as Item;
    if (context === 'Values' && (item.tok === 'In' || item.tok === 'NotIn')) return { tok: 'Identifier', lit: item.lit };
    return item;
  }

  private lookahead(context: Context): Item {
    return this.at(this.position, context);
  }

  private consume(context: Context): Item {
    return this.at(this.position++, context);
  }

  parse(): CompiledRequirement[] {
    const requirements: CompiledRequirement[] = [];
    for (;;) {
      const { tok, lit } = this.lookahead('Values');
      if (tok === 'EndOfString') return requirements;
      if (tok !== 'Identifier' && tok !== 'DoesNotExist') {
        throw new SelectorParseError(`found '${lit}', expected: !, identifier, or 'end of string'`);
      }
      try {
        requirements.push(this.parseRequirement());
      } catch (err) {
        if (!(err instanceof SelectorParseError)) throw err;
        throw new SelectorParseError(`unable to parse requirement: ${err.message}`);
      }
      const next = this.consume('Values');
      if (next.tok === 'EndOfString') return requirements;
      if (next.tok !== 'Comma') throw new SelectorParseError(`found '${next.lit}', expected: ',' or 'end of string'`);
      const after = this.lookahead('Values');
      if (after.tok !== 'Identifier' && after.tok !== 'DoesNotExist') {
        throw new SelectorParseError(`found '${after.lit}', expected: identifier after ','`);
      }
    }
  }

  private parseRequirement(): CompiledRequirement {
    const [key, inferred] = this.parseKeyAndInferOperator();
    if (inferred !== undefined) return newRequirement(key, inferred, []);
    const operator = this.parseOperator();
    const values = operator === 'in' || operator === 'notin' ? this.parseValues() : this.parseExactValue();
    return newRequirement(key, operator, sortedSet(values));
  }

  // "key" alone is exists, "!key" does-not-exist; anything else is left for parseOperator. Note
  // "!key=value" keeps does-not-exist and leaves "=" to fail in parse's "',' or 'end of string'".
  private parseKeyAndInferOperator(): [string, LabelOperator | undefined] {
    let operator: LabelOperator | undefined;
    let item = this.consume('Values');
    if (item.tok === 'DoesNotExist') {
      operator = '!';
      item = this.consume('Values');
    }
    if (item.tok !== 'Identifier') throw new SelectorParseError(`found '${item.lit}', expected: identifier`);
    // The parser validates with a nil field path, which field.Error prints as "<nil>".
    const keyErrs = isLabelKey(item.lit);
    if (keyErrs.length > 0) throw new SelectorParseError(invalidValue('<nil>', item.lit, keyErrs.join('; ')));
    const next = this.lookahead('Values').tok;
    if ((next === 'EndOfString' || next === 'Comma') && operator !== '!') operator = 'exists';
    return [item.lit, operator];
  }

  private parseOperator(): LabelOperator {
    const { tok, lit } = this.consume('KeyAndOperator');
    switch (tok) {
      case 'In': return 'in';
      case 'Equals': return '=';
      case 'DoubleEquals': return '==';
      case 'GreaterThan': return 'gt';
      case 'LessThan': return 'lt';
      case 'NotIn': return 'notin';
      case 'NotEquals': return '!=';
      default: throw new SelectorParseError(`found '${lit}', expected: ${binaryOperators}`);
    }
  }

  private parseValues(): string[] {
    const open = this.consume('Values');
    if (open.tok !== 'OpenPar') throw new SelectorParseError(`found '${open.lit}' expected: '('`);
    const { tok, lit } = this.lookahead('Values');
    if (tok === 'Identifier' || tok === 'Comma') {
      const values = this.parseIdentifiersList();
      // Reports the literal seen before the list, as the Go code does; unreachable in practice
      // because the list only ends on ")".
      if (this.consume('Values').tok !== 'ClosedPar') throw new SelectorParseError(`found '${lit}', expected: ')'`);
      return values;
    }
    if (tok === 'ClosedPar') {
      // "()" is the set holding the empty string.
      this.consume('Values');
      return [''];
    }
    throw new SelectorParseError(`found '${lit}', expected: ',', ')' or identifier`);
  }

  // A comma-separated list in which empty entries ("(,a)", "(a,)", "(a,,b)") are the empty string.
  private parseIdentifiersList(): string[] {
    const values: string[] = [];
    for (;;) {
      const { tok, lit } = this.consume('Values');
      if (tok === 'Identifier') {
        values.push(lit);
        const next = this.lookahead('Values');
        if (next.tok === 'Comma') continue;
        if (next.tok === 'ClosedPar') return values;
        throw new SelectorParseError(`found '${next.lit}', expected: ',' or ')'`);
      }
      if (tok === 'Comma') {
        if (values.length === 0) values.push('');
        const next = this.lookahead('Values').tok;
        if (next === 'ClosedPar') {
          values.push('');
          return values;
        }
        if (next === 'Comma') values.push('');
        continue;
      }
      throw new SelectorParseError(`found '${lit}', expected: ',', or identifier`);
    }
  }

  // "x=" and "x=,y" compare against the empty string.
  private parseExactValue(): string[] {
    const next = this.lookahead('Values').tok;
    if (next === 'EndOfString' || next === 'Comma') return [''];
    const { tok, lit } = this.consume('Values');
    if (tok === 'Identifier') return [lit];
    throw new SelectorParseError(`found '${lit}', expected: identifier`);
  }
}

// sets.String(...).List(): de-duplicated, sorted byte-wise.
function sortedSet(values: readonly string[]): string[] {
  return [...new Set(values)].sort(compareGo);
}

// labels.Parse before the final sort: the requirements in input order.
export function parseRequirements(selector: string): CompiledRequirement[] {
  return new Parser(selector).parse();
}
