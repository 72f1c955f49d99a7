// Custom resources' field selectors as apiextensions-apiserver builds them from a CRD version's
// selectableFields. The expected field sets are what the apiserver's own code
// (customresource.NewStrategy(...).GetAttrs on the object decoded as unstructured, v1.37.1) gives
// for the same objects and paths.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { customResourceFields, goFloat } from '../../src/selectors/customresource.ts';
import { convertFieldSelector, fieldSet } from '../../src/selectors/selectable.ts';
import { parseFieldSelector } from '../../src/selectors/fields.ts';

/** The field set of an object given as JSON text, as the reflector's decoder builds it. */
function fields(paths: string[], json: string, namespaced = true): Record<string, string> {
  const item = Buffer.from(json);
  return fieldSet(customResourceFields(namespaced, paths), JSON.parse(json), item);
}

const widget = (spec: string, extra = ''): string => `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"n"},"spec":${spec}${extra}}`;

test('selectable field values: strings, integers and booleans as fmt.Sprint prints them; "" for absent or null', () => {
  assert.deepEqual(
    fields(['.spec.color', '.spec.size', '.spec.enabled', '.spec.nested.deep', '.status.phase'], widget('{"color":"red","size":3,"enabled":true,"nested":{"deep":"x"}}', ',"status":{"phase":"Ready"}')),
    { 'metadata.name': 'w', 'metadata.namespace': 'n', 'spec.color': 'red', 'spec.size': '3', 'spec.enabled': 'true', 'spec.nested.deep': 'x', 'status.phase': 'Ready' },
  );
  // Absent: "" whatever the type (not "0" or "false", as a built-in's Go zero value would be).
  assert.deepEqual(fields(['.spec.color', '.spec.size', '.spec.enabled', '.spec.nested.deep'], widget('{}')), {
    'metadata.name': 'w', 'metadata.namespace': 'n', 'spec.color': '', 'spec.size': '', 'spec.enabled': '', 'spec.nested.deep': '',
  });
  const zero = fields(['.spec.color', '.spec.size', '.spec.enabled'], widget('{"color":null,"size":0,"enabled":false}'));
  assert.deepEqual([zero['spec.color'], zero['spec.size'], zero['spec.enabled']], ['', '0', 'false']);
  assert.equal(fields(['.spec.s'], widget('{"s":""}'))['spec.s'], '');
  // Through something that is not an object: nothing found.
  assert.equal(fields(['.spec.s'], widget('[{"s":"x"}]'))['spec.s'], '');
  assert.equal(fields(['.spec.s.x'], widget('{"s":"str"}'))['spec.s.x'], '');
  // Names with dashes, and keys of a map (additionalProperties), are plain steps.
  const dashed = fields(['.spec.a-b', '.spec.map.key'], widget('{"a-b":"dash","map":{"key":"v"}}'));
  assert.deepEqual([dashed['spec.a-b'], dashed['spec.map.key']], ['dash', 'v']);
});

test('numbers: int64 exactly from the JSON text, float64 as %v prints it', () => {
  const size = (n: string): string | undefined => fields(['.spec.size'], widget(`{"size":${n}}`))['spec.size'];
  assert.equal(size('9007199254740993'), '9007199254740993');
  assert.equal(size('-9223372036854775808'), '-9223372036854775808');
  assert.equal(size('9223372036854775808'), '9.223372036854776e+18');
  assert.equal(size('123456789012345678901234'), '1.2345678901234569e+23');
  assert.equal(size('1000000'), '1000000');
  // The apiserver writes an integral float64 below 1e21 as digits, which read back as int64:
  // "1e6" never reaches Levee from it, and %v of the float itself is in exponent form.
  assert.equal(goFloat(1e6), '1e+06');
  assert.equal(size('1.5'), '1.5');
  assert.equal(size('1.0'), '1');
  assert.equal(size('1234567.5'), '1.2345675e+06');
  assert.equal(size('123456.0'), '123456');
  assert.equal(size('0.00001'), '1e-05');
  assert.equal(size('0.0001'), '0.0001');
  assert.equal(size('0.1'), '0.1');
  assert.equal(size('5e-324'), '5e-324');
  assert.equal(size('1e21'), '1e+21');
  assert.equal(size('-0'), '0');
  assert.equal(size('-0.0'), '-0');
  assert.equal(goFloat(-2.5e-7), '-2.5e-07');
  assert.equal(goFloat(100), '100');
});

test('a value that is an object or a list prints as Go prints a map or a slice', () => {
  const f = fields(['.spec.m', '.spec.l'], widget('{"m":{"b":1,"a":null,"c":{"z":[1,"x"]}},"l":[true,2.5,"s",null]}'));
  assert.equal(f['spec.m'], 'map[a:<nil> b:1 c:map[z:[1 x]]]');
  assert.equal(f['spec.l'], '[true 2.5 s <nil>]');
  // An int64 inside one stays exact too.
  assert.equal(fields(['.spec.m'], widget('{"m":{"n":9007199254740993}}'))['spec.m'], 'map[n:9007199254740993]');
});

test('field labels: metadata.name, metadata.namespace only when namespaced, and the version\'s selectable fields', () => {
  const namespaced = customResourceFields(true, ['.spec.color', '.status.phase']);
  assert.deepEqual([...namespaced.selectable].sort(), ['metadata.name', 'metadata.namespace', 'spec.color', 'status.phase']);
  const cluster = customResourceFields(false, ['.spec.color']);
  assert.deepEqual([...cluster.selectable].sort(), ['metadata.name', 'spec.color']);
  assert.equal(convertFieldSelector(cluster, parseFieldSelector('metadata.namespace=x')), undefined);
  // Anything else is the apiserver's 400 ("field label not supported: spec.size"): forwarded.
  assert.equal(convertFieldSelector(namespaced, parseFieldSelector('spec.color=red,spec.size=1')), undefined);
  assert.equal(convertFieldSelector(customResourceFields(true, []), parseFieldSelector('spec.color=red')), undefined);
  // Without selectable fields, a custom resource still selects by name and namespace.
  assert.equal(convertFieldSelector(customResourceFields(true, []), parseFieldSelector('metadata.name=w'))?.toString(), 'metadata.name=w');
  const sel = convertFieldSelector(namespaced, parseFieldSelector('spec.color=red,status.phase!=Failed'));
  assert.ok(sel);
  assert.equal(sel.matches(fields(['.spec.color', '.status.phase'], widget('{"color":"red"}'))), true);
  assert.equal(sel.matches(fields(['.spec.color', '.status.phase'], widget('{"color":"blue"}'))), false);
  // An absent field equals "" and differs from anything else.
  const absent = convertFieldSelector(namespaced, parseFieldSelector('spec.color='));
  assert.equal(absent?.matches(fields(['.spec.color', '.status.phase'], widget('{}'))), true);
  assert.equal(convertFieldSelector(namespaced, parseFieldSelector('spec.color!=red'))?.matches(fields(['.spec.color', '.status.phase'], widget('{}'))), true);
});
