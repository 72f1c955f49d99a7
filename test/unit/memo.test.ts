import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ParseMemo } from '../../src/selectors/memo.ts';
import { parseFieldSelector, SelectorParseError } from '../../src/selectors/fields.ts';
import { parseLabelSelector } from '../../src/selectors/labels.ts';
import { goQuery } from '../../src/api/query.ts';
import { parseAccept } from '../../src/api/negotiation.ts';

describe('ParseMemo', () => {
  it('parses an input once and answers the same value after', () => {
    let parses = 0;
    const memo = new ParseMemo((s) => ({ parsed: s, n: ++parses }), { max: 4, maxKeyLength: 16 });
    const first = memo.get('a=b');
    assert.equal(memo.get('a=b'), first);
    assert.equal(parses, 1);
  });

  it('remembers undefined answers too', () => {
    let parses = 0;
    const memo = new ParseMemo((): string | undefined => void parses++, { max: 4, maxKeyLength: 16 });
    assert.equal(memo.get('x'), undefined);
    assert.equal(memo.get('x'), undefined);
    assert.equal(parses, 1);
  });

  it('does not remember a parse that throws: it throws every time', () => {
    let parses = 0;
    const memo = new ParseMemo((s: string) => {
      parses++;
      throw new Error(`bad ${s}`);
    }, { max: 4, maxKeyLength: 16 });
    assert.throws(() => memo.get('x'), /bad x/);
    assert.throws(() => memo.get('x'), /bad x/);
    assert.equal(parses, 2);
  });

  it('parses inputs over the length bound every time, and holds at most max entries', () => {
    let parses = 0;
    const memo = new ParseMemo((s) => (parses++, s.length), { max: 2, maxKeyLength: 3 });
    memo.get('long');
    memo.get('long');
    assert.equal(parses, 2);
    memo.get('a');
    memo.get('b');
    memo.get('c'); // full: emptied, then c kept
    parses = 0;
    memo.get('c');
    assert.equal(parses, 0);
    memo.get('a');
    assert.equal(parses, 1);
  });
});

describe('remembered request parses', () => {
  it('a field selector is parsed once, and a bad one is refused every time', () => {
    assert.equal(parseFieldSelector('spec.nodeName=n1'), parseFieldSelector('spec.nodeName=n1'));
    assert.throws(() => parseFieldSelector('a=b=c'), SelectorParseError);
    assert.throws(() => parseFieldSelector('a=b=c'), SelectorParseError);
  });

  it('a label selector, a query and an Accept header are parsed once', () => {
    assert.equal(parseLabelSelector('app=web,tier in (a,b)'), parseLabelSelector('app=web,tier in (a,b)'));
    assert.equal(goQuery('watch=1&fieldSelector=x%3Dy'), goQuery('watch=1&fieldSelector=x%3Dy'));
    assert.equal(parseAccept('application/json;as=Table;v=v1;g=meta.k8s.io,application/json'), parseAccept('application/json;as=Table;v=v1;g=meta.k8s.io,application/json'));
  });
});
