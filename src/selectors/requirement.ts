// One label selector requirement, as apimachinery's labels.Requirement: construction-time
// validation (NewRequirement), matching (Requirement.Matches) and rendering (Requirement.String).
import { SelectorParseError } from './errors.ts';
import { aggregate, invalidValue, isLabelKey, isLabelValue } from './validation.ts';

// selection.Operator values, as apimachinery spells them.
export type LabelOperator = '=' | '==' | '!=' | 'in' | 'notin' | 'exists' | '!' | 'gt' | 'lt';

export interface LabelRequirement {
  readonly key: string;
  readonly operator: LabelOperator;
  // Sorted and de-duplicated, as the parser builds them through sets.String.List().
  readonly values: readonly string[];
}

// The Gt/Lt bound parsed once, since NewRequirement already proved it an int64.
export interface CompiledRequirement extends LabelRequirement {
  readonly bound: bigint | undefined;
}

const int64Min = -(2n ** 63n);
const int64Max = 2n ** 63n - 1n;

// strconv.ParseInt(s, 10, 64): optional sign, decimal digits only, int64 range.
export function parseInt64(s: string): bigint | undefined {
  if (!/^[+-]?[0-9]+$/.test(s)) return undefined;
  const n = BigInt(s);
  return n < int64Min || n > int64Max ? undefined : n;
}

// NewRequirement. The parser has already validated the key (with the "<nil>" path), so the key
// check here only matters for callers building requirements directly. Errors come in
// apimachinery's order: key, operator-specific value checks, then label value validation.
export function newRequirement(key: string, operator: LabelOperator, values: readonly string[]): CompiledRequirement {
  const errs: string[] = [];
  const keyErrs = isLabelKey(key);
  if (keyErrs.length > 0) errs.push(invalidValue('key', key, keyErrs.join('; ')));
  let bound: bigint | undefined;
  switch (operator) {
    case 'in':
    case 'notin':
      if (values.length === 0) errs.push(invalidList("for 'in', 'notin' operators, values set can't be empty", values));
      break;
    case '=':
    case '==':
    case '!=':
      if (values.length !== 1) errs.push(invalidList('exact-match compatibility requires one single value', values));
      break;
    case 'exists':
    case '!':
      if (values.length !== 0) errs.push(invalidList('values set must be empty for exists and does not exist', values));
      break;
    case 'gt':
    case 'lt':
      if (values.length !== 1) errs.push(invalidList("for 'Gt', 'Lt' operators, exactly one value is required", values));
      values.forEach((v, i) => {
        bound = parseInt64(v);
        if (bound === undefined) {
          errs.push(invalidValue(`values[${i}]`, v, "for 'Gt', 'Lt' operators, the value must be an integer"));
        }
      });
      break;
  }
  values.forEach((v, i) => {
    const valueErrs = isLabelValue(v);
    if (valueErrs.length > 0) errs.push(invalidValue(`values[${i}][${key}]`, v, valueErrs.join('; ')));
  });
  const message = aggregate(errs);
  if (message !== undefined) throw new SelectorParseError(message);
  return { key, operator, values: [...values], bound };
}

// field.Invalid with a []string value, rendered by json.Marshal. The parser never builds such a
// requirement; this only keeps newRequirement total.
function invalidList(detail: string, values: readonly string[]): string {
  return `values: Invalid value: ${JSON.stringify(values)}: ${detail}`;
}

export function matchRequirement(r: CompiledRequirement, labels: Readonly<Record<string, string>> | null | undefined): boolean {
  // Own properties only: "constructor" or "__proto__" are valid label keys, not inherited members.
  const has = labels != null && Object.hasOwn(labels, r.key);
  const value = has ? labels[r.key] : undefined;
  switch (r.operator) {
    case 'in':
    case '=':
    case '==':
      return has && r.values.includes(value as string);
    case 'notin':
    case '!=':
      return !has || !r.values.includes(value as string);
    case 'exists':
      return has;
    case '!':
      return !has;
    case 'gt':
    case 'lt': {
      if (!has || r.bound === undefined || r.values.length !== 1) return false;
      // A label value that is not an int64 never satisfies an inequality.
      const n = parseInt64(value as string);
      if (n === undefined) return false;
      return r.operator === 'gt' ? n > r.bound : n < r.bound;
    }
  }
}

const operatorText: Readonly<Record<LabelOperator, string>> = {
  '=': '=', '==': '==', '!=': '!=', in: ' in ', notin: ' notin ', gt: '>', lt: '<', exists: '', '!': '',
};

// Requirement.String().
export function requirementString(r: LabelRequirement): string {
  let s = (r.operator === '!' ? '!' : '') + r.key;
  if (r.operator === 'exists' || r.operator === '!') return s;
  s += operatorText[r.operator];
  const values = r.values.length === 1 ? (r.values[0] ?? '') : r.values.join(',');
  return r.operator === 'in' || r.operator === 'notin' ? `${s}(${values})` : s + values;
}
