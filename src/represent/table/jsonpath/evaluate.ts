// client-go's JSONPath evaluation (k8s.io/client-go/util/jsonpath/jsonpath.go) over an
// unstructured object, as a custom resource's printer columns use it: FindResults with missing
// keys allowed, and PrintResults of one value. Values are unstructured.ts's: int64 as bigint,
// float64 as number, null for Go's nil. Maps are visited in key order where Go visits them in
// its random map order (a wildcard or `..` over an object): the apiserver's own answer varies.
import { compareGo } from '../../../selectors/gostrings.ts';
import { goMarshal } from '../../gojson.ts';
import { formatV } from '../unstructured.ts';
import type { ListNode, Node, Param } from './parser.ts';

export class JsonPathError extends Error {}

type Value = unknown;

/**
 * What a step gives: its values, and its error if it failed. Go's evaluator returns both, and
 * an `exists` filter looks at the values even when the step failed.
 */
type Result = [Value[], JsonPathError?];

const isMap = (v: Value): v is Record<string, Value> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** FindResults for a template whose nodes are evaluated in turn from the object (no range). */
export function findResults(root: ListNode, data: Value): Value[][] {
  const full: Value[][] = [];
  for (const node of root.nodes) {
    const [values, error] = walk([data], node);
    if (error) throw error;
    full.push(values);
  }
  return full;
}

function walk(input: Value[], node: Node): Result {
  switch (node.type) {
    case 'list':
      return evalList(input, node);
    case 'text':
      return [[node.text]];
    case 'field':
      return [evalField(input, node.value)];
    case 'array':
      return evalArray(input, node.params);
    case 'filter':
      return evalFilter(input, node);
    case 'int':
    case 'float':
    case 'bool':
      return [input.map(() => node.value)];
    case 'wildcard':
      return [input.flatMap((v) => (v === null ? [] : children(v)))];
    case 'recursive':
      return [evalRecursive(input)];
    case 'union': {
      const result: Value[] = [];
      for (const l of node.nodes) {
        const [values, error] = evalList(input, l);
        if (error) return [input, error];
        result.push(...values);
      }
      return [result];
    }
    case 'identifier':
      // range and end: never a column's (the caller refuses them before evaluating).
      return [input, new JsonPathError(`unrecognized identifier ${node.name}`)];
  }
}

function evalList(input: Value[], node: ListNode): Result {
  let cur = input;
  for (const n of node.nodes) {
    const [values, error] = walk(cur, n);
    if (error) return [values, error];
    cur = values;
  }
  return [cur];
}

// The elements of an array, the values of a map (by key), the bytes of a string.
function children(v: Value): Value[] {
  if (Array.isArray(v)) return v;
  if (isMap(v)) return Object.keys(v).sort(compareGo).map((k) => v[k]);
  if (typeof v === 'string') return [...Buffer.from(v, 'utf8')].map((b) => BigInt(b));
  return [];
}

function evalField(input: Value[], field: string): Value[] {
  const results: Value[] = [];
  for (const v of input) {
    // A nil value is passed over; a map gives the key's value, even a null one.
    if (isMap(v) && Object.hasOwn(v, field)) results.push(v[field]);
  }
  // AllowMissingKeys: nothing found is no error.
  return results;
}

function evalArray(input: Value[], params: Extract<Node, { type: 'array' }>['params']): Result {
  const result: Value[] = [];
  for (const value of input) {
    if (value === null) continue;
    if (!Array.isArray(value)) return [input, new JsonPathError('not array or slice')];
    const [start, end, step] = params.map((x) => ({ ...x })) as [Param, Param, Param];
    const length = value.length;
    if (!start.known) start.value = 0;
    if (start.value < 0) start.value += length;
    if (!end.known) end.value = length;
    if (end.value < 0 || (end.value === 0 && end.derived)) end.value += length;
    // Zero elements asked for: what was found so far, and no more.
    if (end.value === start.value) return [result];
    if (start.value >= length || start.value < 0 || end.value > length || end.value < 0) return [input, new JsonPathError('array index out of bounds')];
    if (start.value > end.value) return [input, new JsonPathError('starting index is greater than ending index')];
    let stride = 1;
    if (step.known) {
      if (step.value <= 0) return [input, new JsonPathError('step must be > 0')];
      stride = step.value;
    }
    for (let i = start.value; i < end.value; i += stride) result.push(value[i]);
  }
  return [result];
}

function evalRecursive(input: Value[]): Value[] {
  const result: Value[] = [];
  for (const value of input) {
    if (value === null) continue;
    const results = children(value);
    if (results.length !== 0) {
      result.push(value);
      result.push(...evalRecursive(results));
    }
  }
  return result;
}

function evalFilter(input: Value[], node: Extract<Node, { type: 'filter' }>): Result {
  const results: Value[] = [];
  for (const value of input) {
    if (!Array.isArray(value)) return [input, new JsonPathError('not array or slice and cannot be filtered')];
    for (const element of value) {
      const [lefts, leftError] = evalList([element], node.left);
      if (node.operator === 'exists') {
        if (lefts.length > 0) results.push(element);
        continue;
      }
      if (leftError) return [input, leftError];
      if (lefts.length === 0) continue;
      if (lefts.length > 1) return [input, new JsonPathError('can only compare one element at a time')];
      const [rights, rightError] = evalList([element], node.right);
      if (rightError) return [input, rightError];
      if (rights.length === 0) continue;
      if (rights.length > 1) return [input, new JsonPathError('can only compare one element at a time')];
      try {
        if (compare(node.operator, lefts[0], rights[0])) results.push(element);
      } catch (e) {
        if (e instanceof JsonPathError) return [results, e];
        throw e;
      }
    }
  }
  return [results];
}

type Kind = 'bool' | 'int' | 'float' | 'string';

// template.basicKind: only these compare; anything else (nil, a map, an array) is an error.
function kindOf(v: Value): Kind {
  switch (typeof v) {
    case 'boolean':
      return 'bool';
    case 'bigint':
      return 'int';
    case 'number':
      return 'float';
    case 'string':
      return 'string';
    default:
      throw new JsonPathError('invalid type for comparison');
  }
}

function equal(a: Value, b: Value): boolean {
  if (kindOf(a) !== kindOf(b)) throw new JsonPathError('incompatible types for comparison');
  return a === b;
}

function less(a: Value, b: Value): boolean {
  const k = kindOf(a);
  if (k !== kindOf(b)) throw new JsonPathError('incompatible types for comparison');
  if (k === 'bool') throw new JsonPathError('invalid type for comparison');
  if (k === 'string') return compareGo(a as string, b as string) < 0;
  return (a as number | bigint) < (b as number | bigint);
}

function compare(operator: string, a: Value, b: Value): boolean {
  switch (operator) {
    case '<':
      return less(a, b);
    case '>':
      return !(less(a, b) || equal(a, b));
    case '==':
      return equal(a, b);
    case '!=':
      return !equal(a, b);
    case '<=':
      return less(a, b) || equal(a, b);
    case '>=':
      return !less(a, b);
    default:
      throw new JsonPathError(`unrecognized filter operator ${operator}`);
  }
}

/** PrintResults of one value: JSON for a map or an array, else as fmt.Fprint writes it. */
export function printResult(v: Value): string {
  if (Array.isArray(v) || isMap(v)) return goMarshal(v);
  // PrintableValue of Go's nil.
  if (v === null || v === undefined) return '<no value>';
  return formatV(v);
}
