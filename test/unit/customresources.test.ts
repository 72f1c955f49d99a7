// Custom resources in --cache: how they are named (exactly, or by pattern), which version of a CRD
// is cached and when it must be cached anew, what the decision makes of their field selectors and
// versions, and how a configured resource that does not exist shows in /readyz.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compareKubeAwareVersions, matchesPattern, parsePattern, parseResourceSpec, resourceNameProblem } from '../../src/cache/names.ts';
import { parseDefinition, resolveDefinition, summarize, type Definition } from '../../src/cache/definitions.ts';
import { decideRead, decideWatch, type CacheState } from '../../src/serve/decide.ts';
import { parseRequestInfo } from '../../src/api/requestinfo.ts';
import { customResourceFields } from '../../src/selectors/customresource.ts';
import { parseOptions, UsageError } from '../../src/config/options.ts';
import { ConfigError, parseConfig } from '../../src/config/file.ts';
import { Health } from '../../src/serve/health.ts';

test('resource names: kubectl forms, checked', () => {
  assert.deepEqual(parseResourceSpec('widgets.example.com'), { group: 'example.com', version: '', resource: 'widgets' });
  assert.deepEqual(parseResourceSpec('example.com/v1beta1/widgets'), { group: 'example.com', version: 'v1beta1', resource: 'widgets' });
  assert.deepEqual(parseResourceSpec('v1/pods'), { group: '', version: 'v1', resource: 'pods' });
  for (const bad of ['Widgets.example.com', 'widgets..example.com', 'a/b/c/d', 'example.com/V1/widgets', 'widgets.example.com.', '']) {
    assert.match(resourceNameProblem(bad) ?? 'accepted', /^resource "/, bad);
  }
  assert.equal(resourceNameProblem('endpointslices.discovery.k8s.io'), undefined);
});

test('patterns: a whole resource name, a whole group, or every group below a domain', () => {
  const p = (s: string) => parsePattern(s);
  const m = (s: string, group: string, resource: string) => matchesPattern(p(s), group, resource);
  assert.equal(m('*.example.com', 'example.com', 'widgets'), true);
  assert.equal(m('*.example.com', 'a.example.com', 'widgets'), false);
  assert.equal(m('*.*.example.com', 'a.example.com', 'widgets'), true);
  assert.equal(m('*.*.example.com', 'a.b.example.com', 'widgets'), true);
  assert.equal(m('*.*.example.com', 'example.com', 'widgets'), false);
  assert.equal(m('*.*.example.com', 'badexample.com', 'widgets'), false);
  assert.equal(m('widgets.*', 'x.io', 'widgets'), true);
  assert.equal(m('widgets.*', 'x.io', 'gadgets'), false);
  assert.equal(m('widgets.*.example.com', 'a.example.com', 'widgets'), true);
  assert.equal(m('*.*', 'anything.io', 'gadgets'), true);
  assert.equal(m('*.*', '', 'pods'), false);
  for (const [bad, why] of [
    ['*', /needs a group/],
    ['wid*.example.com', /neither a resource name nor \*/],
    ['*.exam*ple.com', /whole names only/],
    ['*.example.*', /whole names only/],
    ['example.com/v1/*', /names no version/],
  ] as const) {
    assert.match(resourceNameProblem(bad) ?? 'accepted', why, bad);
  }
});

test('versions in discovery\'s order (apimachinery CompareKubeAwareVersionStrings)', () => {
  const versions = ['v1alpha1', 'foo', 'v2', 'v1', 'v1beta2', 'v10', 'bar', 'v1beta1', 'v2alpha3'];
  assert.deepEqual(versions.sort((a, b) => compareKubeAwareVersions(b, a)), ['v10', 'v2', 'v1', 'v1beta2', 'v1beta1', 'v2alpha3', 'v1alpha1', 'bar', 'foo']);
});

const definition = (over: Partial<Definition> = {}): Definition => ({
  name: 'widgets.example.com',
  uid: 'u1',
  generation: 1,
  deleting: false,
  established: true,
  group: 'example.com',
  plural: 'widgets',
  kind: 'Widget',
  listKind: 'WidgetList',
  namespaced: true,
  versions: [
    { name: 'v1beta1', served: true, selectableFields: ['.spec.color'] },
    { name: 'v1', served: true, selectableFields: ['.spec.color', '.spec.size'] },
    { name: 'v2alpha1', served: true, selectableFields: [] },
    { name: 'v3', served: false, selectableFields: [] },
  ],
  ...over,
});

test('a CRD resolves to its preferred served version, with that version\'s selectable fields', () => {
  const r = resolveDefinition('widgets.example.com', definition(), '');
  assert.ok('info' in r);
  assert.equal(r.info.version, 'v1');
  assert.equal(r.info.prefix, '/apis/example.com/v1');
  assert.deepEqual([...r.info.selectableFields!.selectable].sort(), ['metadata.name', 'metadata.namespace', 'spec.color', 'spec.size']);
  assert.equal(r.info.listKind, 'WidgetList');
  // Pinned by the name: that version while it is served.
  const pinned = resolveDefinition('widgets.example.com', definition(), 'v1beta1');
  assert.ok('info' in pinned);
  assert.deepEqual([...pinned.info.selectableFields!.selectable].sort(), ['metadata.name', 'metadata.namespace', 'spec.color']);
  assert.deepEqual(resolveDefinition('widgets.example.com', definition(), 'v3'), { waiting: 'waiting for the resource to exist (version v3 served)' });
  // Any change of the spec (a new generation) or of the accepted names means caching anew.
  const again = resolveDefinition('widgets.example.com', definition({ generation: 2 }), '');
  assert.ok('signature' in again);
  assert.notEqual(again.signature, r.signature);
  const renamed = resolveDefinition('widgets.example.com', definition({ kind: 'Gadget' }), '');
  assert.ok('signature' in renamed);
  assert.notEqual(renamed.signature, r.signature);
});

test('a CRD that is absent, not established or being deleted: waiting for the resource to exist', () => {
  assert.deepEqual(resolveDefinition('widgets.example.com', undefined, ''), { waiting: 'waiting for the resource to exist (no CustomResourceDefinition widgets.example.com)' });
  assert.match((resolveDefinition('w', definition({ established: false }), '') as { waiting: string }).waiting, /not established yet/);
  assert.match((resolveDefinition('w', definition({ deleting: true }), '') as { waiting: string }).waiting, /being deleted/);
  assert.match((resolveDefinition('w', definition({ versions: [] }), '') as { waiting: string }).waiting, /no version served/);
});

test('a CRD is kept as a summary: what resolving needs, not its schemas', () => {
  const crd = {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: 'widgets.example.com', uid: 'u9', resourceVersion: '42', generation: 3, managedFields: [{ manager: 'x' }] },
    spec: {
      group: 'example.com',
      scope: 'Cluster',
      names: { plural: 'widgets', kind: 'Widget', listKind: 'WidgetList' },
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          selectableFields: [{ jsonPath: '.spec.color' }],
          additionalPrinterColumns: [{ name: 'Color', type: 'string', jsonPath: '.spec.color', priority: 1 }],
          schema: { openAPIV3Schema: { type: 'object', description: 'x'.repeat(10_000) } },
        },
      ],
    },
    status: { acceptedNames: { plural: 'widgets', kind: 'Widget', listKind: 'WidgetCollection' }, conditions: [{ type: 'NamesAccepted', status: 'True' }, { type: 'Established', status: 'True', reason: 'InitialNamesAccepted' }] },
  };
  const summary = summarize(Buffer.from(JSON.stringify(crd)));
  assert.ok(summary.length < 1_000, `${summary.length} bytes`);
  assert.equal((JSON.parse(summary.toString()) as { metadata: { resourceVersion: string } }).metadata.resourceVersion, '42');
  assert.deepEqual(parseDefinition(summary), {
    name: 'widgets.example.com',
    uid: 'u9',
    generation: 3,
    deleting: false,
    established: true,
    group: 'example.com',
    plural: 'widgets',
    kind: 'Widget',
    listKind: 'WidgetCollection',
    namespaced: false,
    versions: [
      {
        name: 'v1',
        served: true,
        selectableFields: ['.spec.color'],
        // The Table's columns: unset fields as the apiserver reads them.
        printerColumns: [{ name: 'Color', type: 'string', format: '', description: '', priority: 1, jsonPath: '.spec.color' }],
      },
    ],
  });
  assert.equal(parseDefinition(summarize(Buffer.from(JSON.stringify({ ...crd, metadata: { ...crd.metadata, deletionTimestamp: '2026-01-01T00:00:00Z' } })))).deleting, true);
});

