// The printers ported from pkg/printers/internalversion, over hand-made v1 objects in the states
// they tell apart; expected cells as the Go printers compute them (printers_test.go's cases among
// them). Time cells are moments, written at answer time: checked here at a fixed `now`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { printPod } from '../../src/represent/table/printers/pod.ts';
import { printNode } from '../../src/represent/table/printers/node.ts';
import { printEndpoints, printEndpointSlice, printService } from '../../src/represent/table/printers/service.ts';
import { printEvent } from '../../src/represent/table/printers/event.ts';
import { printCronJob, printDaemonSet, printDeployment, printJob, printReplicaSet, printStatefulSet } from '../../src/represent/table/printers/workloads.ts';
import { printConfigMap, printLease, printNamespace, printSecret } from '../../src/represent/table/printers/core.ts';
import { encodeRow, type Cell, type PrintedRow } from '../../src/represent/table/row.ts';

const NOW = Date.parse('2026-03-01T12:00:00Z');
const ago = (ms: number): string => new Date(NOW - ms).toISOString().replace('.000Z', 'Z');
const M = 60_000;
const H = 60 * M;

/** The cells as they are written at NOW. */
function cells(row: PrintedRow): unknown[] {
  return (JSON.parse(`{${encodeRow(row, NOW)}}`) as { cells: unknown[] }).cells;
}

const running = (name: string, extra: object = {}) => ({ name, ready: true, restartCount: 0, state: { running: { startedAt: ago(H) } }, ...extra });
const waitingFor = (name: string, reason: string, extra: object = {}) => ({ name, ready: false, restartCount: 0, state: { waiting: { reason } }, ...extra });
const exited = (name: string, terminated: object) => ({ name, ready: false, restartCount: 0, state: { terminated } });
const pod = (spec: object, status: object, metadata: object = {}) => ({ metadata: { name: 'p', creationTimestamp: ago(3 * H), ...metadata }, spec: { containers: [{ name: 'a' }], ...spec }, status });

test('a pod\'s Ready, Status and Restarts follow its containers', () => {
  assert.deepEqual(cells(printPod(pod({}, { phase: 'Pending' }))), ['p', '0/1', 'Pending', '0', '3h', '<none>', '<none>', '<none>', '<none>']);
  assert.deepEqual(
    cells(printPod(pod({ containers: [{ name: 'a' }, { name: 'b' }], nodeName: 'n1' }, { phase: 'Running', podIPs: [{ ip: '10.0.0.1' }, { ip: 'fd00::1' }], containerStatuses: [running('a'), running('b')] }))),
    ['p', '2/2', 'Running', '0', '3h', '10.0.0.1', 'n1', '<none>', '<none>'],
  );
  // A container waiting with a reason names the pod's status; the last such container wins (the
  // statuses are read backwards).
  assert.equal(cells(printPod(pod({}, { phase: 'Running', containerStatuses: [waitingFor('a', 'CrashLoopBackOff'), waitingFor('b', 'ErrImagePull')] })))[2], 'CrashLoopBackOff');
  // Restarts: the sum, and how long ago the latest container stopped.
  const restarted = printPod(pod({ containers: [{ name: 'a' }, { name: 'b' }] }, {
    phase: 'Running',
    containerStatuses: [
      running('a', { restartCount: 3, lastState: { terminated: { exitCode: 1, finishedAt: ago(10 * M) } } }),
      running('b', { restartCount: 2, lastState: { terminated: { exitCode: 1, finishedAt: ago(3 * M + 15_000) } } }),
    ],
  }));
  assert.equal(cells(restarted)[3], '5 (3m15s ago)');
  assert.equal(cells(printPod(pod({}, { phase: 'Running', containerStatuses: [running('a', { restartCount: 4 })] })))[3], '4');
});

test('a terminated container names the status by its reason, signal or exit code', () => {
  const status = (terminated: object, phase = 'Failed') => cells(printPod(pod({}, { phase, containerStatuses: [exited('a', terminated)] })))[2];
  assert.equal(status({ exitCode: 0, reason: 'Completed' }, 'Succeeded'), 'Completed');
  assert.equal(status({ exitCode: 137, signal: 9 }), 'Signal:9');
  assert.equal(status({ exitCode: 3 }), 'ExitCode:3');
  assert.equal(status({ exitCode: 1, reason: 'OOMKilled' }), 'OOMKilled');
  assert.deepEqual(printPod(pod({}, { phase: 'Succeeded' })).conditions, [{ type: 'Completed', status: 'True', reason: 'Succeeded', message: 'The pod has completed successfully.' }]);
  assert.deepEqual(printPod(pod({}, { phase: 'Failed' })).conditions, [{ type: 'Completed', status: 'True', reason: 'Failed', message: 'The pod failed.' }]);
  assert.equal(printPod(pod({}, { phase: 'Running' })).conditions, undefined);
});

