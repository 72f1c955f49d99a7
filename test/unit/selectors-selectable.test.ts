// Selectable fields per built-in resource, checked against kube-apiserver v1.37: which labels it
// accepts (conversion funcs) and which values its GetAttrs produces for served objects.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseFieldSelector } from '../../src/selectors/fields.ts';
import { fieldsOf, normalizeFieldLabel, normalizeFieldSelector, selectableFields } from '../../src/selectors/selectable.ts';

function sorted(set: ReadonlySet<string> | undefined): string[] | undefined {
  return set === undefined ? undefined : [...set].sort();
}

const accepted: Array<[string, string, string[] | undefined]> = [
  ['', 'pods', ['metadata.name', 'metadata.namespace', 'spec.host', 'spec.hostNetwork', 'spec.nodeName', 'spec.restartPolicy',
    'spec.schedulerName', 'spec.serviceAccountName', 'status.nominatedNodeName', 'status.phase', 'status.podIP', 'status.podIPs']],
  ['', 'nodes', ['metadata.name', 'spec.unschedulable']],
  ['', 'namespaces', ['metadata.name', 'status.phase']],
  ['', 'secrets', ['metadata.name', 'metadata.namespace', 'type']],
  ['', 'services', ['metadata.name', 'metadata.namespace', 'spec.clusterIP', 'spec.type']],
  ['', 'replicationcontrollers', ['metadata.name', 'metadata.namespace', 'status.replicas']],
  ['', 'events', ['involvedObject.apiVersion', 'involvedObject.fieldPath', 'involvedObject.kind', 'involvedObject.name',
    'involvedObject.namespace', 'involvedObject.resourceVersion', 'involvedObject.uid', 'metadata.name', 'metadata.namespace',
    'reason', 'reportingComponent', 'source', 'type']],
  ['events.k8s.io', 'events', ['metadata.name', 'metadata.namespace', 'reason', 'regarding.apiVersion', 'regarding.fieldPath',
    'regarding.kind', 'regarding.name', 'regarding.namespace', 'regarding.resourceVersion', 'regarding.uid',
    'reportingController', 'type']],
  ['', 'persistentvolumes', ['metadata.name', 'metadata.namespace']],
  ['', 'persistentvolumeclaims', ['metadata.name', 'metadata.namespace']],
  ['', 'configmaps', ['metadata.name', 'metadata.namespace']],
  ['apps', 'replicasets', ['metadata.name', 'metadata.namespace']],
  ['apps', 'deployments', ['metadata.name', 'metadata.namespace']],
  ['batch', 'jobs', ['metadata.name', 'metadata.namespace', 'status.successful']],
  ['batch', 'cronjobs', ['metadata.name', 'metadata.namespace']],
  ['certificates.k8s.io', 'certificatesigningrequests', ['metadata.name', 'spec.signerName']],
  ['certificates.k8s.io', 'podcertificaterequests', ['metadata.name', 'spec.nodeName', 'spec.podName', 'spec.signerName']],
  ['resource.k8s.io', 'resourceslices', ['metadata.name', 'spec.driver', 'spec.nodeName', 'spec.pool.name']],
  ['rbac.authorization.k8s.io', 'clusterroles', ['metadata.name', 'metadata.namespace']],
  ['example.com', 'widgets', undefined],
  ['', 'pods/status', undefined],
  ['', 'bindings', undefined],
  ['apps', 'pods', undefined],
];
for (const [group, resource, want] of accepted) {
  test(`selectable fields of ${group || 'core'}/${resource}`, () => {
    assert.deepEqual(sorted(selectableFields(group, resource)), want);
  });
}

test('field labels normalize through the conversion funcs', () => {
  assert.equal(normalizeFieldLabel('', 'pods', 'spec.host'), 'spec.nodeName');
  assert.equal(normalizeFieldLabel('', 'pods', 'spec.nodeName'), 'spec.nodeName');
  assert.equal(normalizeFieldLabel('', 'pods', 'spec.nodename'), undefined);
  assert.equal(normalizeFieldLabel('', 'nodes', 'metadata.namespace'), undefined);
  assert.equal(normalizeFieldLabel('', 'namespaces', 'name'), undefined);
  assert.equal(normalizeFieldLabel('events.k8s.io', 'events', 'regarding.kind'), 'involvedObject.kind');
  assert.equal(normalizeFieldLabel('events.k8s.io', 'events', 'reportingController'), 'reportingComponent');
  assert.equal(normalizeFieldLabel('events.k8s.io', 'events', 'involvedObject.kind'), undefined);
  assert.equal(normalizeFieldLabel('', 'events', 'reportingController'), undefined);
  assert.equal(normalizeFieldLabel('apps', 'replicasets', 'status.replicas'), undefined);
  assert.equal(normalizeFieldLabel('example.com', 'widgets', 'metadata.name'), undefined);
});

