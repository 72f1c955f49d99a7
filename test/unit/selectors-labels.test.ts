// Label selector cases ported from apimachinery pkg/labels/selector_test.go, plus error texts
// as kube-apiserver v1.37 returns them in the 400 Status message.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseLabelSelector, SelectorParseError, type LabelRequirement } from '../../src/selectors/labels.ts';

function parseError(s: string): string {
  try {
    parseLabelSelector(s);
  } catch (err) {
    assert.ok(err instanceof SelectorParseError);
    return err.message;
  }
  return assert.fail(`${JSON.stringify(s)} parsed`);
}

function req(key: string, operator: LabelRequirement['operator'], values: string[] = []): LabelRequirement {
  return { key, operator, values };
}

// TestSelectorParse: good strings render back without their spaces.
for (const s of ['x=a,y=b,z=c', '', 'x!=a,y=b', 'x=', 'x= ', 'x=,z= ', 'x= ,z= ', '!x', 'x>1', 'x>1,z<5']) {
  test(`label selector ${JSON.stringify(s)} parses and renders back`, () => {
    assert.equal(parseLabelSelector(s).toString(), s.replaceAll(' ', ''));
  });
}

for (const s of ['x=a||y=b', 'x==a==b', '!x=a', 'x<a']) {
  test(`label selector ${JSON.stringify(s)} is refused`, () => {
    assert.throws(() => parseLabelSelector(s), SelectorParseError);
  });
}

test('label selector parsing is deterministic (sorted by key)', () => {
  assert.equal(parseLabelSelector('x=a,a=x').toString(), parseLabelSelector('a=x,x=a').toString());
  assert.equal(parseLabelSelector('x=a,a=x').toString(), 'a=x,x=a');
});

// TestSelectorMatches and TestRequirementSelectorMatching.
const matching: Array<[string, Record<string, string> | undefined, boolean]> = [
  ['', { x: 'y' }, true],
  ['', undefined, true],
  ['x=y', { x: 'y' }, true],
  ['x=y,z=w', { x: 'y', z: 'w' }, true],
  ['x!=y,z!=w', { x: 'z', z: 'a' }, true],
  ['notin=in', { notin: 'in' }, true],
  ['x', { x: 'z' }, true],
  ['!x', { y: 'z' }, true],
  ['x>1', { x: '2' }, true],
  ['x<1', { x: '0' }, true],
  ['x=z', {}, false],
  ['x=y', { x: 'z' }, false],
  ['x=y,z=w', { x: 'w', z: 'w' }, false],
  ['x!=y,z!=w', { x: 'z', z: 'w' }, false],
  ['x', { y: 'z' }, false],
  ['!x', { x: 'z' }, false],
  ['x>1', { x: '0' }, false],
  ['x<1', { x: '2' }, false],
  ['foo=bar', { foo: 'bar', baz: 'blah' }, true],
  ['baz=blah', { foo: 'bar', baz: 'blah' }, true],
  ['foo=bar,baz=blah', { foo: 'bar', baz: 'blah' }, true],
  ['foo=blah', { foo: 'bar', baz: 'blah' }, false],
  ['baz=bar', { foo: 'bar', baz: 'blah' }, false],
  ['foo=bar,foobar=bar,baz=blah', { foo: 'bar', baz: 'blah' }, false],
  ['x in (foo),y notin (alpha)', { x: 'foo', y: 'baz' }, true],
  ['x in (foo),y in (alpha)', { x: 'foo', y: 'baz' }, false],
  ['x notin (),y', { y: '' }, true],
  ['!x,y', { y: '' }, true],
  ['x notin (),!y', { y: '' }, false],
  ['x in ()', { y: 'baz' }, false],
  ['x in ()', { x: '' }, true],
  ['z>1', { z: '2' }, true],
  ['z>1', { z: 'v2' }, false],
  ['x!=y', {}, true],
  ['x notin (a)', undefined, true],
  ['x in (a,b)', { x: 'b' }, true],
  // Integer comparisons parse the label value as an int64; anything else never matches.
  ['x>9', { x: '10' }, true],
  ['x>9', { x: '010' }, true],
  ['x<0', { x: '-5' }, true],
  ['x>0', { x: '+5' }, true],
  ['x<9223372036854775807', { x: '9223372036854775806' }, true],
  ['x<9223372036854775807', { x: '9223372036854775808' }, false],
  ['x>1', { x: '1.5' }, false],
  ['x>1', { x: '' }, false],
  ['x<5', {}, false],
  // Label keys are own properties only.
  ['constructor', {}, false],
  ['!constructor', {}, true],
  ['hasOwnProperty', {}, false],
  ['valueOf=a', { valueOf: 'a' }, true],
  ['toString notin (a)', {}, true],
];
for (const [s, labels, want] of matching) {
  test(`label selector ${JSON.stringify(s)} ${want ? 'matches' : 'does not match'} ${JSON.stringify(labels)}`, () => {
    assert.equal(parseLabelSelector(s).matches(labels), want);
  });
}

