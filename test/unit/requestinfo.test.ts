// Cases from k8s.io/apiserver/pkg/endpoints/request/requestinfo_test.go, so Levee reads every
// request line as the apiserver does.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isLongRunning, parseRequestInfo, RequestInfoError } from '../../src/api/requestinfo.ts';

type Want = [verb: string, prefix: string, group: string, version: string, namespace: string, resource: string, subresource: string, name: string, parts: string[]];

const cases: Array<[method: string, url: string, want: Want]> = [
  // resource paths
  ['GET', '/api/v1/namespaces', ['list', 'api', '', 'v1', '', 'namespaces', '', '', ['namespaces']]],
  ['GET', '/api/v1/namespaces/other', ['get', 'api', '', 'v1', 'other', 'namespaces', '', 'other', ['namespaces', 'other']]],
  ['GET', '/api/v1/namespaces/other/pods', ['list', 'api', '', 'v1', 'other', 'pods', '', '', ['pods']]],
  ['GET', '/api/v1/namespaces/other/pods/foo', ['get', 'api', '', 'v1', 'other', 'pods', '', 'foo', ['pods', 'foo']]],
  ['HEAD', '/api/v1/namespaces/other/pods/foo', ['get', 'api', '', 'v1', 'other', 'pods', '', 'foo', ['pods', 'foo']]],
  ['GET', '/api/v1/pods', ['list', 'api', '', 'v1', '', 'pods', '', '', ['pods']]],
  ['HEAD', '/api/v1/pods', ['list', 'api', '', 'v1', '', 'pods', '', '', ['pods']]],
  ['GET', '/api/v1/namespaces/other/pods/foo', ['get', 'api', '', 'v1', 'other', 'pods', '', 'foo', ['pods', 'foo']]],
  ['GET', '/api/v1/namespaces/other/pods', ['list', 'api', '', 'v1', 'other', 'pods', '', '', ['pods']]],
  // special verbs
  ['GET', '/api/v1/proxy/namespaces/other/pods/foo', ['proxy', 'api', '', 'v1', 'other', 'pods', '', 'foo', ['pods', 'foo']]],
  ['GET', '/api/v1/proxy/namespaces/other/pods/foo/subpath/not/a/subresource', ['proxy', 'api', '', 'v1', 'other', 'pods', '', 'foo', ['pods', 'foo', 'subpath', 'not', 'a', 'subresource']]],
  ['GET', '/api/v1/watch/pods', ['watch', 'api', '', 'v1', '', 'pods', '', '', ['pods']]],
  ['GET', '/api/v1/pods?watch=true', ['watch', 'api', '', 'v1', '', 'pods', '', '', ['pods']]],
  ['GET', '/api/v1/pods?watch=false', ['list', 'api', '', 'v1', '', 'pods', '', '', ['pods']]],
  ['GET', '/api/v1/pods?watch=0', ['list', 'api', '', 'v1', '', 'pods', '', '', ['pods']]],
  ['GET', '/api/v1/pods?watch=1', ['watch', 'api', '', 'v1', '', 'pods', '', '', ['pods']]],
  // apimachinery reads only "0" and "false" (any case) as false: "f" and "" watch.
  ['GET', '/api/v1/pods?watch=f', ['watch', 'api', '', 'v1', '', 'pods', '', '', ['pods']]],
  ['GET', '/api/v1/pods?watch=', ['watch', 'api', '', 'v1', '', 'pods', '', '', ['pods']]],
  ['GET', '/api/v1/pods?watch=FALSE', ['list', 'api', '', 'v1', '', 'pods', '', '', ['pods']]],
  ['GET', '/api/v1/watch/namespaces/other/pods', ['watch', 'api', '', 'v1', 'other', 'pods', '', '', ['pods']]],
  // subresources
  ['GET', '/api/v1/namespaces/other/pods/foo/proxy', ['get', 'api', '', 'v1', 'other', 'pods', 'proxy', 'foo', ['pods', 'foo', 'proxy']]],
  ['GET', '/api/v1/namespaces/other/pods/foo/proxy/subpath', ['get', 'api', '', 'v1', 'other', 'pods', 'proxy', 'foo', ['pods', 'foo', 'proxy', 'subpath']]],
  ['PUT', '/api/v1/namespaces/other/finalize', ['update', 'api', '', 'v1', 'other', 'namespaces', 'finalize', 'other', ['namespaces', 'other', 'finalize']]],
  ['PUT', '/api/v1/namespaces/other/status', ['update', 'api', '', 'v1', 'other', 'namespaces', 'status', 'other', ['namespaces', 'other', 'status']]],
  ['POST', '/api/v1/namespaces/other/pods/foo/exec', ['create', 'api', '', 'v1', 'other', 'pods', 'exec', 'foo', ['pods', 'foo', 'exec']]],
  // verb identification
  ['PATCH', '/api/v1/namespaces/other/pods/foo', ['patch', 'api', '', 'v1', 'other', 'pods', '', 'foo', ['pods', 'foo']]],
  ['DELETE', '/api/v1/namespaces/other/pods/foo', ['delete', 'api', '', 'v1', 'other', 'pods', '', 'foo', ['pods', 'foo']]],
  ['POST', '/api/v1/namespaces/other/pods', ['create', 'api', '', 'v1', 'other', 'pods', '', '', ['pods']]],
  ['DELETE', '/api/v1/namespaces/other/pods', ['deletecollection', 'api', '', 'v1', 'other', 'pods', '', '', ['pods']]],
  // api group identification
  ['POST', '/apis/extensions/v1/namespaces/other/pods', ['create', 'apis', 'extensions', 'v1', 'other', 'pods', '', '', ['pods']]],
  ['GET', '/apis/apps/v1/deployments', ['list', 'apis', 'apps', 'v1', '', 'deployments', '', '', ['deployments']]],
  // the path as Go unescapes it: an escaped slash separates, an escaped dot is a dot
  ['GET', '/api/v1/namespaces/other/pods/foo%2Fbar', ['get', 'api', '', 'v1', 'other', 'pods', 'bar', 'foo', ['pods', 'foo', 'bar']]],
  ['GET', '/api/v1/namespaces/other/pods/%2e%2e', ['get', 'api', '', 'v1', 'other', 'pods', '', '..', ['pods', '..']]],
  ['GET', '/api/v1/namespaces/ot%68er/p%6Fds', ['list', 'api', '', 'v1', 'other', 'pods', '', '', ['pods']]],
  // a malformed escape, or bytes that are no UTF-8, leave the path as sent
  ['GET', '/api/v1/namespaces/other/pods/a%zz', ['get', 'api', '', 'v1', 'other', 'pods', '', 'a%zz', ['pods', 'a%zz']]],
  ['GET', '/api/v1/namespaces/other/pods/a%ff', ['get', 'api', '', 'v1', 'other', 'pods', '', 'a%ff', ['pods', 'a%ff']]],
  // a field selector that pins metadata.name names the object
  ['GET', '/api/v1/namespaces/other/pods?fieldSelector=metadata.name%3Dfoo', ['list', 'api', '', 'v1', 'other', 'pods', '', 'foo', ['pods']]],
  ['GET', '/api/v1/namespaces/other/pods?fieldSelector=metadata.name%3D%3Dfoo,spec.nodeName%3Dn', ['list', 'api', '', 'v1', 'other', 'pods', '', 'foo', ['pods']]],
  ['GET', '/api/v1/namespaces/other/pods?fieldSelector=metadata.name!%3Dfoo', ['list', 'api', '', 'v1', 'other', 'pods', '', '', ['pods']]],
  ['GET', '/api/v1/namespaces/other/pods?watch=true&fieldSelector=metadata.name%3Dfoo', ['watch', 'api', '', 'v1', 'other', 'pods', '', 'foo', ['pods']]],
];

