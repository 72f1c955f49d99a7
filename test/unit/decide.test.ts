// Where a read is answered, case by case: cache when it can answer exactly as the apiserver, the
// apiserver otherwise.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decide as decideAny, decideRead, decideWatch, type Decision } from '../../src/serve/decide.ts';
import { parseRequestInfo } from '../../src/api/requestinfo.ts';
import { parseFieldSelector } from '../../src/selectors/fields.ts';
import { parseLabelSelector } from '../../src/selectors/labels.ts';

const CACHED = { cached: true, synced: true, namespaced: true, consistentReads: 'verify' as const };
type State = Parameters<typeof decideRead>[1];
const NODE_LOCAL = {
  ...CACHED,
  selection: { labels: parseLabelSelector(''), fields: parseFieldSelector('spec.nodeName=n1'), labelSelector: '', fieldSelector: 'spec.nodeName=n1' },
};

function decide(url: string, opts: { method?: string; accept?: string; ua?: string; impersonating?: boolean; state?: State } = {}): Decision {
  const q = url.indexOf('?');
  return decideRead(
    {
      info: parseRequestInfo(opts.method ?? 'GET', url),
      query: new URLSearchParams(q === -1 ? '' : url.slice(q + 1)),
      accept: opts.accept,
      userAgent: opts.ua,
      impersonating: opts.impersonating ?? false,
    },
    opts.state ?? CACHED,
  );
}

const where = (d: Decision) => (d.source === 'cache' ? `cache:${d.plan.freshness.mode}` : `upstream:${d.reason}`);