test('field selectors normalize as a whole or not at all', () => {
  assert.equal(normalizeFieldSelector('', 'pods', parseFieldSelector('spec.host=n1,status.phase!=Failed'))?.toString(),
    'spec.nodeName=n1,status.phase!=Failed');
  assert.equal(normalizeFieldSelector('', 'pods', parseFieldSelector('spec.host=n1,bogus=x')), undefined);
  assert.equal(normalizeFieldSelector('example.com', 'widgets', parseFieldSelector('')), undefined);
  assert.equal(normalizeFieldSelector('', 'configmaps', parseFieldSelector(''))?.empty, true);
});

// Shaped like pods as the apiserver serves them (defaulted).
const boundPod = {
  metadata: { name: 'p1', namespace: 'ns1' },
  spec: { nodeName: 'n1', restartPolicy: 'Never', schedulerName: 'default-scheduler', hostNetwork: true, serviceAccountName: 'sa' },
  status: { phase: 'Failed', podIP: '10.0.0.2', podIPs: [{ ip: '10.0.0.2' }, { ip: 'fd00::2' }], nominatedNodeName: '' },
};
const pendingPod = {
  metadata: { name: 'p0', namespace: 'ns1' },
  spec: { restartPolicy: 'Always', schedulerName: 'default-scheduler' },
  status: { phase: 'Pending', nominatedNodeName: 'n3' },
};

test('pod fields: set values, and the zero values Go gives absent ones', () => {
  assert.deepEqual(fieldsOf('', 'pods', boundPod), {
    'metadata.name': 'p1', 'metadata.namespace': 'ns1', 'spec.nodeName': 'n1', 'spec.restartPolicy': 'Never',
    'spec.schedulerName': 'default-scheduler', 'spec.serviceAccountName': 'sa', 'spec.hostNetwork': 'true',
    'status.phase': 'Failed', 'status.podIP': '10.0.0.2', 'status.nominatedNodeName': '',
  });
  assert.deepEqual(fieldsOf('', 'pods', pendingPod), {
    'metadata.name': 'p0', 'metadata.namespace': 'ns1', 'spec.nodeName': '', 'spec.restartPolicy': 'Always',
    'spec.schedulerName': 'default-scheduler', 'spec.serviceAccountName': '', 'spec.hostNetwork': 'false',
    'status.phase': 'Pending', 'status.podIP': '', 'status.nominatedNodeName': 'n3',
  });
});

test('pod IP and service account follow v1 defaulting', () => {
  const ipsOnly = { status: { podIPs: [{ ip: 'fd00::1' }, { ip: '10.0.0.1' }] } };
  assert.equal(fieldsOf('', 'pods', ipsOnly)['status.podIP'], 'fd00::1');
  const mismatch = { status: { podIP: '10.0.0.3', podIPs: [{ ip: '10.0.0.9' }] } };
  assert.equal(fieldsOf('', 'pods', mismatch)['status.podIP'], '10.0.0.3');
  assert.equal(fieldsOf('', 'pods', { spec: { serviceAccount: 'legacy' } })['spec.serviceAccountName'], 'legacy');
  assert.equal(fieldsOf('', 'pods', { spec: { serviceAccount: 'old', serviceAccountName: 'new' } })['spec.serviceAccountName'], 'new');
  assert.equal(fieldsOf('', 'pods', { spec: { hostNetwork: false } })['spec.hostNetwork'], 'false');
});

const podSelections: Array<[string, boolean, boolean]> = [
  // selector, matches boundPod, matches pendingPod
  ['spec.nodeName=n1', true, false],
  ['spec.host=n1', true, false],
  ['spec.nodeName=', false, true],
  ['spec.hostNetwork=false', false, true],
  ['spec.hostNetwork!=false', true, false],
  ['status.podIP=10.0.0.2', true, false],
  ['status.podIP=fd00::2', false, false],
  ['status.podIPs=', true, true],
  ['status.podIPs=10.0.0.2', false, false],
  ['status.nominatedNodeName=n3', false, true],
  ['metadata.namespace=ns1,status.phase!=Failed', false, true],
  ['spec.serviceAccountName=', false, true],
];
for (const [s, bound, pending] of podSelections) {
  test(`pod field selector ${s}`, () => {
    const sel = normalizeFieldSelector('', 'pods', parseFieldSelector(s));
    assert.ok(sel);
    assert.equal(sel.matches(fieldsOf('', 'pods', boundPod)), bound);
    assert.equal(sel.matches(fieldsOf('', 'pods', pendingPod)), pending);
  });
}