const CR: CacheState = { cached: true, synced: true, namespaced: true, consistentReads: 'verify', version: 'v1', selectableFields: customResourceFields(true, ['.spec.color']) };

function read(url: string, state: CacheState = CR): string {
  const q = url.indexOf('?');
  const d = decideRead({ info: parseRequestInfo('GET', url), query: new URLSearchParams(q === -1 ? '' : url.slice(q + 1)), accept: undefined, userAgent: undefined, impersonating: false }, state);
  return d.source === 'cache' ? 'cache' : `upstream:${d.reason}`;
}

function watch(url: string, state: CacheState = CR): string {
  const q = url.indexOf('?');
  const d = decideWatch({ info: parseRequestInfo('GET', url), query: new URLSearchParams(q === -1 ? '' : url.slice(q + 1)), accept: undefined, userAgent: undefined, impersonating: false }, state);
  return d.source === 'cache' ? 'cache' : `upstream:${d.reason}`;
}

test('custom resources: their CRD\'s field labels from the cache, others and other versions upstream', () => {
  const base = '/apis/example.com/v1/namespaces/a/widgets';
  assert.equal(read(`${base}?resourceVersion=0`), 'cache');
  assert.equal(read(`${base}?resourceVersion=0&fieldSelector=spec.color%3Dred,metadata.name!%3Dx,metadata.namespace%3Da`), 'cache');
  assert.equal(read(`${base}?resourceVersion=0&fieldSelector=spec.size%3D1`), 'upstream:invalid');
  assert.equal(read(`${base}/w?resourceVersion=0`), 'cache');
  assert.equal(watch(`${base}?watch=true&resourceVersion=5&fieldSelector=spec.color%3Dred`), 'cache');
  assert.equal(watch(`${base}?watch=true&resourceVersion=5&fieldSelector=spec.size%3D1`), 'upstream:invalid');
  // Another version is the apiserver's to convert, whatever the cache's state.
  assert.equal(read('/apis/example.com/v2/namespaces/a/widgets?resourceVersion=0'), 'upstream:version');
  assert.equal(read('/apis/example.com/v2/namespaces/a/widgets/w?resourceVersion=0', { ...CR, synced: false }), 'upstream:version');
  assert.equal(watch('/apis/example.com/v1beta1/namespaces/a/widgets?watch=true&resourceVersion=5'), 'upstream:version');
  // Cluster-scoped: no metadata.namespace.
  const cluster = { ...CR, namespaced: false, selectableFields: customResourceFields(false, ['.spec.color']) };
  assert.equal(read('/apis/example.com/v1/widgets?resourceVersion=0&fieldSelector=spec.color%3Dred', cluster), 'cache');
  assert.equal(read('/apis/example.com/v1/widgets?resourceVersion=0&fieldSelector=metadata.namespace%3Da', cluster), 'upstream:invalid');
  // Without a CRD's fields, a resource Levee does not know stays the apiserver's.
  assert.equal(read(`${base}?resourceVersion=0`, { ...CR, selectableFields: undefined }), 'upstream:invalid');
  // Built-in resources keep their own labels.
  assert.equal(read('/api/v1/namespaces/a/pods?resourceVersion=0&fieldSelector=spec.host%3Dn1', { ...CR, selectableFields: undefined }), 'cache');
});

