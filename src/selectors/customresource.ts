// The field selectors of a custom resource, from its CustomResourceDefinition (selectableFields,
// Kubernetes 1.32+), as apiextensions-apiserver decides them for one version:
//  - which labels a request may use (pkg/apiserver/conversion/converter.go, ConvertFieldLabel):
//    metadata.name, metadata.namespace when the resource is namespaced, and the version's
//    selectableFields, each named by its jsonPath without the leading dot. Anything else is a 400
//    "field label not supported: <label>", which Levee leaves to the apiserver to write;
//  - the field set an object is matched against (pkg/registry/customresource/strategy.go,
//    selectableFields): each jsonPath evaluated on the object as served at that version
//    (k8s.io/client-go/util/jsonpath with missing keys allowed), the value found printed with
//    fmt.Sprint, and "" when nothing (or null) is found there.
// The schema allows only string, integer and boolean fields to be selectable, but the apiserver
// prints whatever value it finds, so Levee does too (an object stored under an older schema).
import { compareGo } from './gostrings.ts';
import type { SelectableFields } from './selectable.ts';

const NAME = 'metadata.name';
const NAMESPACE = 'metadata.namespace';

/**
 * The SelectableFields of one version of a custom resource. `jsonPaths` are the version's
 * selectableFields[].jsonPath: dotted paths (".spec.color"); the CRD's validation refuses array
 * notation and paths into metadata, so a path is its field names between dots.
 */
export function customResourceFields(namespaced: boolean, jsonPaths: readonly string[]): SelectableFields {
  const labels = new Map<string, string>([[NAME, NAME]]);
  if (namespaced) labels.set(NAMESPACE, NAMESPACE);
  const paths: Array<[field: string, path: string[]]> = [];
  for (const jsonPath of jsonPaths) {
    const field = jsonPath.startsWith('.') ? jsonPath.slice(1) : jsonPath;
    labels.set(field, field);
    paths.push([field, field.split('.')]);
  }
  return {
    labels,
    selectable: new Set(labels.keys()),
    extract:
      paths.length === 0
        ? undefined
        : (obj, item) => {
            const out: Record<string, string> = {};
            let exact: unknown;
            for (const [field, path] of paths) {
              const found = at(obj, path);
              if (needsSource(found)) {
                // Only here, and only for such numbers, is the object parsed a second time.
                exact ??= item === undefined ? obj : parseExact(item);
                out[field] = sprint(at(exact, path));
              } else out[field] = sprint(found);
            }
            return out;
          },
  };
}

/** jsonpath's field walk: a missing key, or a step through anything but an object, finds nothing. */
function at(obj: unknown, path: readonly string[]): unknown {
  let v = obj;
  for (const key of path) {
    if (v === null || typeof v !== 'object' || Array.isArray(v) || !Object.hasOwn(v, key)) return undefined;
    v = (v as Record<string, unknown>)[key];
  }
  return v;
}

/**
 * A number as JSON text: Go decodes it (sigs.k8s.io/json, preserving ints) to int64 when it is
 * an integer literal that fits, to float64 otherwise. JSON.parse keeps neither an int64 above 2^53
 * nor the difference between -0 and 0, so those are read from the source text. Any other integral
 * number is printed as an int64: the apiserver writes an integral float64 below 1e21 as digits
 * (encoding/json), so its JSON never has "1e6" where its memory has 1000000.
 */
class JsonNumber {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
}

function needsSource(v: unknown): boolean {
  if (typeof v === 'number') return Number.isInteger(v) && (!Number.isSafeInteger(v) || Object.is(v, -0));
  if (v === null || typeof v !== 'object') return false;
  return Object.values(v).some(needsSource);
}

function parseExact(item: Buffer): unknown {
  return JSON.parse(item.toString('utf8'), (_key, value: unknown, context?: { source?: string }) =>
    typeof value === 'number' && context?.source !== undefined ? new JsonNumber(context.source) : value,
  );
}

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/** fmt.Sprint of the value Go's unstructured decoding gives; "" for nothing or null. */
export function sprint(v: unknown): string {
  if (v === undefined || v === null) return '';
  return goValue(v);
}

function goValue(v: unknown): string {
  if (v === null || v === undefined) return '<nil>';
  if (typeof v === 'string') return v;
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (typeof v === 'number') return Number.isSafeInteger(v) && !Object.is(v, -0) ? String(v) : goFloat(v);
  if (v instanceof JsonNumber) return goNumber(v.text);
  // []interface{} and map[string]interface{} as %v prints them: space-separated, keys sorted.
  if (Array.isArray(v)) return `[${v.map(goValue).join(' ')}]`;
  const entries = Object.entries(v as Record<string, unknown>).sort(([a], [b]) => compareGo(a, b));
  return `map[${entries.map(([k, x]) => `${k}:${goValue(x)}`).join(' ')}]`;
}

function goNumber(text: string): string {
  if (/^-?\d+$/.test(text)) {
    const n = BigInt(text);
    if (n >= INT64_MIN && n <= INT64_MAX) return n.toString();
  }
  return goFloat(Number(text));
}

/**
 * strconv.FormatFloat(v, 'g', -1, 64), as %v prints a float64: the shortest digits that read back
 * as v (JavaScript finds the same ones), in exponent form when the exponent is below -4 or at
 * least 6 ("1e+06", "1.5e-05"), with at least two exponent digits.
 */
export function goFloat(v: number): string {
  if (v === 0) return Object.is(v, -0) ? '-0' : '0';
  const sign = v < 0 ? '-' : '';
  const [mantissa, e] = Math.abs(v).toExponential().split('e') as [string, string];
  const digits = mantissa.replace('.', '');
  const exp = Number(e);
  if (exp < -4 || exp >= 6) {
    const abs = Math.abs(exp);
    return `${sign}${mantissa}e${exp < 0 ? '-' : '+'}${abs < 10 ? '0' : ''}${abs}`;
  }
  const point = exp + 1;
  if (point <= 0) return `${sign}0.${'0'.repeat(-point)}${digits}`;
  if (point >= digits.length) return `${sign}${digits}${'0'.repeat(point - digits.length)}`;
  return `${sign}${digits.slice(0, point)}.${digits.slice(point)}`;
}