for (const [method, url, want] of cases) {
  test(`${method} ${url}`, () => {
    const info = parseRequestInfo(method, url);
    assert.equal(info.isResourceRequest, true);
    assert.deepEqual(
      [info.verb, info.apiPrefix, info.apiGroup, info.apiVersion, info.namespace, info.resource, info.subresource, info.name, info.parts],
      want,
    );
  });
}

test('non-resource requests keep the lower-cased method as verb', () => {
  for (const [method, url] of [
    ['GET', '/'],
    ['GET', '/healthz'],
    ['GET', '/api'],
    ['GET', '/api/v1'],
    ['GET', '/apis'],
    ['GET', '/apis/apps'],
    ['GET', '/apis/apps/v1'],
    ['POST', '/other/path'],
    ['GET', '/openapi/v3'],
  ] as const) {
    const info = parseRequestInfo(method, url);
    assert.equal(info.isResourceRequest, false, url);
    assert.equal(info.verb, method.toLowerCase());
    assert.equal(info.path, url);
  }
});

test('a special verb with nothing after it is an error, as in the apiserver', () => {
  assert.throws(() => parseRequestInfo('GET', '/api/v1/watch'), RequestInfoError);
  assert.throws(() => parseRequestInfo('GET', '/api/v1/proxy'), RequestInfoError);
});