// TestSetSelectorParser: the parsed requirements, sorted by key, values sorted and de-duplicated.
const parsed: Array<[string, LabelRequirement[]]> = [
  ['', []],
  ['\rx', [req('x', 'exists')]],
  ['this-is-a-dns.domain.com/key-with-dash', [req('this-is-a-dns.domain.com/key-with-dash', 'exists')]],
  ['this-is-another-dns.domain.com/key-with-dash in (so,what)',
    [req('this-is-another-dns.domain.com/key-with-dash', 'in', ['so', 'what'])]],
  ['0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)', [req('0.1.2.domain/99', 'notin', ['10.10.100.1', 'tick.tack.clock'])]],
  ['foo  in\t (abc)', [req('foo', 'in', ['abc'])]],
  ['x notin\n (abc)', [req('x', 'notin', ['abc'])]],
  ['x  notin\t\t\t(abc,def)', [req('x', 'notin', ['abc', 'def'])]],
  ['x in (abc,def)', [req('x', 'in', ['abc', 'def'])]],
  ['x in (abc,)', [req('x', 'in', ['', 'abc'])]],
  ['x in (abc,abc)', [req('x', 'in', ['abc'])]],
  ['x in ()', [req('x', 'in', [''])]],
  ['x in (a,,)', [req('x', 'in', ['', 'a'])]],
  ['x in (a,,,)', [req('x', 'in', ['', 'a'])]],
  ['x in (a,,,,,,)', [req('x', 'in', ['', 'a'])]],
  ['x in (a,,a,,a,,a,,)', [req('x', 'in', ['', 'a'])]],
  ['x notin (abc,,def),bar,z in (),w',
    [req('bar', 'exists'), req('w', 'exists'), req('x', 'notin', ['', 'abc', 'def']), req('z', 'in', [''])]],
  ['x,y in (a)', [req('x', 'exists'), req('y', 'in', ['a'])]],
  ['x=a', [req('x', '=', ['a'])]],
  ['x>1', [req('x', 'gt', ['1'])]],
  ['x<7', [req('x', 'lt', ['7'])]],
  ['x=a,y!=b', [req('x', '=', ['a']), req('y', '!=', ['b'])]],
  ['x=a,y!=b,z in (h,i,j)', [req('x', '=', ['a']), req('y', '!=', ['b']), req('z', 'in', ['h', 'i', 'j'])]],
  ['x notin ( )', [req('x', 'notin', [''])]],
  ['x notin (, a)', [req('x', 'notin', ['', 'a'])]],
  ['a ', [req('a', 'exists')]],
  ['a in (x,y,notin, z,in)', [req('a', 'in', ['in', 'notin', 'x', 'y', 'z'])]],
  ['x==a', [req('x', '==', ['a'])]],
  ['in,notin', [req('in', 'exists'), req('notin', 'exists')]],
  ['in in (in)', [req('in', 'in', ['in'])]],
  ['z=1,a=1,z!=2', [req('a', '=', ['1']), req('z', '=', ['1']), req('z', '!=', ['2'])]],
  ['z!=2,a=1,z=1', [req('a', '=', ['1']), req('z', '!=', ['2']), req('z', '=', ['1'])]],
];
for (const [s, want] of parsed) {
  test(`label selector ${JSON.stringify(s)} parses to its requirements`, () => {
    const sel = parseLabelSelector(s);
    assert.deepEqual(sel.requirements, want);
    assert.equal(sel.empty, want.length === 0);
  });
}

