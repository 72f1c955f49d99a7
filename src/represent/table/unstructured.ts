// A custom resource as the apiserver holds it: unstructured, map[string]interface{} decoded from
// JSON with every integer that fits an int64 as int64 and every other number as float64
// (k8s.io/apimachinery/pkg/util/json). Here int64 is a bigint and float64 a number, so that the
// columns print 3 and 3.5, 1e+21 and 1000000, exactly as Go does.

/** One object's JSON as unstructured values. */
export function parseUnstructured(json: Buffer | string): unknown {
  return JSON.parse(typeof json === 'string' ? json : json.toString('utf8'), (_key, value: unknown, context?: { source?: string }) => {
    if (typeof value !== 'number' || context?.source === undefined || !/^-?\d+$/.test(context.source)) return value;
    const n = BigInt(context.source);
    // Beyond int64 the apiserver keeps the float64.
    return n >= -(2n ** 63n) && n < 2n ** 63n ? n : value;
  });
}

/** fmt.Sprint of an unstructured scalar (%v): a float64 in %g form, exponent from 1e+06 and below 1e-04. */
export function formatV(v: unknown): string {
  switch (typeof v) {
    case 'string':
      return v;
    case 'boolean':
      return v ? 'true' : 'false';
    case 'bigint':
      return v.toString();
    case 'number':
      return formatFloatG(v);
    default:
      return String(v);
  }
}

// strconv.FormatFloat(f, 'g', -1, 64): the shortest digits, %e when the exponent is < -4 or >= 6
// (Go's precision for the shortest form), the exponent with at least two digits.
function formatFloatG(f: number): string {
  if (Number.isNaN(f)) return 'NaN';
  if (!Number.isFinite(f)) return f > 0 ? '+Inf' : '-Inf';
  if (f === 0) return Object.is(f, -0) ? '-0' : '0';
  const [mantissa, exponent] = f.toExponential().split('e') as [string, string];
  const exp = Number(exponent);
  if (exp < -4 || exp >= 6) return `${mantissa}e${exp < 0 ? '-' : '+'}${String(Math.abs(exp)).padStart(2, '0')}`;
  return String(f);
}
