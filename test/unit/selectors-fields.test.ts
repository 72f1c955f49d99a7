// Field selector cases ported from apimachinery pkg/fields/selector_test.go, plus error texts as
// kube-apiserver v1.37 returns them in the 400 Status message.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  escapeFieldValue, parseFieldSelector, SelectorParseError, unescapeFieldValue, type FieldTerm,
} from '../../src/selectors/fields.ts';

function parseError(s: string): string {
  try {
    parseFieldSelector(s);
  } catch (err) {
    assert.ok(err instanceof SelectorParseError);
    return err.message;
  }
  return assert.fail(`${JSON.stringify(s)} parsed`);
}

// TestSelectorParse: good strings render back unchanged.
for (const s of ['x=a,y=b,z=c', '', 'x!=a,y=b', 'x=a||y\\=b', 'x=a\\=\\=b']) {
  test(`field selector ${JSON.stringify(s)} parses and renders back`, () => {
    assert.equal(parseFieldSelector(s).toString(), s);
  });
}

for (const s of ['x=a||y=b', 'x==a==b', 'x=a,b', 'x in (a)', 'x in (a,b,c)', 'x']) {
  test(`field selector ${JSON.stringify(s)} is refused`, () => {
    assert.throws(() => parseFieldSelector(s), SelectorParseError);
  });
}

test('field selector parsing is deterministic (terms sorted)', () => {
  assert.equal(parseFieldSelector('x=a,a=x').toString(), 'a=x,x=a');
  assert.equal(parseFieldSelector('a=x,x=a').toString(), 'a=x,x=a');
});

// TestSplitTerms and TestSplitTerm, observed through the parsed terms.
const parsed: Array<[string, FieldTerm[]]> = [
  ['a=avalue', [{ field: 'a', op: '=', value: 'avalue' }]],
  ['a=avalue,b=bvalue', [{ field: 'a', op: '=', value: 'avalue' }, { field: 'b', op: '=', value: 'bvalue' }]],
  ['c!=cvalue,b==bvalue,a=avalue', [
    { field: 'a', op: '=', value: 'avalue' }, { field: 'b', op: '=', value: 'bvalue' }, { field: 'c', op: '!=', value: 'cvalue' }]],
  ['', []],
  ['a=a,', [{ field: 'a', op: '=', value: 'a' }]],
  [',a=a', [{ field: 'a', op: '=', value: 'a' }]],
  [',', []],
  // "k2" sorts before "k=" ('2' < '=').
  ['k=\\,,k2=v2', [{ field: 'k2', op: '=', value: 'v2' }, { field: 'k', op: '=', value: ',' }]],
  ['k=\\\\,k2=v2', [{ field: 'k2', op: '=', value: 'v2' }, { field: 'k', op: '=', value: '\\' }]],
  ['k=\\\\\\,,k2=v2', [{ field: 'k2', op: '=', value: 'v2' }, { field: 'k', op: '=', value: '\\,' }]],
  ['k=\\=', [{ field: 'k', op: '=', value: '=' }]],
  ['함=수,목=록', [{ field: '목', op: '=', value: '록' }, { field: '함', op: '=', value: '수' }]],
  // The field side has no escapes: the first operator splits, "!=" preferred over "==" over "=".
  ['a!b=c', [{ field: 'a!b', op: '=', value: 'c' }]],
  ['a!b\\=c', [{ field: 'a!b\\', op: '=', value: 'c' }]],
  ['k=a!b', [{ field: 'k', op: '=', value: 'a!b' }]],
  ['k!=\\=v', [{ field: 'k', op: '!=', value: '=v' }]],
  ['k==\\=v', [{ field: 'k', op: '=', value: '=v' }]],
  // Whitespace is data.
  [' a = b', [{ field: ' a ', op: '=', value: ' b' }]],
  // Terms whose field and value are both empty are dropped by ParseSelector's Transform.
  ['=', []],
  ['==,!=', []],
  ['=v', [{ field: '', op: '=', value: 'v' }]],
  ['k=', [{ field: 'k', op: '=', value: '' }]],
];
for (const [s, want] of parsed) {
  test(`field selector ${JSON.stringify(s)} parses to its terms`, () => {
    const sel = parseFieldSelector(s);
    assert.deepEqual(sel.terms, want);
    assert.equal(sel.empty, want.length === 0);
  });
}


// TestEscapeValue: unescaped value -> escaped value, both ways.
const escapes: Array<[string, string]> = [
  ['', ''],
  ['a', 'a'],
  ['=', '\\='],
  [',', '\\,'],
  ['\\', '\\\\'],
  ['\\=\\,\\', '\\\\\\=\\\\\\,\\\\'],
  ['a!b', 'a!b'],
];
for (const [raw, escaped] of escapes) {
  test(`field value ${JSON.stringify(raw)} escapes to ${JSON.stringify(escaped)} and back`, () => {
    assert.equal(escapeFieldValue(raw), escaped);
    assert.equal(unescapeFieldValue(escaped), raw);
  });
}