test('Completed turns back into Running, NotReady or the failure while a container runs', () => {
  const two = { containers: [{ name: 'a' }, { name: 'b' }] };
  const statuses = [exited('a', { exitCode: 0, reason: 'Completed' }), running('b')];
  assert.equal(cells(printPod(pod(two, { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }], containerStatuses: statuses })))[2], 'Running');
  assert.equal(cells(printPod(pod(two, { phase: 'Running', containerStatuses: statuses })))[2], 'NotReady');
  assert.equal(cells(printPod(pod(two, { phase: 'Running', containerStatuses: [exited('a', { exitCode: 0, reason: 'Completed' }), exited('b', { exitCode: 2, reason: 'Error' })] })))[2], 'Error');
});

test('init containers: progress, failures, and sidecars that count as containers', () => {
  const spec = { initContainers: [{ name: 'i1' }, { name: 'i2' }] };
  const status = (initContainerStatuses: object[], extra: object = {}) => cells(printPod(pod(spec, { phase: 'Pending', initContainerStatuses, ...extra })))[2];
  assert.equal(status([waitingFor('i1', 'PodInitializing'), waitingFor('i2', 'PodInitializing')]), 'Init:0/2');
  assert.equal(status([exited('i1', { exitCode: 0 }), running('i2')]), 'Init:1/2');
  assert.equal(status([waitingFor('i1', 'CrashLoopBackOff')]), 'Init:CrashLoopBackOff');
  assert.equal(status([exited('i1', { exitCode: 1, reason: 'Error' })]), 'Init:Error');
  assert.equal(status([exited('i1', { exitCode: 2 })]), 'Init:ExitCode:2');
  assert.equal(status([exited('i1', { exitCode: 130, signal: 2 })]), 'Init:Signal:2');
  // Once initialized, the containers have their say too (an init container's reason stays when
  // none says anything).
  assert.equal(status([waitingFor('i1', 'CrashLoopBackOff')], { conditions: [{ type: 'Initialized', status: 'True' }], containerStatuses: [waitingFor('a', 'ContainerCreating')] }), 'ContainerCreating');
  assert.equal(status([waitingFor('i1', 'CrashLoopBackOff')], { conditions: [{ type: 'Initialized', status: 'True' }], containerStatuses: [running('a')] }), 'Init:CrashLoopBackOff');
  // A restartable init container (a sidecar) that started counts as a container, ready or not.
  const sidecar = printPod(
    pod({ initContainers: [{ name: 'proxy', restartPolicy: 'Always' }, { name: 'setup' }] }, {
      phase: 'Running',
      conditions: [{ type: 'Initialized', status: 'True' }],
      initContainerStatuses: [running('proxy', { started: true, restartCount: 2, lastState: { terminated: { exitCode: 1, finishedAt: ago(7 * M) } } }), exited('setup', { exitCode: 0 })],
      containerStatuses: [running('a', { restartCount: 1, lastState: { terminated: { exitCode: 1, finishedAt: ago(2 * H) } } })],
    }),
  );
  // Restarts of a sidecar count, a plain init container's do not once initialized.
  assert.deepEqual(cells(sidecar).slice(1, 4), ['2/2', 'Running', '3 (7m ago)']);
});

