// client-go's JSONPath as ported for custom resources' printer columns: client-go's own test cases
// (util/jsonpath/jsonpath_test.go, those without {range}), printed as JSONPath.Execute prints, and
// the custom resource column convertor built on it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { findResults, printResult } from '../../src/represent/table/jsonpath/evaluate.ts';
import { parse, unquoteExtend, JsonPathSyntaxError } from '../../src/represent/table/jsonpath/parser.ts';
import { parseUnstructured, formatV } from '../../src/represent/table/unstructured.ts';
import { cellForJsonValue, customColumns } from '../../src/represent/table/customresource.ts';
import { encodeRow } from '../../src/represent/table/row.ts';

/**
 * JSONPath.Execute with missing keys allowed: each result list printed, its values
 * space-separated. Execute prints a nil it found as null; a column prints the value it took out
 * (reflect.ValueOf of nil), <no value>.
 */
function execute(template: string, data: unknown): string {
  return findResults(parse(template), data)
    .map((results) => results.map((v) => (v === null ? 'null' : printResult(v))).join(' '))
    .join('');
}

const POINTS = parseUnstructured(`[
  {"id": "i1", "x":4, "y":-5},
  {"id": "i2", "x":-2, "y":-5, "z":1},
  {"id": "i3", "x":  8, "y":  3 },
  {"id": "i4", "x": -6, "y": -1 },
  {"id": "i5", "x":  0, "y":  2, "z": 1 },
  {"id": "i6", "x":  1, "y":  4 },
  {"id": "i7", "x":  null, "y":  4 }
]`);

const NODES = parseUnstructured(`{
  "kind": "List",
  "items":[
    {"kind":"None","metadata":{"name":"127.0.0.1","labels":{"kubernetes.io/hostname":"127.0.0.1"}},
     "status":{"capacity":{"cpu":"4"},"ready": true,"addresses":[{"type": "LegacyHostIP", "address":"127.0.0.1"}]}},
    {"kind":"None","metadata":{"name":"127.0.0.2","labels":{"kubernetes.io/hostname":"127.0.0.2"}},
     "status":{"capacity":{"cpu":"8"},"ready": false,"addresses":[{"type": "LegacyHostIP", "address":"127.0.0.2"},{"type": "another", "address":"127.0.0.3"}]}}
  ],
  "users":[{"name": "myself","user": {}},{"name": "e2e","user": {"username": "admin", "password": "secret"}}]
}`);

test('client-go\'s cases over JSON input', () => {
  assert.equal(execute('{[?(@.z)].id}', POINTS), 'i2 i5');
  assert.equal(execute("{[0]['id']}", POINTS), 'i1');
  assert.equal(execute("{[-1]['x']}", POINTS), 'null');
  assert.equal(execute('{.items[*].status.addresses[*].address}', NODES), '127.0.0.1 127.0.0.2 127.0.0.3');
  assert.equal(execute('{.items[*].metadata.name}', NODES), '127.0.0.1 127.0.0.2');
  assert.equal(execute("{.items[*]['metadata.name', 'status.capacity']}", NODES), '127.0.0.1 127.0.0.2 {"cpu":"4"} {"cpu":"8"}');
  assert.equal(execute('{.users[?(@.name=="e2e")].user.password}', NODES), 'secret');
  assert.equal(execute('{.items[0].metadata.labels.kubernetes\\.io/hostname}', NODES), '127.0.0.1');
  assert.equal(execute('{.items[?(@.metadata.labels.kubernetes\\.io/hostname=="127.0.0.1")].kind}', NODES), 'None');
  assert.equal(execute('{.items[?(@..ready==true)].metadata.name}', NODES), '127.0.0.1');
  assert.equal(execute('{..name}', NODES).split(' ').sort().join(' '), '127.0.0.1 127.0.0.2 e2e myself');
  assert.equal(execute('{.kind}{" "}{.items[1].kind}', NODES), 'List None');
});

test('slices, negative indexes and steps as client-go reads them', () => {
  const data = parseUnstructured('{"a":[0,1,2,3,4,5,6,7,8,9]}');
  assert.equal(execute('{.a[-1]}', data), '9');
  assert.equal(execute('{.a[-3:]}', data), '7 8 9');
  assert.equal(execute('{.a[1:4]}', data), '1 2 3');
  assert.equal(execute('{.a[::3]}', data), '0 3 6 9');
  assert.equal(execute('{.a[1:8:2]}', data), '1 3 5 7');
  assert.equal(execute('{.a[2:2]}', data), '');
  assert.equal(execute('{.a[*]}', data), '0 1 2 3 4 5 6 7 8 9');
  assert.throws(() => execute('{.a[10]}', data), /out of bounds/);
  assert.throws(() => execute('{.a[0:5:0]}', data), /step must be > 0/);
  assert.throws(() => execute('{.a[5:2]}', data), /starting index/);
});