// Error texts exactly as the apiserver answers them.
const errors: Array<[string, string]> = [
  ['x', "invalid selector: 'x'; can't understand 'x'"],
  ['metadata.name=a,b', "invalid selector: 'metadata.name=a,b'; can't understand 'b'"],
  ['metadata.name in (a)', "invalid selector: 'metadata.name in (a)'; can't understand 'metadata.name in (a)'"],
  ['metadata.name=é,x', "invalid selector: 'metadata.name=é,x'; can't understand 'x'"],
  ['metadata.name=a\\!b', 'invalid field selector: invalid escape sequence: \\!'],
  ['metadata.name=a\\qb', 'invalid field selector: invalid escape sequence: \\q'],
  ['k=\\😀', 'invalid field selector: invalid escape sequence: \\😀'],
  ['metadata.name=a\\', 'invalid field selector: invalid escape sequence: \\'],
  ['k=\\\\\\', 'invalid field selector: invalid escape sequence: \\'],
  ['metadata.name=a=b', 'invalid field selector: unescaped character in value: 61'],
  ['metadata.name==a==b', 'invalid field selector: unescaped character in value: 61'],
  ['metadata.name=a=,', 'invalid field selector: unescaped character in value: 61'],
  ['k!==v', 'invalid field selector: unescaped character in value: 61'],
  // Terms are checked in sorted order, so "a" is reported before "z=\q".
  ['z=\\q,a', "invalid selector: 'z=\\q,a'; can't understand 'a'"],
  ['metadata.name=a,zz=\\q', 'invalid field selector: invalid escape sequence: \\q'],
];
for (const [s, want] of errors) {
  test(`field selector ${JSON.stringify(s)} fails with the apiserver's text`, () => {
    assert.equal(parseError(s), want);
  });
}

// TestSelectorMatches.
const fieldset = { foo: 'bar', baz: 'blah', complex: '=value\\,\\' };
const matching: Array<[string, Record<string, string>, boolean]> = [
  ['', { x: 'y' }, true],
  ['x=y', { x: 'y' }, true],
  ['x=y,z=w', { x: 'y', z: 'w' }, true],
  ['x!=y,z!=w', { x: 'z', z: 'a' }, true],
  ['notin=in', { notin: 'in' }, true],
  ['x=y', { x: 'z' }, false],
  ['x=y,z=w', { x: 'w', z: 'w' }, false],
  ['x!=y,z!=w', { x: 'z', z: 'w' }, false],
  ['foo=bar', fieldset, true],
  ['baz=blah', fieldset, true],
  ['foo=bar,baz=blah', fieldset, true],
  ['foo=bar,baz=blah,complex=\\=value\\\\\\,\\\\', fieldset, true],
  ['foo=blah', fieldset, false],
  ['baz=bar', fieldset, false],
  ['foo=bar,foobar=bar,baz=blah', fieldset, false],
  // A missing field reads as "".
  ['missing=', {}, true],
  ['missing!=', {}, false],
  ['missing!=x', {}, true],
  ['toString=', {}, true],
  ['constructor!=', {}, false],
];
for (const [s, fields, want] of matching) {
  test(`field selector ${JSON.stringify(s)} ${want ? 'matches' : 'does not match'} ${JSON.stringify(fields)}`, () => {
    assert.equal(parseFieldSelector(s).matches(fields), want);
  });
}

// TestRequiresExactMatch.
const exact: Array<[string, string, string | undefined]> = [
  ['', 'test', undefined],
  ['a=b', 'test', undefined],
  ['test=b', 'test', 'b'],
  ['test=', 'test', ''],
  ['test==b', 'test', 'b'],
  ['test!=b', 'test', undefined],
  ['test!=', 'test', undefined],
  ['test!=a,test=b', 'test', 'b'],
  ['a=c,test=b', 'test', 'b'],
];
for (const [s, field, want] of exact) {
  test(`field selector ${JSON.stringify(s)} requires ${field}=${String(want)}`, () => {
    assert.equal(parseFieldSelector(s).exact(field), want);
  });
}

// TestTransform.
test('field selector transform renames terms and drops those mapped to empty', () => {
  const identity = (f: string, v: string): [string, string] => [f, v];
  assert.equal(parseFieldSelector('').transform(identity).empty, true);
  assert.equal(parseFieldSelector('a=b,c=d').transform(identity).toString(), 'a=b,c=d');
  assert.equal(parseFieldSelector('a=b,c=d').transform((f, v) => (f === 'a' ? ['e', 'f'] : [f, v])).toString(), 'e=f,c=d');
  const emptied = parseFieldSelector('a=b').transform(() => ['', '']);
  assert.equal(emptied.empty, true);
  assert.equal(emptied.toString(), '');
  assert.equal(parseFieldSelector('a=b,c=d,e=f').transform((f, v) => (f === 'c' ? ['', ''] : [f, v])).toString(), 'a=b,e=f');
  assert.equal(parseFieldSelector('a!=b').transform(identity).toString(), 'a!=b');
});