test('deletion, a lost node, scheduling gates and readiness gates', () => {
  const deleting = { deletionTimestamp: ago(M) };
  assert.equal(cells(printPod(pod({}, { phase: 'Running', containerStatuses: [running('a')] }, deleting)))[2], 'Terminating');
  assert.equal(cells(printPod(pod({}, { phase: 'Succeeded', containerStatuses: [exited('a', { exitCode: 0, reason: 'Completed' })] }, deleting)))[2], 'Completed');
  assert.equal(cells(printPod(pod({}, { phase: 'Running', reason: 'NodeLost' }, deleting)))[2], 'Unknown');
  assert.equal(cells(printPod(pod({}, { phase: 'Running', reason: 'NodeLost' })))[2], 'NodeLost');
  assert.equal(cells(printPod(pod({}, { phase: 'Pending', conditions: [{ type: 'PodScheduled', status: 'False', reason: 'SchedulingGated' }] })))[2], 'SchedulingGated');
  const gates = pod({ readinessGates: [{ conditionType: 'a' }, { conditionType: 'b' }, { conditionType: 'c' }] }, {
    phase: 'Running',
    nominatedNodeName: 'n2',
    // The first condition of a type decides.
    conditions: [{ type: 'a', status: 'True' }, { type: 'b', status: 'False' }, { type: 'b', status: 'True' }],
  });
  assert.deepEqual(cells(printPod(gates)).slice(7), ['n2', '1/3']);
});

test('an empty object prints, as a bookmark\'s row does', () => {
  assert.deepEqual(cells(printPod({ metadata: { resourceVersion: '5' } } as object)), ['', '0/0', '', '0', '<unknown>', '<none>', '<none>', '<none>', '<none>']);
  assert.deepEqual(cells(printNode({})), ['', 'Unknown', '<none>', '<unknown>', '', '<none>', '<none>', '<unknown>', '<unknown>', '<unknown>']);
  assert.deepEqual(cells(printJob({})), ['', 'Running', '0/1', '', '<unknown>', '', '', '<none>']);
});

test('nodes: readiness, cordons, roles from labels, addresses and versions', () => {
  const node = (extra: object) => ({
    metadata: { name: 'n', creationTimestamp: ago(50 * H), labels: { 'node-role.kubernetes.io/worker': '', 'node-role.kubernetes.io/control-plane': 'x', 'kubernetes.io/role': 'edge', 'node-role.kubernetes.io/': '' } },
    status: {
      addresses: [{ type: 'Hostname', address: 'h' }, { type: 'InternalIP', address: '10.0.0.1' }, { type: 'InternalIP', address: '10.0.0.2' }],
      nodeInfo: { kubeletVersion: 'v1.37.1', kernelVersion: '6.1', architecture: 'arm64' },
    },
    ...extra,
  });
  assert.deepEqual(cells(printNode(node({ spec: { unschedulable: true } }))), ['n', 'Unknown,SchedulingDisabled', 'control-plane,edge,worker', '2d2h', 'v1.37.1', '10.0.0.1', '<none>', '<unknown>', '6.1 (arm64)', '<unknown>']);
  // The last Ready condition counts.
  const conditions = [{ type: 'Ready', status: 'True' }, { type: 'Ready', status: 'False' }];
  assert.equal(cells(printNode(node({ status: { conditions } })))[1], 'NotReady');
});

test('services: each type\'s external IP, ports and selector', () => {
  const svc = (spec: object, status: object = {}) => cells(printService({ metadata: { name: 's', creationTimestamp: ago(M) }, spec, status }));
  assert.deepEqual(svc({ type: 'ClusterIP', clusterIPs: ['10.96.0.1'], ports: [{ port: 80, protocol: 'TCP' }, { port: 53, protocol: 'UDP' }], selector: { b: '2', a: '1' } }), ['s', 'ClusterIP', '10.96.0.1', '<none>', '80/TCP,53/UDP', '60s', 'a=1,b=2']);
  assert.deepEqual(svc({ type: 'NodePort', externalIPs: ['1.2.3.4', '1.2.3.5'], ports: [{ port: 80, nodePort: 30080, protocol: 'TCP' }] }).slice(2, 5), ['<none>', '1.2.3.4,1.2.3.5', '80:30080/TCP']);
  assert.equal(svc({ type: 'LoadBalancer' })[3], '<pending>');
  // Ingress IPs or hostnames, sorted and once each, before the external IPs; never clipped.
  assert.equal(svc({ type: 'LoadBalancer', externalIPs: ['9.9.9.9'] }, { loadBalancer: { ingress: [{ ip: '5.5.5.5' }, { hostname: 'a-very-long-hostname.example.com' }, { ip: '5.5.5.5' }] } })[3], '5.5.5.5,a-very-long-hostname.example.com,9.9.9.9');
  assert.equal(svc({ type: 'ExternalName', externalName: 'db.example.com' })[3], 'db.example.com');
  assert.deepEqual(svc({ type: 'ClusterIP', clusterIPs: ['None'] }).slice(4), ['<none>', '60s', '<none>']);
});