const cases: Array<[string, string, Parameters<typeof decide>[1]?]> = [
  ['/api/v1/namespaces/a/pods?resourceVersion=0', 'cache:any'],
  ['/api/v1/namespaces/a/pods?resourceVersion=0&limit=5', 'cache:any'],
  ['/api/v1/namespaces/a/pods?resourceVersion=10', 'cache:notOlderThan'],
  ['/api/v1/namespaces/a/pods?resourceVersion=10&limit=5', 'cache:exact'],
  ['/api/v1/namespaces/a/pods?resourceVersion=10&resourceVersionMatch=NotOlderThan&limit=5', 'cache:notOlderThan'],
  ['/api/v1/namespaces/a/pods?resourceVersion=10&resourceVersionMatch=Exact', 'cache:exact'],
  ['/api/v1/namespaces/a/pods?resourceVersion=0&resourceVersionMatch=Exact', 'upstream:invalid'],
  ['/api/v1/namespaces/a/pods?resourceVersionMatch=NotOlderThan', 'upstream:invalid'],
  ['/api/v1/namespaces/a/pods?resourceVersion=10&resourceVersionMatch=Sometime', 'upstream:invalid'],
  // Reads without resourceVersion follow the consistent-read policy; under `verify` a small one is
  // cheaper for the apiserver to answer than a proof, a large one or any while it is busy waits.
  ['/api/v1/namespaces/a/pods', 'upstream:consistency-cost'],
  ['/api/v1/namespaces/a/pods', 'cache:consistent', { state: { ...CACHED, answersAtLeast: () => true } }],
  ['/api/v1/namespaces/a/pods?limit=500', 'cache:consistent', { state: { ...CACHED, answersAtLeast: () => true } }],
  ['/api/v1/namespaces/a/pods', 'cache:consistent', { state: { ...CACHED, upstreamBusy: true } }],
  ['/api/v1/namespaces/a/pods/p', 'cache:consistent', { state: { ...CACHED, upstreamBusy: true } }],
  // --consistent-read-proof-bytes 0: every consistent read waits for the proof.
  ['/api/v1/namespaces/a/pods/p', 'cache:consistent', { state: { ...CACHED, proofBytes: 0 } }],
  ['/api/v1/namespaces/a/pods', 'cache:consistent', { state: { ...CACHED, proofBytes: 0, answersAtLeast: () => false } }],
  ['/api/v1/namespaces/a/pods', 'cache:any', { state: { ...CACHED, consistentReads: 'cache' } }],
  ['/api/v1/namespaces/a/pods', 'upstream:consistent-read', { state: { ...CACHED, consistentReads: 'forward' } }],
  ['/api/v1/namespaces/a/pods/p', 'upstream:consistent-read', { state: { ...CACHED, consistentReads: 'forward' } }],
  ['/api/v1/namespaces/a/pods?resourceVersion=abc', 'upstream:invalid'],
  // go-restful's 406 before any negotiation: no clause names a type the route produces.
  ['/api/v1/namespaces/a/pods?resourceVersion=0', 'upstream:media-type', { accept: 'application/*' }],
  ['/api/v1/namespaces/a/pods?resourceVersion=0', 'cache:any', { accept: 'application/*, application/json;q=0.1' }],
  // A name the apiserver refuses in a path ("Name parameter invalid"), decoded as it decodes it.
  ['/api/v1/namespaces/a/pods/%2e%2e?resourceVersion=0', 'upstream:invalid'],
  ['/api/v1/namespaces/a/pods/a%25b?resourceVersion=0', 'upstream:invalid'],
  ['/api/v1/namespaces/a/pods/a%zz?resourceVersion=0', 'upstream:invalid'],
  ['/api/v1/namespaces/a/pods/p%2Fstatus?resourceVersion=0', 'upstream:not-a-read'],
  ['/api/v1/namespaces/a/pods/%70?resourceVersion=0', 'cache:any'],
  ['/api/v1/namespaces/a/pods?resourceVersion=0&limit=x', 'upstream:invalid'],
  // The apiserver parses limit and timeoutSeconds as int64 (strconv.ParseInt): anything else,
  // empty included, is its 400.
  ['/api/v1/namespaces/a/pods?resourceVersion=0&limit=', 'upstream:invalid'],
  ['/api/v1/namespaces/a/pods?resourceVersion=0&timeoutSeconds=30', 'cache:any'],
  ['/api/v1/namespaces/a/pods?resourceVersion=0&timeoutSeconds=abc', 'upstream:invalid'],
  ['/api/v1/namespaces/a/pods?resourceVersion=0&timeoutSeconds=1.5', 'upstream:invalid'],
  ['/api/v1/namespaces/a/pods?resourceVersion=0&timeoutSeconds=', 'upstream:invalid'],
  ['/api/v1/namespaces/a/pods?resourceVersion=0&fieldSelector=metadata.name%3Dx&timeoutSeconds=x', 'upstream:invalid'],
  ['/api/v1/namespaces/a/pods?resourceVersion=0&labelSelector=a%3Db%3Dc', 'upstream:invalid'],
  ['/api/v1/namespaces/a/pods?resourceVersion=0&fieldSelector=spec.bogus%3D1', 'upstream:invalid'],
  ['/api/v1/namespaces/a/pods?resourceVersion=0&fieldSelector=spec.nodeName%3Dn1', 'cache:any'],
  ['/api/v1/namespaces/a/pods?resourceVersion=0&pretty=true', 'upstream:pretty'],
  ['/api/v1/namespaces/a/pods?resourceVersion=0', 'upstream:pretty', { ua: 'curl/8.5.0' }],
  // Browsers get indented JSON from the apiserver too; pretty=false from curl gets compact JSON.
  ['/api/v1/namespaces/a/pods?resourceVersion=0', 'upstream:pretty', { ua: 'Mozilla/5.0 (X11; Linux x86_64)' }],
  ['/api/v1/namespaces/a/pods?resourceVersion=0&pretty=false', 'cache:any', { ua: 'curl/8.5.0' }],
  ['/api/v1/namespaces/a/pods?resourceVersion=0&shardSelector=x', 'upstream:parameter'],
  ['/api/v1/namespaces/a/pods?resourceVersion=0', 'upstream:media-type', { accept: 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json' }],
  ['/api/v1/namespaces/a/pods?resourceVersion=0', 'upstream:media-type', { accept: 'application/vnd.kubernetes.protobuf' }],
  // The apiserver answers a client that prefers protobuf in protobuf: so does the cache, when it writes it.
  ['/api/v1/namespaces/a/pods?resourceVersion=0', 'upstream:media-type', { accept: 'application/vnd.kubernetes.protobuf,application/json' }],
  ['/api/v1/namespaces/a/pods?resourceVersion=0', 'cache:any', { accept: 'application/vnd.kubernetes.protobuf,application/json', state: { ...CACHED, writes: (r) => r.as === 'object' } }],
  ['/api/v1/namespaces/a/pods?resourceVersion=0', 'cache:any', { accept: 'application/json, application/vnd.kubernetes.protobuf' }],
  ['/api/v1/namespaces/a/pods?resourceVersion=0', 'upstream:media-type', { accept: 'application/yaml' }],
  // protobuf has no indented form: curl asking for it gets the same bytes as anyone.
  ['/api/v1/namespaces/a/pods?resourceVersion=0', 'cache:any', { accept: 'application/vnd.kubernetes.protobuf', ua: 'curl/8.5.0', state: { ...CACHED, writes: () => true } }],
  ['/api/v1/namespaces/a/pods?resourceVersion=0', 'upstream:pretty', { accept: 'application/json;as=Table;v=v1;g=meta.k8s.io', ua: 'curl/8.5.0', state: { ...CACHED, writes: () => true } }],
  // A list asked for as one PartialObjectMetadata is the apiserver's 406.
  ['/api/v1/namespaces/a/pods?resourceVersion=0', 'upstream:media-type', { accept: 'application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io', state: { ...CACHED, writes: () => true } }],
  ['/api/v1/namespaces/a/pods?resourceVersion=0', 'cache:any', { accept: 'application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io', state: { ...CACHED, writes: () => true } }],
  ['/api/v1/namespaces/a/pods?resourceVersion=0', 'upstream:impersonation', { impersonating: true }],
  ['/api/v1/namespaces/a/pods?resourceVersion=0', 'upstream:not-synced', { state: { ...CACHED, synced: false } }],
  ['/api/v1/namespaces/a/pods?resourceVersion=0', 'upstream:not-cached', { state: { ...CACHED, cached: false, synced: false } }],
  ['/api/v1/namespaces/a/pods/p?resourceVersion=0', 'cache:any'],
  ['/api/v1/namespaces/a/pods/p?resourceVersion=7', 'cache:notOlderThan'],
  ['/api/v1/namespaces/a/pods/p', 'upstream:consistency-cost'],
  ['/api/v1/namespaces/a/pods/p/status?resourceVersion=0', 'upstream:not-a-read'],
  ['/api/v1/namespaces/a/pods/p?resourceVersion=0', 'upstream:not-a-read', { method: 'DELETE' }],
  ['/api/v1/namespaces/a/pods?watch=true&resourceVersion=0', 'upstream:not-a-read'],
  ['/api/v1/pods/p?resourceVersion=0', 'upstream:invalid'],
  ['/api/v1/namespaces/default?resourceVersion=0', 'cache:any', { state: { ...CACHED, namespaced: false } }],
  ['/api/v1/namespaces/a/nodes?resourceVersion=0', 'upstream:invalid', { state: { ...CACHED, namespaced: false } }],
  // A node-local cache answers only what stays on its node.
  ['/api/v1/pods?resourceVersion=0&fieldSelector=spec.nodeName%3Dn1', 'cache:any', { state: NODE_LOCAL }],
  ['/api/v1/pods?resourceVersion=0&fieldSelector=spec.host%3Dn1,status.phase%3DRunning', 'cache:any', { state: NODE_LOCAL }],
  ['/api/v1/pods?resourceVersion=0&fieldSelector=spec.nodeName%3Dn2', 'upstream:outside-selection', { state: NODE_LOCAL }],
  ['/api/v1/pods?resourceVersion=0', 'upstream:outside-selection', { state: NODE_LOCAL }],
  ['/api/v1/namespaces/a/pods/p?resourceVersion=0', 'cache:any', { state: NODE_LOCAL }],
  // continue: the token carries the resourceVersion; another one is the apiserver's 400.
  [`/api/v1/namespaces/a/pods?limit=5&continue=${Buffer.from('{"v":"meta.k8s.io/v1","rv":12,"start":"/p\\u0000"}').toString('base64url')}`, 'cache:exact'],
  [`/api/v1/namespaces/a/pods?limit=5&resourceVersion=12&continue=${Buffer.from('{"v":"meta.k8s.io/v1","rv":12,"start":"/p\\u0000"}').toString('base64url')}`, 'upstream:invalid'],
  ['/api/v1/namespaces/a/pods?limit=5&continue=not-a-token!', 'upstream:invalid'],
];

for (const [url, want, opts] of cases) {
  test(`${opts?.method ?? 'GET'} ${url}${opts?.accept ? ` accept=${opts.accept}` : ''}${opts?.ua ? ` ua=${opts.ua}` : ''} -> ${want}`, () => {
    assert.equal(where(decide(url, opts)), want);
  });
}

test('a continue token carries its resourceVersion and start key', () => {
  const token = Buffer.from('{"v":"meta.k8s.io/v1","rv":12,"start":"/p\\u0000"}').toString('base64url');
  const d = decide(`/api/v1/namespaces/a/pods?limit=5&continue=${token}`);
  assert.equal(d.source, 'cache');
  if (d.source !== 'cache') return;
  assert.deepEqual(d.plan.continueToken, { resourceVersion: 12, start: '/p\u0000' });
  assert.equal(d.plan.limit, 5);
});

test('watches: from a resourceVersion in the cache, the rest upstream', () => {
  const w = (url: string, state: State = CACHED) => {
    const q = url.indexOf('?');
    const d = decideWatch(
      { info: parseRequestInfo('GET', url), query: new URLSearchParams(q === -1 ? '' : url.slice(q + 1)), accept: undefined, userAgent: undefined, impersonating: false },
      state,
    );
    if (d.source !== 'cache') return `upstream:${d.reason}`;
    return `cache:${d.plan.initial ?? d.plan.resourceVersion}${d.plan.initialEventsEnd ? '+end' : ''}`;
  };
  assert.equal(w('/api/v1/namespaces/a/pods?watch=true&resourceVersion=12'), 'cache:12');
  assert.equal(w('/api/v1/watch/namespaces/a/pods?resourceVersion=12&allowWatchBookmarks=true&timeoutSeconds=30'), 'cache:12');
  // Watch-list, explicit or (with an upstream that does it) defaulted for resourceVersion 0 and unset.
  assert.equal(w('/api/v1/namespaces/a/pods?watch=true&resourceVersion=0'), 'cache:any');
  assert.equal(w('/api/v1/namespaces/a/pods?watch=true&resourceVersion=0&allowWatchBookmarks=true', { ...CACHED, watchList: true }), 'cache:any+end');
  assert.equal(w('/api/v1/namespaces/a/pods?watch=true&allowWatchBookmarks=true', { ...CACHED, watchList: true }), 'cache:consistent+end');
  assert.equal(w('/api/v1/namespaces/a/pods?watch=true&allowWatchBookmarks=true'), 'cache:any');
  // A /watch/ path is defaulted only with ?watch= as well: without, the legacy watch, no end bookmark.
  assert.equal(w('/api/v1/watch/namespaces/a/pods?allowWatchBookmarks=true', { ...CACHED, watchList: true }), 'cache:any');
  assert.equal(w('/api/v1/watch/namespaces/a/pods?resourceVersion=0&allowWatchBookmarks=true', { ...CACHED, watchList: true }), 'cache:any');
  assert.equal(w('/api/v1/watch/namespaces/a/pods?watch=1&allowWatchBookmarks=true', { ...CACHED, watchList: true }), 'cache:consistent+end');
  // ... and its options are validated as a list's: sendInitialEvents is the apiserver's 422.
  assert.equal(w('/api/v1/watch/namespaces/a/pods?sendInitialEvents=true&resourceVersionMatch=NotOlderThan'), 'upstream:invalid');
  assert.equal(w('/api/v1/watch/namespaces/a/pods?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true'), 'cache:consistent+end');
  // "f" allows bookmarks: apimachinery reads only "0" and "false" as false.
  assert.equal(w('/api/v1/namespaces/a/pods?watch=true&allowWatchBookmarks=f', { ...CACHED, watchList: true }), 'cache:consistent+end');
  assert.equal(w('/api/v1/namespaces/a/pods?watch=true&allowWatchBookmarks=False', { ...CACHED, watchList: true }), 'cache:consistent');
  assert.equal(w('/api/v1/namespaces/a/pods?watch=true&resourceVersion=12&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true'), 'cache:notOlderThan+end');
  assert.equal(w('/api/v1/namespaces/a/pods?watch=true&sendInitialEvents=true&allowWatchBookmarks=true'), 'upstream:invalid');
  assert.equal(w('/api/v1/namespaces/a/pods?watch=true&resourceVersionMatch=NotOlderThan'), 'upstream:invalid');
  assert.equal(w('/api/v1/namespaces/a/pods?watch=true&sendInitialEvents=false&resourceVersionMatch=NotOlderThan'), 'upstream:watch-initial-state');
  assert.equal(w('/api/v1/namespaces/a/pods?watch=true&resourceVersion=12&timeoutSeconds=x'), 'upstream:invalid');
  // timeoutSeconds=0 is no deadline at all (the apiserver's own, 30 to 60 min), not one now.
  const zero = decideWatch({ info: parseRequestInfo('GET', '/api/v1/namespaces/a/pods?watch=true&timeoutSeconds=0'), query: new URLSearchParams('watch=true&timeoutSeconds=0'), accept: undefined, userAgent: undefined, impersonating: false }, CACHED);
  assert.equal(zero.source === 'cache' && zero.plan.timeoutSeconds, undefined);
  assert.equal(w('/api/v1/namespaces/a/pods?watch=true&resourceVersion=12&timeoutSeconds='), 'upstream:invalid');
  assert.equal(w('/api/v1/pods?watch=true&resourceVersion=12', NODE_LOCAL), 'upstream:outside-selection');
  assert.equal(w('/api/v1/pods?watch=true&resourceVersion=12&fieldSelector=spec.nodeName%3Dn1', NODE_LOCAL), 'cache:12');
});

test('one decision for every request: method, verb and the consistent-read policy in force', () => {
  const d = (method: string, url: string, state: Parameters<typeof decideAny>[1] = CACHED) => {
    const q = url.indexOf('?');
    const r = decideAny({ method, info: parseRequestInfo(method, url), query: new URLSearchParams(q === -1 ? '' : url.slice(q + 1)), accept: undefined, userAgent: undefined, impersonating: false }, state);
    return r.source === 'upstream' ? `upstream:${r.reason}` : 'initialEventsEnd' in r.plan ? `cache:watch` : `cache:${r.plan.freshness.mode}`;
  };
  // The apiserver has no HEAD route for resources: its 405 is the answer.
  assert.equal(d('HEAD', '/api/v1/namespaces/a/pods?resourceVersion=0'), 'upstream:not-a-read');
  assert.equal(d('POST', '/api/v1/namespaces/a/pods'), 'upstream:not-a-read');
  assert.equal(d('GET', '/api/v1/namespaces/a/pods/p/log'), 'upstream:not-a-read');
  assert.equal(d('GET', '/api/v1/namespaces/a/pods?watch=true&resourceVersion=12'), 'cache:watch');
  assert.equal(d('GET', '/api/v1/namespaces/a/pods', { ...CACHED, cached: false }), 'upstream:not-cached');
  // A rule's policy for this client overrides the resource's, both ways.
  assert.equal(d('GET', '/api/v1/namespaces/a/pods', { ...CACHED, ruleConsistentReads: 'cache' }), 'cache:any');
  assert.equal(d('GET', '/api/v1/namespaces/a/pods', { ...CACHED, ruleConsistentReads: 'forward' }), 'upstream:consistent-read');
  assert.equal(d('GET', '/api/v1/namespaces/a/pods', { ...CACHED, consistentReads: 'forward', ruleConsistentReads: 'verify', upstreamBusy: true }), 'cache:consistent');
});

test('Tables and metadata-only reads: includeObject as the apiserver reads it, errors written as it would', () => {
  const KUBECTL = 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json';
  const writes = { ...CACHED, writes: () => true };
  const rep = (url: string, accept: string, state: State = writes) => {
    const d = decideAny({ info: parseRequestInfo('GET', url), query: new URLSearchParams(url.split('?')[1] ?? ''), accept, userAgent: undefined, impersonating: false }, state);
    return d.source === 'cache' ? d.plan.representation : d.reason;
  };
  assert.deepEqual(rep('/api/v1/namespaces/a/pods?resourceVersion=0', KUBECTL), { as: 'Table', version: 'v1', status: 'json', includeObject: 'Metadata' });
  assert.deepEqual(rep('/api/v1/namespaces/a/pods?resourceVersion=0&includeObject=None', KUBECTL), { as: 'Table', version: 'v1', status: 'json', includeObject: 'None' });
  // Its first value; an empty one is the default.
  assert.deepEqual(rep('/api/v1/namespaces/a/pods/p?resourceVersion=0&includeObject=&includeObject=None', 'application/json;as=Table;v=v1beta1;g=meta.k8s.io'), {
    as: 'Table',
    version: 'v1beta1',
    status: 'indented-json',
    includeObject: 'Metadata',
  });
  assert.equal(rep('/api/v1/namespaces/a/pods?resourceVersion=0&includeObject=Everything', KUBECTL), 'invalid');
  // Ignored where no Table is asked for.
  assert.deepEqual(rep('/api/v1/namespaces/a/pods?resourceVersion=0&includeObject=Everything', 'application/json'), { as: 'object', media: 'json' });
  assert.deepEqual(rep('/api/v1/namespaces/a/pods?resourceVersion=0', 'application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/vnd.kubernetes.protobuf'), {
    as: 'PartialObjectMetadataList',
    media: 'json',
    version: 'v1',
    status: 'protobuf',
  });
  // An error the cache would have to write in YAML: the apiserver's.
  assert.equal(rep('/api/v1/namespaces/a/pods?resourceVersion=0', 'application/json;as=Table;v=v1;g=meta.k8s.io,application/yaml'), 'media-type');
  // Not for a resource without a printer, nor in protobuf.
  assert.equal(rep('/api/v1/namespaces/a/pods?resourceVersion=0', KUBECTL, CACHED), 'media-type');
  assert.deepEqual(rep('/api/v1/namespaces/a/pods?resourceVersion=0', 'application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io'), 'media-type');
  // A Table watch's bookmarks would carry the kind's empty object with includeObject=Object.
  assert.equal(rep('/api/v1/namespaces/a/pods?watch=1&resourceVersion=5&includeObject=Object&allowWatchBookmarks=true', KUBECTL), 'media-type');
  assert.deepEqual(rep('/api/v1/namespaces/a/pods?watch=1&resourceVersion=5&includeObject=Object', KUBECTL), { as: 'Table', version: 'v1', status: 'json', includeObject: 'Object' });
  // Indented JSON is the apiserver's to write.
  assert.equal(rep('/api/v1/namespaces/a/pods?resourceVersion=0&pretty=true', KUBECTL), 'pretty');
});
