// Output negotiation as the apiserver does it (negotiation.NegotiateMediaTypeOptions over
// goautoneg): the clause it picks, and the representation the cache would write for it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { negotiateMediaType, parseAccept, representationFor, routeAccepts } from '../../src/api/negotiation.ts';

const BUILTIN = { customResource: false };
const CRD = { customResource: true };

function rep(accept: string | undefined, verb: 'get' | 'list' | 'watch' = 'list', endpoint = BUILTIN): unknown {
  return representationFor(negotiateMediaType(accept, endpoint, verb === 'watch'), verb) ?? 'forward';
}

test('what clients send', () => {
  // client-go typed clients (0.32+), kubelet, controllers
  assert.deepEqual(rep('application/vnd.kubernetes.protobuf, */*'), { as: 'object', media: 'protobuf' });
  assert.deepEqual(rep('application/vnd.kubernetes.protobuf,application/json', 'watch'), { as: 'object', media: 'protobuf' });
  // dynamic clients, client-node, curl
  assert.deepEqual(rep('application/json'), { as: 'object', media: 'json' });
  assert.deepEqual(rep(undefined), { as: 'object', media: 'json' });
  assert.deepEqual(rep('*/*'), { as: 'object', media: 'json' });
  // kubectl get
  assert.deepEqual(rep('application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json'), { as: 'Table', version: 'v1' });
  // the metadata client (garbage collector, controller-runtime metadata informers)
  const metadataList = 'application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json';
  assert.deepEqual(rep(metadataList), { as: 'PartialObjectMetadataList', media: 'protobuf', version: 'v1' });
  assert.deepEqual(rep('application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1', 'get'), { as: 'PartialObjectMetadata', media: 'protobuf', version: 'v1' });
});

test('custom resources have no protobuf of their own, but their metadata-only forms have', () => {
  assert.deepEqual(rep('application/vnd.kubernetes.protobuf,application/json', 'list', CRD), { as: 'object', media: 'json' });
  assert.equal(rep('application/vnd.kubernetes.protobuf', 'list', CRD), 'forward');
  assert.deepEqual(rep('application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1', 'list', CRD), {
    as: 'PartialObjectMetadataList',
    media: 'protobuf',
    version: 'v1',
  });
});

test('q values and wildcards order the clauses; ties keep their order', () => {
  assert.deepEqual(rep('application/json;q=0.5,application/vnd.kubernetes.protobuf'), { as: 'object', media: 'protobuf' });
  assert.deepEqual(rep('*/*,application/vnd.kubernetes.protobuf'), { as: 'object', media: 'protobuf' });
  assert.deepEqual(rep('application/*,application/vnd.kubernetes.protobuf'), { as: 'object', media: 'protobuf' });
  assert.deepEqual(rep('application/json,application/vnd.kubernetes.protobuf'), { as: 'object', media: 'json' });
  // An unreadable q is 0.
  assert.deepEqual(rep('application/vnd.kubernetes.protobuf;q=x,application/json'), { as: 'object', media: 'json' });
});

test('what the cache leaves to the apiserver', () => {
  assert.equal(rep('application/yaml'), 'forward');
  assert.equal(rep('application/cbor'), 'forward');
  assert.equal(rep('text/html'), 'forward', 'nothing acceptable: the apiserver answers 406');
  assert.equal(rep('application/json;pretty=1'), 'forward');
  assert.deepEqual(rep('application/vnd.kubernetes.protobuf;pretty=1'), { as: 'object', media: 'protobuf' });
  // Table exists in JSON and YAML only: a protobuf Table clause is passed over.
  assert.deepEqual(rep('application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json'), { as: 'object', media: 'json' });
  assert.equal(rep('application/json;as=Table;v=v2;g=meta.k8s.io'), 'forward');
  assert.equal(rep('application/json;as=Scale;v=v1;g=autoscaling'), 'forward');
  assert.equal(rep('application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io', 'get'), 'forward', 'the apiserver: not a list (406)');
  // A watch takes the first acceptable clause, and YAML cannot stream: 406.
  assert.equal(rep('application/yaml,application/json', 'watch'), 'forward');
  assert.deepEqual(rep('application/json;stream=watch', 'watch'), { as: 'object', media: 'json' });
  assert.equal(rep('application/json;stream=other', 'watch'), 'forward');
  // Type names are compared as written.
  assert.equal(rep('Application/JSON'), 'forward');
});

test('goautoneg drops malformed clauses and reads parameters loosely', () => {
  assert.deepEqual(
    parseAccept('text, a/b/c, */*; q=0.1 ,application/json;x;y=1=2;as = Table')?.map((c) => [c.type, c.subType, c.q, Object.fromEntries(c.params)]),
    [
      ['application', 'json', 1, { as: 'Table' }],
      ['*', '*', Math.fround(0.1), {}],
    ],
  );
  assert.equal(parseAccept(Array(13).fill('application/json').join(',')), undefined);
});

test('errors of a conversion are written in the first clause that asks for none', async () => {
  const { statusMediaFor, includeObjectOf } = await import('../../src/api/negotiation.ts');
  assert.equal(statusMediaFor(undefined), 'json');
  assert.equal(statusMediaFor('application/json;as=Table;v=v1;g=meta.k8s.io,application/json'), 'json');
  assert.equal(statusMediaFor('application/json;as=Table;v=v1;g=meta.k8s.io'), 'indented-json');
  assert.equal(statusMediaFor('application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json'), 'json');
  assert.equal(statusMediaFor('application/json;as=Table;v=v1;g=meta.k8s.io,application/vnd.kubernetes.protobuf'), 'protobuf');
  assert.equal(statusMediaFor('application/json;as=Table;v=v1;g=meta.k8s.io,*/*'), 'json');
  // YAML and indented JSON are the apiserver's to write.
  assert.equal(statusMediaFor('application/json;as=Table;v=v1;g=meta.k8s.io,application/yaml'), undefined);
  assert.equal(statusMediaFor('application/json;as=Table;v=v1;g=meta.k8s.io,application/json;pretty=1'), undefined);
  assert.equal(includeObjectOf(new URLSearchParams('includeObject=Object')), 'Object');
  assert.equal(includeObjectOf(new URLSearchParams('')), 'Metadata');
  assert.equal(includeObjectOf(new URLSearchParams('includeObject=object')), undefined);
});

test('a built-in resource\'s route accepts only a type it produces, named exactly, or */*', () => {
  for (const accept of [undefined, '', 'application/json', '*/*', ' application/yaml ;q=0', 'text/html, application/vnd.kubernetes.protobuf;as=Table', 'application/json;q=0']) {
    assert.equal(routeAccepts(accept), true, accept);
  }
  for (const accept of ['application/*', 'APPLICATION/JSON', 'text/html', 'application/jsonx;stream=watch', '*/json', 'application/cbor']) {
    assert.equal(routeAccepts(accept), false, accept);
  }
});