test('endpoints and endpoint slices: three addresses, then how many more', () => {
  const e = cells(printEndpoints({ metadata: { name: 'e' }, subsets: [{ addresses: [{ ip: '10.0.0.1' }, { ip: 'fd00::1' }], ports: [{ port: 80 }, { port: 81 }] }] }));
  assert.deepEqual(e, ['e', '10.0.0.1:80,[fd00::1]:80,10.0.0.1:81 + 1 more...', '<unknown>']);
  assert.equal(cells(printEndpoints({ subsets: [{ addresses: [{ ip: '10.0.0.1' }] }] }))[1], '10.0.0.1');
  assert.equal(cells(printEndpoints({}))[1], '<none>');
  const s = cells(printEndpointSlice({ metadata: { name: 's' }, addressType: 'IPv4', ports: [{ port: 80 }, { name: 'n' }, {}, { port: 1 }], endpoints: [{ addresses: ['a', 'b'] }, { addresses: ['c', 'd', 'e'] }] }));
  assert.deepEqual(s.slice(1, 4), ['IPv4', '80,n,* + 1 more...', 'a,b,c + 2 more...']);
  assert.deepEqual(cells(printEndpointSlice({ addressType: 'FQDN' })).slice(2, 4), ['<unset>', '<unset>']);
});

test('events: first and last seen from the old fields or the series, the source, the message trimmed as Go trims', () => {
  const e = printEvent({
    metadata: { name: 'e1' },
    involvedObject: { kind: 'Pod', name: 'web', fieldPath: 'spec.containers{a}' },
    reason: 'BackOff',
    message: '\u00a0 restarting\n\u0085',
    type: 'Warning',
    source: { component: 'kubelet', host: 'n1' },
    firstTimestamp: ago(2 * H),
    lastTimestamp: ago(90_000),
    count: 7,
  });
  // Under three hours, minutes: HumanDuration writes 2h as 120m.
  assert.deepEqual(cells(e), ['90s', 'Warning', 'BackOff', 'pod/web', 'spec.containers{a}', 'kubelet, n1', 'restarting', '120m', 7, 'e1']);
  const series = printEvent({ involvedObject: { kind: 'Node' }, eventTime: `${ago(5 * M).slice(0, -1)}.123456Z`, series: { count: 3, lastObservedTime: `${ago(20_000).slice(0, -1)}.5Z` }, reportingComponent: 'ctrl', reportingInstance: 'i' });
  // MicroTime keeps its fraction: 19.5 s and 4 min 59.877 s ago, truncated as Go truncates.
  assert.deepEqual(cells(series), ['19s', '', '', 'node', '', 'ctrl, i', '', '4m59s', 3, '']);
  // Without a count, one; without times, <unknown>; the BOM is not Go's space.
  assert.deepEqual(cells(printEvent({ message: '\ufeffx ' })).slice(6, 9), ['\ufeffx', '<unknown>', 1]);
});

test('workloads: replicas, selectors and templates', () => {
  const template = { spec: { containers: [{ name: 'a', image: 'i:1' }, { name: 'b', image: 'j:2' }], nodeSelector: { zone: 'x' } } };
  const selector = { matchLabels: { app: 'w' }, matchExpressions: [{ key: 'env', operator: 'NotIn', values: ['prod', 'dev'] }, { key: 'alpha', operator: 'Exists' }] };
  const meta = { name: 'w', creationTimestamp: ago(10 * M) };
  assert.deepEqual(cells(printDeployment({ metadata: meta, spec: { replicas: 3, selector, template }, status: { readyReplicas: 1, updatedReplicas: 2, availableReplicas: 1 } })), [
    'w', '1/3', 2, 1, '10m', 'a,b', 'i:1,j:2', 'alpha,app=w,env notin (dev,prod)',
  ]);
  // The Deployment prints an empty selector as nothing at all, the others as <none>.
  assert.equal(cells(printDeployment({ spec: { selector: {} } }))[7], '');
  assert.equal(cells(printDeployment({ spec: { selector: { matchExpressions: [{ key: 'a', operator: 'Bogus' }] } } }))[7], '<invalid>');
  assert.deepEqual(cells(printReplicaSet({ metadata: meta, spec: { replicas: 2, template }, status: { replicas: 2, readyReplicas: 1 } })).slice(1, 8), [2, 2, 1, '10m', 'a,b', 'i:1,j:2', '<none>']);
  assert.equal(cells(printReplicaSet({ spec: { selector: { matchLabels: { 'bad key!': 'x' } } } }))[7], '<error>');
  assert.deepEqual(cells(printDaemonSet({ metadata: meta, spec: { selector, template }, status: { desiredNumberScheduled: 5, currentNumberScheduled: 4, numberReady: 3, updatedNumberScheduled: 2, numberAvailable: 1 } })).slice(1, 7), [5, 4, 3, 2, 1, 'zone=x']);
  assert.deepEqual(cells(printStatefulSet({ metadata: meta, spec: { replicas: 3, template }, status: { readyReplicas: 2 } })), ['w', '2/3', '10m', 'a,b', 'i:1,j:2']);
});