// TestToString, through the parser.
const rendered: Array<[string, string]> = [
  ['x in (def,abc),y notin (jkl),z', 'x in (abc,def),y notin (jkl),z'],
  ['x notin (abc,def),y!=jkl,!z', 'x notin (abc,def),y!=jkl,!z'],
  ['x notin (abc),y in (mno,jkl),z notin ()', 'x notin (abc),y in (jkl,mno),z notin ()'],
  ['x=abc,y==jkl,z!=a,z', 'x=abc,y==jkl,z!=a,z'],
  ['x>2,y<8,z', 'x>2,y<8,z'],
];
for (const [s, want] of rendered) {
  test(`label selector ${JSON.stringify(s)} renders as ${JSON.stringify(want)}`, () => {
    assert.equal(parseLabelSelector(s).toString(), want);
  });
}

// Error texts exactly as the apiserver answers them.
const regexKey = "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const keyMsg = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character " + regexKey;
const valueMsg = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const subdomainMsg = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const errors: Array<[string, string]> = [
  ['a=b=c', "found '=', expected: ',' or 'end of string'"],
  ['x==a==b', "found '==', expected: ',' or 'end of string'"],
  ['!x=a', "found '=', expected: ',' or 'end of string'"],
  ['x=a b', "found 'b', expected: ',' or 'end of string'"],
  ['x in (a)(', "found '(', expected: ',' or 'end of string'"],
  ['a in (xyz)b notin ()', "found 'b', expected: ',' or 'end of string'"],
  ['x,,y', "found ',', expected: identifier after ','"],
  ['a in (xyz),', "found '', expected: identifier after ','"],
  [',x,y', "found ',', expected: !, identifier, or 'end of string'"],
  ['(', "found '(', expected: !, identifier, or 'end of string'"],
  ['x nott in (y)', "unable to parse requirement: found 'nott', expected: in, notin, =, ==, !=, gt, lt"],
  ['a (', "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt"],
  ['x!', "unable to parse requirement: found '!', expected: in, notin, =, ==, !=, gt, lt"],
  ['a in (xyz abc)', "unable to parse requirement: found 'abc', expected: ',' or ')'"],
  ['a notin(', "unable to parse requirement: found '', expected: ',', ')' or identifier"],
  ['x in (a,', "unable to parse requirement: found '', expected: ',', or identifier"],
  ['x notin', "unable to parse requirement: found '' expected: '('"],
  ['!', "unable to parse requirement: found '', expected: identifier"],
  ['x=a,!', "unable to parse requirement: found '', expected: identifier"],
  ['x=(', "unable to parse requirement: found '(', expected: identifier"],
  ['x<a', `unable to parse requirement: values[0]: Invalid value: "a": for 'Gt', 'Lt' operators, the value must be an integer`],
  ['x>', `unable to parse requirement: values[0]: Invalid value: "": for 'Gt', 'Lt' operators, the value must be an integer`],
  ['x>1.5', `unable to parse requirement: values[0]: Invalid value: "1.5": for 'Gt', 'Lt' operators, the value must be an integer`],
  ['x<99999999999999999999',
    `unable to parse requirement: values[0]: Invalid value: "99999999999999999999": for 'Gt', 'Lt' operators, the value must be an integer`],
  ['x>-1', `unable to parse requirement: values[0][x]: Invalid value: "-1": ${valueMsg}`],
  ['x=a||y=b', `unable to parse requirement: values[0][x]: Invalid value: "a||y": ${valueMsg}`],
  ['k=v"q', `unable to parse requirement: values[0][k]: Invalid value: "v\\"q": ${valueMsg}`],
  ['x=é', `unable to parse requirement: values[0][x]: Invalid value: "é": ${valueMsg}`],
  ['k=\u00a0', `unable to parse requirement: values[0][k]: Invalid value: "\\u00a0": ${valueMsg}`],
  ['x=' + 'a'.repeat(64), `unable to parse requirement: values[0][x]: Invalid value: "${'a'.repeat(64)}": must be no more than 63 bytes`],
  // Several bad values: aggregated in brackets, in sorted value order.
  ['x in (é,"q)',
    `unable to parse requirement: [values[0][x]: Invalid value: "\\"q": ${valueMsg}, values[1][x]: Invalid value: "é": ${valueMsg}]`],
  // Key errors carry the parser's nil field path.
  ['a/b/c', `unable to parse requirement: <nil>: Invalid value: "a/b/c": a valid label key ${keyMsg} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`],
  ['/a', 'unable to parse requirement: <nil>: Invalid value: "/a": prefix part must be non-empty'],
  ['a/', `unable to parse requirement: <nil>: Invalid value: "a/": name part must be non-empty; name part ${keyMsg}`],
  ['?=', `unable to parse requirement: <nil>: Invalid value: "?": name part ${keyMsg}`],
  ['x\x01=1', `unable to parse requirement: <nil>: Invalid value: "x\\x01": name part ${keyMsg}`],
  ['Pre_fix/-bad-', `unable to parse requirement: <nil>: Invalid value: "Pre_fix/-bad-": prefix part ${subdomainMsg}; name part ${keyMsg}`],
  ['A_B.c/x', `unable to parse requirement: <nil>: Invalid value: "A_B.c/x": prefix part ${subdomainMsg}`],
  ['a'.repeat(64), `unable to parse requirement: <nil>: Invalid value: "${'a'.repeat(64)}": name part must be no more than 63 bytes`],
  ['b'.repeat(254) + '/a', `unable to parse requirement: <nil>: Invalid value: "${'b'.repeat(254)}/a": prefix part must be no more than 253 bytes`],
];
for (const [s, want] of errors) {
  test(`label selector ${JSON.stringify(s.length > 40 ? s.slice(0, 40) + '…' : s)} fails with the apiserver's text`, () => {
    assert.equal(parseError(s), want);
  });
}