test('node fields: name, unschedulable, and the empty namespace of a cluster-scoped object', () => {
  assert.deepEqual(fieldsOf('', 'nodes', { metadata: { name: 'n1' }, spec: { unschedulable: true } }),
    { 'metadata.name': 'n1', 'metadata.namespace': '', 'spec.unschedulable': 'true' });
  assert.deepEqual(fieldsOf('', 'nodes', { metadata: { name: 'n2' }, spec: {} }),
    { 'metadata.name': 'n2', 'metadata.namespace': '', 'spec.unschedulable': 'false' });
  const sel = normalizeFieldSelector('', 'nodes', parseFieldSelector('spec.unschedulable!=true'));
  assert.equal(sel?.matches(fieldsOf('', 'nodes', { metadata: { name: 'n2' } })), true);
});

test('core and events.k8s.io events select the same internal fields', () => {
  const core = {
    metadata: { name: 'e1', namespace: 'ns1' },
    involvedObject: { kind: 'Pod', namespace: 'ns1', name: 'p1', uid: 'u1', apiVersion: 'v1', resourceVersion: '7', fieldPath: 'spec' },
    reason: 'Started', type: 'Normal', source: { component: 'kubelet' }, reportingComponent: 'kubelet-x',
  };
  const v1 = {
    metadata: { name: 'e1', namespace: 'ns1' },
    regarding: core.involvedObject, reason: 'Started', type: 'Normal',
    deprecatedSource: { component: 'kubelet' }, reportingController: 'kubelet-x',
  };
  const want = {
    'metadata.name': 'e1', 'metadata.namespace': 'ns1', 'involvedObject.kind': 'Pod', 'involvedObject.namespace': 'ns1',
    'involvedObject.name': 'p1', 'involvedObject.uid': 'u1', 'involvedObject.apiVersion': 'v1',
    'involvedObject.resourceVersion': '7', 'involvedObject.fieldPath': 'spec', reason: 'Started',
    reportingComponent: 'kubelet-x', source: 'kubelet', type: 'Normal',
  };
  assert.deepEqual(fieldsOf('', 'events', core), want);
  assert.deepEqual(fieldsOf('events.k8s.io', 'events', v1), want);
  // source falls back to the reporting controller.
  assert.equal(fieldsOf('', 'events', { reportingComponent: 'ctrl' }).source, 'ctrl');
  assert.equal(fieldsOf('events.k8s.io', 'events', { reportingController: 'ctrl' }).source, 'ctrl');
  const sel = normalizeFieldSelector('events.k8s.io', 'events', parseFieldSelector('regarding.kind=Pod,reportingController=kubelet-x'));
  assert.equal(sel?.matches(fieldsOf('events.k8s.io', 'events', v1)), true);
});

test('other resources extract their specific fields', () => {
  assert.deepEqual(fieldsOf('', 'secrets', { metadata: { name: 's', namespace: 'n' }, type: 'Opaque' }),
    { 'metadata.name': 's', 'metadata.namespace': 'n', type: 'Opaque' });
  assert.deepEqual(fieldsOf('', 'services', { metadata: { name: 's', namespace: 'n' }, spec: { clusterIP: 'None', type: 'ClusterIP' } }),
    { 'metadata.name': 's', 'metadata.namespace': 'n', 'spec.clusterIP': 'None', 'spec.type': 'ClusterIP' });
  assert.equal(fieldsOf('', 'replicationcontrollers', { status: { replicas: 3 } })['status.replicas'], '3');
  assert.equal(fieldsOf('', 'replicationcontrollers', { status: {} })['status.replicas'], '0');
  assert.equal(fieldsOf('batch', 'jobs', { status: { succeeded: 2 } })['status.successful'], '2');
  assert.equal(fieldsOf('batch', 'jobs', {})['status.successful'], '0');
  assert.equal(fieldsOf('', 'namespaces', { metadata: { name: 'ns' }, status: { phase: 'Active' } })['status.phase'], 'Active');
  assert.equal(fieldsOf('certificates.k8s.io', 'certificatesigningrequests', { spec: { signerName: 'a/b' } })['spec.signerName'], 'a/b');
  assert.deepEqual(fieldsOf('resource.k8s.io', 'resourceslices', { metadata: { name: 'r' }, spec: { driver: 'd', pool: { name: 'p' } } }),
    { 'metadata.name': 'r', 'metadata.namespace': '', 'spec.nodeName': '', 'spec.driver': 'd', 'spec.pool.name': 'p' });
  assert.deepEqual(fieldsOf('', 'configmaps', { metadata: { name: 'c', namespace: 'n' } }), { 'metadata.name': 'c', 'metadata.namespace': 'n' });
  assert.deepEqual(fieldsOf('example.com', 'widgets', { metadata: { name: 'w' } }), { 'metadata.name': 'w', 'metadata.namespace': '' });
});

test('malformed objects read as zero values rather than throwing', () => {
  for (const obj of [null, undefined, 42, 'x', [], { metadata: null, spec: 'x', status: { podIPs: 'x' } }]) {
    const fields = fieldsOf('', 'pods', obj);
    assert.equal(fields['metadata.name'], '');
    assert.equal(fields['status.podIP'], '');
    assert.equal(fields['spec.hostNetwork'], 'false');
  }
});