test('jobs: completions, duration running or done, and their status by condition', () => {
  const job = (spec: object, status: object, metadata: object = {}) => cells(printJob({ metadata: { name: 'j', creationTimestamp: ago(H), ...metadata }, spec, status }));
  assert.deepEqual(job({ completions: 3 }, { succeeded: 1, startTime: ago(5 * M) }).slice(1, 4), ['Running', '1/3', '5m']);
  assert.deepEqual(job({ parallelism: 4 }, { succeeded: 2 }).slice(1, 4), ['Running', '2/1 of 4', '']);
  assert.deepEqual(job({ completions: 1 }, { succeeded: 1, startTime: ago(40 * M), completionTime: ago(5 * M - 30_000), conditions: [{ type: 'Complete', status: 'True' }] }).slice(1, 4), ['Complete', '1/1', '35m']);
  assert.equal(job({}, { conditions: [{ type: 'Failed', status: 'True' }] })[1], 'Failed');
  assert.equal(job({}, { conditions: [{ type: 'Complete', status: 'False' }, { type: 'Complete', status: 'True' }] })[1], 'Running');
  assert.equal(job({}, { conditions: [{ type: 'Suspended', status: 'True' }] }, { deletionTimestamp: ago(1000) })[1], 'Terminating');
  assert.equal(job({}, { conditions: [{ type: 'Suspended', status: 'True' }] })[1], 'Suspended');
  assert.equal(job({}, { conditions: [{ type: 'FailureTarget', status: 'True' }] })[1], 'FailureTarget');
  assert.equal(job({}, { conditions: [{ type: 'SuccessCriteriaMet', status: 'True' }] })[1], 'SuccessCriteriaMet');
  assert.deepEqual(
    cells(printCronJob({ metadata: { name: 'c' }, spec: { schedule: '* * * * *', suspend: false, jobTemplate: { spec: { template: { spec: { containers: [{ name: 'x', image: 'y' }] } } } } }, status: { active: [{}, {}], lastScheduleTime: ago(3 * M) } })),
    ['c', '* * * * *', '<none>', 'False', 2, '3m', '<unknown>', 'x', 'y', '<none>'],
  );
  assert.deepEqual(cells(printCronJob({ spec: { timeZone: 'UTC' } })).slice(2, 6), ['UTC', '<unset>', 0, '<none>']);
});

test('the small kinds: counts of data, types, phases, holders', () => {
  assert.deepEqual(cells(printConfigMap({ metadata: { name: 'c' }, data: { a: '', b: '' }, binaryData: { c: '' } })), ['c', 3, '<unknown>']);
  assert.deepEqual(cells(printSecret({ metadata: { name: 's' }, type: 'Opaque' })), ['s', 'Opaque', 0, '<unknown>']);
  assert.deepEqual(cells(printNamespace({ metadata: { name: 'n', creationTimestamp: ago(400 * 24 * H) }, status: { phase: 'Terminating' } })), ['n', 'Terminating', '400d']);
  assert.deepEqual(cells(printLease({ spec: { holderIdentity: 'me' } })), ['', 'me', '<unknown>']);
});

test('time cells are moments until written', () => {
  const row = printNamespace({ metadata: { name: 'n', creationTimestamp: ago(0) } });
  const age = row.cells[2] as Cell;
  assert.deepEqual(age, { at: NOW });
  assert.match(encodeRow(row, NOW + 59_000), /"59s"\]$/);
  assert.match(encodeRow(row, NOW + 3 * 24 * H + 5 * H), /"3d5h"\]$/);
});