test('whitespace-only label selectors are empty; in and notin are plain words as values', () => {
  assert.equal(parseLabelSelector(' \t\r\n').empty, true);
  assert.equal(parseLabelSelector('x=in,y=notin').toString(), 'x=in,y=notin');
  assert.equal(parseLabelSelector('x = y').toString(), 'x=y');
});

// TestRequiresExactMatch.
const exact: Array<[string, string, string | undefined]> = [
  ['key in (value)', 'key', 'value'],
  ['key in (value,value2)', 'key', undefined],
  ['key in (value,value1),key2 in (value2)', 'key2', 'value2'],
  ['key=value', 'key', 'value'],
  ['key==value', 'key', 'value'],
  ['key!=value', 'key', undefined],
  ['key in (value),key2 in (value2)', 'key', 'value'],
  ['key=', 'key', ''],
  ['key', 'key', undefined],
  // Only the first requirement on the key counts, as in apimachinery.
  ['key!=a,key=b', 'key', undefined],
  ['key=b,key!=a', 'key', 'b'],
];
for (const [s, key, want] of exact) {
  test(`label selector ${JSON.stringify(s)} requires ${key}=${String(want)}`, () => {
    assert.equal(parseLabelSelector(s).requiresExactMatch(key), want);
  });
}

test('equalities() lists every requirement that pins a key to one value', () => {
  const sel = parseLabelSelector('a=1,b==2,c in (3),d in (4,5),e!=6,f notin (7),g,!h,i>8,j<9,a=1,k in ()');
  assert.deepEqual(sel.equalities(), [['a', '1'], ['b', '2'], ['c', '3'], ['k', '']]);
  assert.deepEqual(parseLabelSelector('').equalities(), []);
});

test('exists() lists the keys a matching object must carry', () => {
  const sel = parseLabelSelector('a=1,b==2,c in (3),d in (4,5),e!=6,f notin (7),g,!h,i>8,j<9,a in (1)');
  assert.deepEqual(sel.exists(), ['a', 'b', 'c', 'd', 'g', 'i', 'j']);
});