test('--cache and the configuration file refuse malformed names and patterns, and per-resource settings on a pattern', () => {
  const o = parseOptions(['--cache', 'pods, *.example.com,widgets.*,example.com/v1/gadgets']);
  assert.ok(o !== 'help');
  assert.deepEqual(o.cache, ['pods', '*.example.com', 'widgets.*', 'example.com/v1/gadgets']);
  assert.throws(() => parseOptions(['--cache', 'pods,wid*gets.example.com']), (err: unknown) => err instanceof UsageError && /--cache: resource pattern "wid\*gets.example.com"/.test(err.message));
  assert.throws(() => parseOptions(['--cache', '*.example.com', '--cache-selector', '*.example.com=metadata.name=x']), /per resource, not per pattern/);
  assert.throws(() => parseOptions(['--cache', '*.example.com', '--consistent-reads', 'verify,*.example.com=cache']), /per resource, not per pattern/);
  const problems = (text: string): string => {
    try {
      parseConfig(text, 'levee.yaml');
    } catch (err) {
      assert.ok(err instanceof ConfigError);
      return err.message;
    }
    assert.fail('accepted');
  };
  assert.equal(parseConfig('cache: { resources: ["*.example.com", { name: "widgets.*" }, { name: widgets.example.com, indexes: [spec.color] }] }', 'x').cache?.resources?.length, 3);
  assert.match(problems('cache: { resources: ["*"] }'), /cache\.resources\[0\]: .*a pattern needs a group/);
  assert.match(problems('cache: { resources: [{ name: "Widgets.example.com" }] }'), /cache\.resources\[0\]\.name: resource "Widgets\.example\.com"/);
  assert.match(problems('cache: { resources: [{ name: "*.example.com", consistentReads: cache }] }'), /cache\.resources\[0\]: a pattern takes no fieldSelector/);
});

test('/readyz?verbose names what the cache waits for, and a failing check keeps its reason withheld', () => {
  const h = new Health();
  let ok = true;
  h.addReadyCheck('cache-synced', () => ({ ok, note: 'waiting for the resource to exist: widgets.example.com' }));
  h.addReadyCheck('shutdown', () => true);
  assert.deepEqual(h.readyz(false), { code: 200, body: 'ok' });
  assert.equal(h.readyz(true).body, '[+]ping ok\n[+]cache-synced ok (waiting for the resource to exist: widgets.example.com)\n[+]shutdown ok\nreadyz check passed\n');
  ok = false;
  assert.equal(h.readyz(true).body, '[+]ping ok\n[-]cache-synced failed: reason withheld\n[+]shutdown ok\nreadyz check failed\n');
});