test('long-running requests are recognised as the apiserver does', () => {
  assert.equal(isLongRunning(parseRequestInfo('GET', '/api/v1/pods?watch=true')), true);
  assert.equal(isLongRunning(parseRequestInfo('GET', '/api/v1/namespaces/a/pods/b/log')), true);
  assert.equal(isLongRunning(parseRequestInfo('POST', '/api/v1/namespaces/a/pods/b/exec')), true);
  assert.equal(isLongRunning(parseRequestInfo('GET', '/api/v1/namespaces/a/pods/b/portforward')), true);
  assert.equal(isLongRunning(parseRequestInfo('GET', '/api/v1/namespaces/a/pods/b')), false);
  assert.equal(isLongRunning(parseRequestInfo('GET', '/api/v1/pods')), false);
});

test('the request\'s selectors reach the attributes only where the apiserver authorizes with them', () => {
  // k8s.io/apiserver/pkg/endpoints/request/requestinfo_test.go, TestSelectorParsing.
  const cases: Array<[method: string, url: string, verb: string, name: string, field: string, label: string]> = [
    ['GET', '/apis/group/version/resource', 'list', '', '', ''],
    ['GET', '/apis/group/version/resource?fieldSelector=metadata.name=name1', 'list', 'name1', 'metadata.name=name1', ''],
    ['GET', '/apis/group/version/resource?watch=true&fieldSelector=metadata.name=name1', 'watch', 'name1', 'metadata.name=name1', ''],
    ['GET', '/apis/group/version/resource?fieldSelector=foo=bar&labelSelector=baz=qux', 'list', '', 'foo=bar', 'baz=qux'],
    // A selector that does not parse names no object, but is still what authorization is given.
    ['GET', '/apis/group/version/resource?fieldSelector=metadata.name=name1,foo', 'list', '', 'metadata.name=name1,foo', ''],
    ['GET', '/apis/group/version/resource?fieldSelector=metadata.name=name1,foo&watch=true', 'watch', '', 'metadata.name=name1,foo', ''],
    ['GET', '/apis/group/version/resource?fieldSelector=metadata.name=name1,foo&watch=false', 'list', '', 'metadata.name=name1,foo', ''],
    ['DELETE', '/apis/group/version/resource?fieldSelector=foo=bar&labelSelector=baz=qux', 'deletecollection', '', 'foo=bar', 'baz=qux'],
    ['GET', '/apis/group/version/resource?fieldSelector=metadata.name=foo&fieldSelector=metadata.name=bar&labelSelector=foo=bar&labelSelector=foo=baz', 'list', 'foo', 'metadata.name=foo', 'foo=bar'],
    ['GET', '/apis/group/version/resource/name?fieldSelector=foo=bar&labelSelector=foo=bar', 'get', 'name', '', ''],
    ['GET', '/apis/group/version/watch/resource?fieldSelector=metadata.name=foo&labelSelector=foo=bar', 'watch', '', '', ''],
    ['GET', '/apis/group/version/watch/resource/name?fieldSelector=metadata.name=foo&labelSelector=foo=bar', 'watch', 'name', '', ''],
    // Levee's own: escapes and whitespace as fields.ParseSelector reads them; the first name in its (sorted) order.
    ['GET', '/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a&labelSelector=app%20in%20(web)', 'list', '', 'spec.nodeName=node-a', 'app in (web)'],
    ['GET', '/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Db%2Cmetadata.name%3Da', 'list', 'a', 'metadata.name=b,metadata.name=a', ''],
    ['GET', '/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3D%20x', 'list', ' x', 'metadata.name= x', ''],
    ['GET', '/api/v1/namespaces/ns/pods?fieldSelector=%20metadata.name%3Dx', 'list', '', ' metadata.name=x', ''],
  ];
  for (const [method, url, verb, name, field, label] of cases) {
    const info = parseRequestInfo(method, url);
    assert.deepEqual([info.verb, info.name, info.fieldSelector, info.labelSelector], [verb, name, field, label], `${method} ${url}`);
  }
});