test('comparisons: int64 with int64, float64 with float64, strings by bytes; anything else is an error', () => {
  const data = parseUnstructured('{"x":[{"n":1,"f":1.5,"s":"b","b":true},{"n":2,"f":2.5,"s":"a","b":false}]}');
  assert.equal(execute('{.x[?(@.n>1)].s}', data), 'a');
  assert.equal(execute('{.x[?(@.f<=1.5)].s}', data), 'b');
  assert.equal(execute("{.x[?(@.s>='b')].n}", data), '1');
  assert.equal(execute('{.x[?(@.b==false)].n}', data), '2');
  assert.equal(execute('{.x[?(@.n!=1)].n}', data), '2');
  assert.throws(() => execute('{.x[?(@.n==1.5)].s}', data), /incompatible/);
  assert.throws(() => execute('{.x[?(@.b<true)].s}', data), /invalid type/);
  // A missing field is no match; a null one cannot be compared.
  assert.equal(execute('{.x[?(@.missing==1)].s}', data), '');
  assert.throws(() => execute('{.x[?(@.n==1)].s}', parseUnstructured('{"x":[{"n":null}]}')), /invalid type/);
  // An exists filter keeps an item whose path failed part way (the step's input was there).
  assert.equal(execute('{.x[?(@.s[0])].n}', data), '1 2');
});

test('what parses and what does not', () => {
  assert.throws(() => parse('{.a'), JsonPathSyntaxError);
  assert.throws(() => parse('{.a[}'), JsonPathSyntaxError);
  assert.throws(() => parse('{.a[x]}'), /invalid array index/);
  assert.throws(() => parse('{....a}'), /multiple recursive descent/);
  assert.throws(() => parse('{.a[?(@.b=="x)]}'), JsonPathSyntaxError);
  assert.throws(() => parse('{1.2.3}'), /cannot parse number/);
  assert.deepEqual(parse('{.a}').nodes, [{ type: 'list', nodes: [{ type: 'field', value: 'a' }] }]);
  assert.equal(unquoteExtend('"a\\tb\\u00e9\\x41"'), 'a\tbéA');
  assert.equal(unquoteExtend("'it\\'s'"), "it's");
  assert.throws(() => unquoteExtend('"a\\\'b"'), JsonPathSyntaxError);
});

test('values print as Go prints them: %v for scalars, json.Marshal for the rest', () => {
  const v = parseUnstructured('{"i":1000000,"f":1e21,"g":1000000.5,"s":"<x>","o":{"b":[1,2.5],"a":null},"big":123456789012345678,"huge":1e300,"z":0.00001}') as Record<string, unknown>;
  assert.equal(typeof v.i, 'bigint');
  assert.equal(typeof v.f, 'number');
  assert.equal(printResult(v.i), '1000000');
  assert.equal(printResult(v.f), '1e+21');
  assert.equal(printResult(v.g), '1.0000005e+06');
  assert.equal(printResult(v.z), '1e-05');
  assert.equal(printResult(v.big), '123456789012345678');
  assert.equal(printResult(v.s), '<x>');
  assert.equal(printResult(v.o), '{"a":null,"b":[1,2.5]}');
  assert.equal(printResult(null), '<no value>');
  assert.equal(formatV(-0), '-0');
  assert.equal(formatV(true), 'true');
});

test('a custom resource column reads its value as its type', () => {
  assert.equal(cellForJsonValue('integer', 3.9), 3n);
  assert.equal(cellForJsonValue('integer', -1e300), -(2n ** 63n));
  assert.equal(cellForJsonValue('integer', 'x'), null);
  assert.equal(cellForJsonValue('number', 7n), 7);
  assert.equal(cellForJsonValue('boolean', 'true'), null);
  assert.equal(cellForJsonValue('date', 'yesterday'), '<invalid>');
  assert.equal(cellForJsonValue('date', ''), '<unknown>');
  assert.equal(cellForJsonValue('date', '0001-01-01T00:00:00Z'), '<unknown>');
  assert.deepEqual(cellForJsonValue('date', '2026-01-01T00:00:00+01:00'), { at: Date.parse('2025-12-31T23:00:00Z') });
  assert.equal(cellForJsonValue('string', 5n), null);
  assert.equal(cellForJsonValue('other', 5n), null);
});

test('the convertor: Name first, each column\'s first result, and columns up to one that does not parse', () => {
  const c = customColumns([
    { name: 'Ready', type: 'string', format: '', description: '', priority: 0, jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
    { name: 'Size', type: 'integer', format: 'int64', description: 'the size', priority: 1, jsonPath: '.spec.sizes[*]' },
    { name: 'Broken', type: 'string', format: '', description: '', priority: 0, jsonPath: '.spec[' },
    { name: 'After', type: 'string', format: '', description: '', priority: 0, jsonPath: '.spec.after' },
  ])!;
  assert.deepEqual(
    c.definitions.map((d) => [d.name, d.description.slice(0, 40), d.priority, d.format]),
    [
      ['Name', 'Name must be unique within a namespace. ', 0, 'name'],
      ['Ready', 'Custom resource definition column (in JS', 0, ''],
      ['Size', 'the size', 1, 'int64'],
    ],
  );
  const row = c.print(parseUnstructured('{"metadata":{"name":"w"},"spec":{"sizes":[3,4]},"status":{"conditions":[{"type":"Ready","status":"True"}]}}'));
  assert.equal(encodeRow(row, 0), '"cells":["w","True",3]');
  assert.equal(encodeRow(c.print(parseUnstructured('{"metadata":{"name":7}}')), 0), '"cells":["",null,null]');
  // {range} shares its state between rows in the apiserver: such a CRD's Tables are left to it.
  assert.equal(customColumns([{ name: 'R', type: 'string', format: '', description: '', priority: 0, jsonPath: '.a}{range .b[*]}{.c}{end' }]), undefined);
});
