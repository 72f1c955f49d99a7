// Objects of the built-in kinds kubectl prints, in the states their printers tell apart: made in
// the real apiserver (specs by POST, states by writing the status subresource), so both the
// apiserver and Levee print the very same objects. Pods are bound to Node objects made here
// (no kubelet runs them) or left unscheduled, Jobs are managed by a controller nobody runs.
import assert from 'node:assert/strict';
import type { Dispatcher } from 'undici';
import type { TestEnv } from '../env/testenv.ts';
import { createNodes, NO_SCHEDULER } from './cluster.ts';
import { get, send } from './http.ts';

/** An RFC 3339 time this long before now, at whole seconds. */
export function ago(ms: number): string {
  return new Date(Math.floor((Date.now() - ms) / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

const S = 1000;
const M = 60 * S;
const H = 60 * M;

export function pathOf(resource: string, namespace?: string): string {
  const [name, ...group] = resource.split('.');
  const prefix = group.length === 0 ? '/api/v1' : `/apis/${group.join('.')}/v1`;
  return namespace ? `${prefix}/namespaces/${namespace}/${name}` : `${prefix}/${name}`;
}

export interface States {
  /** The resources made, as --cache names them, with whether they are namespaced. */
  resources: Array<{ resource: string; namespaced: boolean }>;
  /** Names of the Node objects made here. */
  nodes: string[];
  /** Undoes what keeps objects from going away (finalizers), then deletes what is cluster-scoped. */
  cleanup(): Promise<void>;
}

type Json = Record<string, unknown>;

const container = (name: string, image = `registry.example/${name}:1`): Json => ({ name, image });
const running = (name: string, o: { ready?: boolean; restarts?: number; lastFinished?: string; started?: boolean } = {}): Json => ({
  name,
  image: `registry.example/${name}:1`,
  imageID: '',
  ready: o.ready ?? true,
  started: o.started ?? true,
  restartCount: o.restarts ?? 0,
  state: { running: { startedAt: ago(10 * M) } },
  ...(o.lastFinished ? { lastState: { terminated: { exitCode: 1, reason: 'Error', startedAt: ago(20 * M), finishedAt: o.lastFinished } } } : {}),
});
const waiting = (name: string, reason: string, o: { restarts?: number; lastFinished?: string } = {}): Json => ({
  name,
  image: `registry.example/${name}:1`,
  imageID: '',
  ready: false,
  started: false,
  restartCount: o.restarts ?? 0,
  state: { waiting: { reason, message: `${reason} for a while` } },
  ...(o.lastFinished ? { lastState: { terminated: { exitCode: 2, reason: 'Error', startedAt: ago(20 * M), finishedAt: o.lastFinished } } } : {}),
});
const terminated = (name: string, t: { exitCode: number; reason?: string; signal?: number }): Json => ({
  name,
  image: `registry.example/${name}:1`,
  imageID: '',
  ready: false,
  started: false,
  restartCount: 0,
  state: { terminated: { ...t, startedAt: ago(30 * M), finishedAt: ago(20 * M) } },
});
const condition = (type: string, status: string, reason?: string): Json => ({ type, status, lastTransitionTime: ago(5 * M), ...(reason ? { reason } : {}) });

/** A pod's spec and the status written after it is created (undefined: left as created). */
interface PodState {
  name: string;
  spec: Json;
  status?: Json;
  labels?: Record<string, string>;
  /** Deleted (with a finalizer keeping it) after its status is written. */
  deleted?: boolean;
}

function podStates(node: string): PodState[] {
  const bound = (containers: string[], extra: Json = {}): Json => ({ nodeName: node, containers: containers.map((c) => container(c)), ...extra });
  const ip = { podIP: '10.0.0.7', podIPs: [{ ip: '10.0.0.7' }, { ip: 'fd00::7' }], hostIP: '192.0.2.1', hostIPs: [{ ip: '192.0.2.1' }] };
  const initSpec = (extra: Json = {}): Json => bound(['app'], { initContainers: [container('init-a'), container('init-b')], ...extra });
  return [
    {
      name: 'pending',
      spec: { schedulerName: NO_SCHEDULER, containers: [container('app')] },
      labels: { app: 'web', tier: 'front' },
      status: { phase: 'Pending', nominatedNodeName: 'elsewhere', conditions: [condition('PodScheduled', 'False', 'Unschedulable')] },
    },
    { name: 'unscheduled', spec: { schedulerName: NO_SCHEDULER, containers: [container('app')] } },
    {
      name: 'gated',
      spec: { schedulerName: NO_SCHEDULER, schedulingGates: [{ name: 'example.com/wait' }], containers: [container('app')] },
    },
    {
      name: 'running',
      labels: { app: 'web' },
      spec: bound(['app', 'side']),
      status: {
        phase: 'Running',
        ...ip,
        conditions: [condition('Initialized', 'True'), condition('Ready', 'True'), condition('ContainersReady', 'True'), condition('PodScheduled', 'True')],
        containerStatuses: [running('app'), running('side')],
      },
    },
    {
      name: 'half-ready',
      spec: bound(['app', 'side']),
      status: { phase: 'Running', ...ip, conditions: [condition('Ready', 'False')], containerStatuses: [running('app'), running('side', { ready: false })] },
    },
    {
      name: 'crashloop',
      spec: bound(['app']),
      status: {
        phase: 'Running',
        ...ip,
        containerStatuses: [waiting('app', 'CrashLoopBackOff', { restarts: 7, lastFinished: ago(3 * M + 10 * S) })],
      },
    },
    {
      name: 'restarted-long-ago',
      spec: bound(['app', 'side']),
      status: {
        phase: 'Running',
        ...ip,
        conditions: [condition('Ready', 'True')],
        containerStatuses: [running('app', { restarts: 2, lastFinished: ago(50 * H) }), running('side', { restarts: 1, lastFinished: ago(26 * H) })],
      },
    },
    { name: 'image-pull', spec: bound(['app']), status: { phase: 'Pending', containerStatuses: [waiting('app', 'ImagePullBackOff')] } },
    {
      name: 'succeeded',
      spec: bound(['app'], { restartPolicy: 'Never' }),
      status: { phase: 'Succeeded', ...ip, containerStatuses: [terminated('app', { exitCode: 0, reason: 'Completed' })] },
    },
    {
      name: 'failed-exit',
      spec: bound(['app'], { restartPolicy: 'Never' }),
      status: { phase: 'Failed', containerStatuses: [terminated('app', { exitCode: 3 })] },
    },
    {
      name: 'failed-signal',
      spec: bound(['app'], { restartPolicy: 'Never' }),
      status: { phase: 'Failed', containerStatuses: [terminated('app', { exitCode: 137, signal: 9 })] },
    },
    {
      name: 'evicted',
      spec: bound(['app']),
      status: { phase: 'Failed', reason: 'Evicted', message: 'The node was low on resource: memory.' },
    },
    {
      name: 'completed-one-running',
      spec: bound(['app', 'side']),
      status: {
        phase: 'Running',
        ...ip,
        conditions: [condition('Ready', 'True')],
        containerStatuses: [terminated('app', { exitCode: 0, reason: 'Completed' }), running('side')],
      },
    },
    {
      name: 'completed-not-ready',
      spec: bound(['app', 'side']),
      status: {
        phase: 'Running',
        conditions: [condition('Ready', 'False')],
        containerStatuses: [terminated('app', { exitCode: 0, reason: 'Completed' }), running('side')],
      },
    },
    {
      name: 'completed-with-error',
      spec: bound(['app', 'side', 'third']),
      status: {
        phase: 'Running',
        containerStatuses: [terminated('app', { exitCode: 0, reason: 'Completed' }), terminated('side', { exitCode: 1, reason: 'Error' }), terminated('third', { exitCode: 0, reason: 'Completed' })],
      },
    },
    {
      name: 'init-waiting',
      spec: initSpec(),
      status: {
        phase: 'Pending',
        conditions: [condition('Initialized', 'False')],
        initContainerStatuses: [waiting('init-a', 'PodInitializing'), waiting('init-b', 'PodInitializing')],
        containerStatuses: [waiting('app', 'PodInitializing')],
      },
    },
    {
      name: 'init-second',
      spec: initSpec(),
      status: {
        phase: 'Pending',
        initContainerStatuses: [terminated('init-a', { exitCode: 0, reason: 'Completed' }), { ...running('init-b'), ready: false }],
        containerStatuses: [waiting('app', 'PodInitializing')],
      },
    },
    {
      name: 'init-crashloop',
      spec: initSpec(),
      status: {
        phase: 'Pending',
        initContainerStatuses: [waiting('init-a', 'CrashLoopBackOff', { restarts: 4, lastFinished: ago(45 * S) }), waiting('init-b', 'PodInitializing')],
        containerStatuses: [waiting('app', 'PodInitializing')],
      },
    },
    {
      name: 'init-error',
      spec: initSpec({ restartPolicy: 'Never' }),
      status: { phase: 'Failed', initContainerStatuses: [terminated('init-a', { exitCode: 1, reason: 'Error' }), waiting('init-b', 'PodInitializing')] },
    },
    {
      name: 'init-exit',
      spec: initSpec({ restartPolicy: 'Never' }),
      status: { phase: 'Failed', initContainerStatuses: [terminated('init-a', { exitCode: 2 }), waiting('init-b', 'PodInitializing')] },
    },
    {
      name: 'init-signal',
      spec: initSpec({ restartPolicy: 'Never' }),
      status: { phase: 'Failed', initContainerStatuses: [terminated('init-a', { exitCode: 0 }), terminated('init-b', { exitCode: 130, signal: 2 })] },
    },
    {
      name: 'sidecar',
      spec: bound(['app'], { initContainers: [{ ...container('proxy'), restartPolicy: 'Always' }, container('setup')] }),
      status: {
        phase: 'Running',
        ...ip,
        conditions: [condition('Initialized', 'True'), condition('Ready', 'True')],
        initContainerStatuses: [running('proxy', { restarts: 3, lastFinished: ago(7 * M) }), terminated('setup', { exitCode: 0, reason: 'Completed' })],
        containerStatuses: [running('app', { restarts: 1, lastFinished: ago(2 * H + 5 * M) })],
      },
    },
    {
      name: 'sidecar-starting',
      spec: bound(['app'], { initContainers: [{ ...container('proxy'), restartPolicy: 'Always' }, container('setup')] }),
      status: {
        phase: 'Pending',
        conditions: [condition('Initialized', 'False')],
        initContainerStatuses: [running('proxy', { ready: false }), { ...running('setup'), ready: false }],
        containerStatuses: [waiting('app', 'PodInitializing')],
      },
    },
    {
      name: 'gates',
      spec: bound(['app'], { readinessGates: [{ conditionType: 'example.com/lb' }, { conditionType: 'example.com/dns' }] }),
      status: {
        phase: 'Running',
        ...ip,
        conditions: [condition('Ready', 'False'), condition('example.com/lb', 'True'), condition('example.com/dns', 'False')],
        containerStatuses: [running('app')],
      },
    },
    {
      name: 'terminating',
      spec: bound(['app']),
      status: { phase: 'Running', ...ip, conditions: [condition('Ready', 'True')], containerStatuses: [running('app')] },
      deleted: true,
    },
    {
      name: 'node-lost',
      spec: bound(['app']),
      status: { phase: 'Running', reason: 'NodeLost', message: 'Node is not responding', containerStatuses: [running('app')] },
      deleted: true,
    },
    {
      name: 'terminated-deleting',
      spec: bound(['app'], { restartPolicy: 'Never' }),
      status: { phase: 'Succeeded', containerStatuses: [terminated('app', { exitCode: 0, reason: 'Completed' })] },
      deleted: true,
    },
  ];
}

const FINALIZER = 'example.com/levee-test';

async function must(what: string, p: Promise<{ status: number; body: string }>, ok = [200, 201]): Promise<Json> {
  const r = await p;
  assert.ok(ok.includes(r.status), `${what}: ${r.status} ${r.body}`);
  return JSON.parse(r.body) as Json;
}

/**
 * Makes every state in namespace `ns` (and Node objects named after it). Writes go to the
 * apiserver directly.
 */
export async function createStates(env: TestEnv, agent: Dispatcher, ns: string): Promise<States> {
  const token = env.tokens.admin;
  const post = (path: string, body: Json): Promise<Json> => must(`POST ${path}`, send('POST', `${env.server}${path}`, agent, token, body));
  // The cluster's controllers may write the status too: on a conflict, read again and retry.
  const putStatus = async (path: string, status: Json): Promise<Json> => {
    for (let attempt = 0; ; attempt++) {
      const current = await must(`GET ${path}`, get(`${env.server}${path}`, agent, token));
      const r = await send('PUT', `${env.server}${path}/status`, agent, token, { ...current, status });
      if (r.status !== 409 || attempt === 10) return must(`PUT ${path}/status`, Promise.resolve(r));
    }
  };
  const finalized: string[] = [];

  // Nodes: ready, not ready, no conditions at all, cordoned, with roles and addresses.
  const nodeNames = [`${ns}-ready`, `${ns}-notready`, `${ns}-new`, `${ns}-cordoned`];
  await createNodes(env, agent, nodeNames);
  const info = (arch: string): Json => ({
    machineID: 'm',
    systemUUID: 's',
    bootID: 'b',
    kernelVersion: '6.1.0-test',
    osImage: 'Test Linux 1',
    containerRuntimeVersion: 'containerd://2.0.0',
    kubeletVersion: 'v1.37.1',
    kubeProxyVersion: '',
    operatingSystem: 'linux',
    architecture: arch,
  });
  const nodeStatus = (ready: string | undefined, arch: string, addresses: Json[]): Json => ({
    conditions: ready === undefined ? [] : [{ type: 'Ready', status: ready, reason: 'Test', lastHeartbeatTime: ago(10 * S), lastTransitionTime: ago(H) }],
    addresses,
    nodeInfo: info(arch),
  });
  await must('label node', send('PATCH', `${env.server}/api/v1/nodes/${nodeNames[0]}`, agent, token, { metadata: { labels: { 'node-role.kubernetes.io/control-plane': '', 'node-role.kubernetes.io/worker': '', 'kubernetes.io/role': 'edge' } } }, 'application/merge-patch+json'));
  await must('label node', send('PATCH', `${env.server}/api/v1/nodes/${nodeNames[1]}`, agent, token, { metadata: { labels: { 'kubernetes.io/role': 'infra', 'node-role.example.com/ignored': '' } } }, 'application/merge-patch+json'));
  await putStatus(`/api/v1/nodes/${nodeNames[0]}`, nodeStatus('True', 'amd64', [{ type: 'InternalIP', address: '192.0.2.1' }, { type: 'ExternalIP', address: '198.51.100.1' }, { type: 'InternalIP', address: '192.0.2.2' }]));
  await putStatus(`/api/v1/nodes/${nodeNames[1]}`, nodeStatus('False', 'arm64', [{ type: 'Hostname', address: 'h' }]));
  await putStatus(`/api/v1/nodes/${nodeNames[3]}`, nodeStatus('Unknown', '', [{ type: 'InternalIP', address: '192.0.2.4' }]));
  // The first node made here is left schedulable: createNodes cordons them all.
  await must('uncordon', send('PATCH', `${env.server}/api/v1/nodes/${nodeNames[0]}`, agent, token, { spec: { unschedulable: false } }, 'application/merge-patch+json'));
  // The ready node's heartbeat, as its kubelet renews it: kube-controller-manager's node lifecycle
  // controller marks a node without one Unknown after its grace period (50 s), and its pods not
  // ready, which changes how they print (Running becomes NotReady) while the tests still read them.
  const leasePath = `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${nodeNames[0]}`;
  const renewLease = async (): Promise<void> => {
    // A MicroTime: six digits of fraction.
    const spec = { holderIdentity: nodeNames[0], leaseDurationSeconds: 40, renewTime: new Date().toISOString().replace('Z', '000Z') };
    const r = await send('PATCH', `${env.server}${leasePath}`, agent, token, { spec }, 'application/merge-patch+json');
    if (r.status === 404) await post('/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases', { metadata: { name: nodeNames[0] }, spec });
  };
  await renewLease();
  const heartbeat = setInterval(() => void renewLease().catch(() => undefined), 10_000);
  heartbeat.unref();

  for (const p of podStates(nodeNames[0]!)) {
    const path = `${pathOf('pods', ns)}/${p.name}`;
    await post(pathOf('pods', ns), { metadata: { name: p.name, labels: p.labels ?? {}, ...(p.deleted ? { finalizers: [FINALIZER] } : {}) }, spec: p.spec });
    if (p.status) await putStatus(path, p.status);
    if (p.deleted) {
      finalized.push(path);
      await must(`DELETE ${path}`, send('DELETE', `${env.server}${path}?gracePeriodSeconds=600`, agent, token), [200, 202]);
    }
  }

  const svc = (name: string, spec: Json): Promise<Json> => post(pathOf('services', ns), { metadata: { name }, spec });
  await svc('cluster', { selector: { app: 'web', tier: 'front' }, ports: [{ name: 'http', port: 80, targetPort: 8080 }, { name: 'dns', port: 53, protocol: 'UDP' }] });
  await svc('headless', { clusterIP: 'None', selector: { app: 'web' }, ports: [{ port: 80 }] });
  await svc('external-ips', { externalIPs: ['203.0.113.9', '203.0.113.8'], ports: [{ port: 443 }] });
  await svc('nodeport', { type: 'NodePort', ports: [{ name: 'a', port: 80 }, { name: 'b', port: 81, protocol: 'SCTP' }] });
  await svc('lb-pending', { type: 'LoadBalancer', ports: [{ port: 443 }] });
  await svc('lb', { type: 'LoadBalancer', ports: [{ port: 443 }], externalIPs: ['203.0.113.7'] });
  await putStatus(`${pathOf('services', ns)}/lb`, { loadBalancer: { ingress: [{ ip: '198.51.100.20' }, { hostname: 'lb.example.com' }, { ip: '198.51.100.3' }, { ip: '198.51.100.20' }] } });
  await svc('lb-host', { type: 'LoadBalancer', ports: [{ port: 443 }], allocateLoadBalancerNodePorts: false });
  await putStatus(`${pathOf('services', ns)}/lb-host`, { loadBalancer: { ingress: [{ hostname: 'a-rather-long-load-balancer-name.elb.example.com' }] } });
  await svc('external-name', { type: 'ExternalName', externalName: 'db.example.com' });
  await svc('no-ports', { clusterIP: 'None' });

  const managed = { 'endpointslice.kubernetes.io/managed-by': 'levee-test' };
  await post(pathOf('endpointslices.discovery.k8s.io', ns), {
    metadata: { name: 'many', labels: managed },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: 80 }, { name: 'named' }, {}, { name: 'metrics', port: 9090 }],
    endpoints: [{ addresses: ['10.1.0.1'] }, { addresses: ['10.1.0.2', '10.1.0.3'] }, { addresses: ['10.1.0.4'], conditions: { ready: false } }],
  });
  await post(pathOf('endpointslices.discovery.k8s.io', ns), { metadata: { name: 'empty', labels: managed }, addressType: 'IPv6', endpoints: [] });
  await post(pathOf('endpointslices.discovery.k8s.io', ns), {
    metadata: { name: 'fqdn', labels: managed },
    addressType: 'FQDN',
    ports: [{ port: 443, protocol: 'TCP' }],
    endpoints: [{ addresses: ['a.example.com'] }],
  });
  await post(pathOf('endpoints', ns), {
    metadata: { name: 'manual' },
    subsets: [
      { addresses: [{ ip: '10.2.0.1' }, { ip: '10.2.0.2' }], ports: [{ name: 'a', port: 80 }, { name: 'b', port: 81 }] },
      { addresses: [{ ip: 'fd00::1' }], ports: [{ port: 443 }] },
    ],
  });
  // Named apart from the services: the endpoints controller makes those of services with selectors.
  await post(pathOf('endpoints', ns), { metadata: { name: 'portless' }, subsets: [{ addresses: [{ ip: '10.3.0.1' }] }] });
  await post(pathOf('endpoints', ns), { metadata: { name: 'no-subsets' } });

  await post(pathOf('configmaps', ns), { metadata: { name: 'mixed', labels: { app: 'web' } }, data: { a: '1', b: '2' }, binaryData: { c: 'AAE=' } });
  await post(pathOf('configmaps', ns), { metadata: { name: 'empty' } });
  await post(pathOf('secrets', ns), { metadata: { name: 'opaque' }, type: 'Opaque', data: { a: 'YQ==', b: 'Yg==' } });
  await post(pathOf('secrets', ns), { metadata: { name: 'tls' }, type: 'kubernetes.io/tls', data: { 'tls.crt': 'eA==', 'tls.key': 'eQ==' } });
  await post(pathOf('secrets', ns), { metadata: { name: 'string-data' }, stringData: { only: 'text' } });
  await post(pathOf('serviceaccounts', ns), { metadata: { name: 'robot' } });
  await post(pathOf('leases.coordination.k8s.io', ns), { metadata: { name: 'held' }, spec: { holderIdentity: 'someone <here> & there', leaseDurationSeconds: 15 } });
  await post(pathOf('leases.coordination.k8s.io', ns), { metadata: { name: 'free' }, spec: {} });

  const involved = { kind: 'Pod', namespace: ns, name: 'running', uid: 'u', apiVersion: 'v1', fieldPath: 'spec.containers{app}' };
  await post(pathOf('events', ns), {
    metadata: { name: 'classic' },
    involvedObject: involved,
    reason: 'Pulled',
    message: '  Successfully pulled image\n',
    type: 'Normal',
    source: { component: 'kubelet', host: 'node-1' },
    firstTimestamp: ago(2 * H),
    lastTimestamp: ago(5 * M),
    count: 12,
  });
  await post(pathOf('events', ns), {
    metadata: { name: 'series' },
    involvedObject: { kind: 'Pod', namespace: ns, name: 'crashloop' },
    reason: 'Rebooted',
    message: 'Node rebooted',
    type: 'Warning',
    eventTime: new Date(Date.now() - 90 * M).toISOString().replace('Z', '000Z'),
    series: { count: 4, lastObservedTime: new Date(Date.now() - 70 * S).toISOString().replace('Z', '000Z') },
    reportingComponent: 'example.com/controller',
    reportingInstance: 'instance-1',
    action: 'Reboot',
  });
  await post(pathOf('events', ns), {
    metadata: { name: 'singleton' },
    involvedObject: { kind: 'Deployment', namespace: ns },
    reason: 'Scaled',
    message: 'up',
    type: 'Normal',
    eventTime: new Date(Date.now() - 3 * M).toISOString().replace('Z', '000Z'),
    reportingComponent: 'example.com/other',
    reportingInstance: 'pod-7',
    source: { host: 'host-2' },
    action: 'Scale',
  });

  const template = (app: string, containers = ['app']): Json => ({
    metadata: { labels: { app } },
    spec: { schedulerName: NO_SCHEDULER, containers: containers.map((c) => container(c)), nodeSelector: { disk: 'ssd', zone: 'a' } },
  });
  await post(pathOf('deployments.apps', ns), {
    metadata: { name: 'web' },
    spec: {
      replicas: 3,
      selector: { matchLabels: { app: 'web-deploy' }, matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['z', 'a'] }, { key: 'track', operator: 'Exists' }] },
      template: { ...template('web-deploy', ['app', 'side']), metadata: { labels: { app: 'web-deploy', track: 'stable' } } },
    },
  });
  await putStatus(`${pathOf('deployments.apps', ns)}/web`, { observedGeneration: 1, replicas: 3, updatedReplicas: 2, readyReplicas: 1, availableReplicas: 1, unavailableReplicas: 2 });
  await post(pathOf('deployments.apps', ns), { metadata: { name: 'zero' }, spec: { replicas: 0, selector: { matchLabels: { app: 'zero' } }, template: template('zero') } });
  await post(pathOf('replicasets.apps', ns), {
    metadata: { name: 'rs' },
    spec: { replicas: 2, selector: { matchExpressions: [{ key: 'app', operator: 'In', values: ['rs', 'other'] }] }, template: template('rs') },
  });
  await putStatus(`${pathOf('replicasets.apps', ns)}/rs`, { replicas: 2, fullyLabeledReplicas: 2, readyReplicas: 1, availableReplicas: 1, observedGeneration: 1 });
  await post(pathOf('daemonsets.apps', ns), { metadata: { name: 'agent' }, spec: { selector: { matchLabels: { app: 'agent' } }, template: template('agent', ['agent', 'exporter']) } });
  await putStatus(`${pathOf('daemonsets.apps', ns)}/agent`, { desiredNumberScheduled: 5, currentNumberScheduled: 4, numberReady: 3, updatedNumberScheduled: 2, numberAvailable: 3, numberMisscheduled: 0, observedGeneration: 1 });
  await post(pathOf('statefulsets.apps', ns), { metadata: { name: 'db' }, spec: { replicas: 3, serviceName: 'db', selector: { matchLabels: { app: 'db' } }, template: template('db') } });
  await putStatus(`${pathOf('statefulsets.apps', ns)}/db`, { replicas: 2, readyReplicas: 1, currentReplicas: 2, updatedReplicas: 2, availableReplicas: 1, observedGeneration: 1 });
  await post(pathOf('replicationcontrollers', ns), { metadata: { name: 'legacy' }, spec: { replicas: 0, selector: { app: 'legacy' }, template: template('legacy') } });

  // Jobs another controller manages: the cluster's job controller leaves them (and their status) alone.
  const job = (name: string, spec: Json): Promise<Json> =>
    post(pathOf('jobs.batch', ns), { metadata: { name }, spec: { managedBy: 'example.com/levee-test', template: { ...template(name), spec: { ...(template(name).spec as Json), restartPolicy: 'Never' } }, ...spec } });
  await job('complete', { completions: 2 });
  await putStatus(`${pathOf('jobs.batch', ns)}/complete`, {
    startTime: ago(65 * M),
    completionTime: ago(20 * M),
    succeeded: 2,
    conditions: [
      { type: 'SuccessCriteriaMet', status: 'True', lastProbeTime: ago(20 * M), lastTransitionTime: ago(20 * M) },
      { type: 'Complete', status: 'True', lastProbeTime: ago(20 * M), lastTransitionTime: ago(20 * M) },
    ],
  });
  await job('running', { parallelism: 3, completions: null });
  await putStatus(`${pathOf('jobs.batch', ns)}/running`, { startTime: ago(4 * M + 20 * S), active: 3, succeeded: 1, ready: 2 });
  await job('failed', { backoffLimit: 0 });
  await putStatus(`${pathOf('jobs.batch', ns)}/failed`, {
    startTime: ago(30 * M),
    failed: 1,
    conditions: [
      { type: 'FailureTarget', status: 'True', reason: 'BackoffLimitExceeded', lastProbeTime: ago(29 * M), lastTransitionTime: ago(29 * M) },
      { type: 'Failed', status: 'True', reason: 'BackoffLimitExceeded', lastProbeTime: ago(29 * M), lastTransitionTime: ago(29 * M) },
    ],
  });
  await job('suspended', { suspend: true });
  await putStatus(`${pathOf('jobs.batch', ns)}/suspended`, { conditions: [{ type: 'Suspended', status: 'True', reason: 'JobSuspended', lastProbeTime: ago(M), lastTransitionTime: ago(M) }] });
  await job('not-started', { parallelism: 1, completions: null });
  await post(pathOf('cronjobs.batch', ns), {
    metadata: { name: 'nightly' },
    spec: { schedule: '0 3 * * *', timeZone: 'Europe/Paris', suspend: true, jobTemplate: { spec: { template: { ...template('nightly'), spec: { ...(template('nightly').spec as Json), restartPolicy: 'OnFailure' } } } } },
  });
  await putStatus(`${pathOf('cronjobs.batch', ns)}/nightly`, { lastScheduleTime: ago(21 * H) });
  await post(pathOf('cronjobs.batch', ns), {
    metadata: { name: 'often' },
    spec: { schedule: '*/5 * * * *', suspend: true, jobTemplate: { spec: { template: { ...template('often'), spec: { ...(template('often').spec as Json), restartPolicy: 'Never' } } } } },
  });

  return {
    resources: [
      { resource: 'pods', namespaced: true },
      { resource: 'nodes', namespaced: false },
      { resource: 'namespaces', namespaced: false },
      { resource: 'services', namespaced: true },
      { resource: 'endpoints', namespaced: true },
      { resource: 'endpointslices.discovery.k8s.io', namespaced: true },
      { resource: 'configmaps', namespaced: true },
      { resource: 'secrets', namespaced: true },
      { resource: 'serviceaccounts', namespaced: true },
      { resource: 'events', namespaced: true },
      { resource: 'leases.coordination.k8s.io', namespaced: true },
      { resource: 'deployments.apps', namespaced: true },
      { resource: 'replicasets.apps', namespaced: true },
      { resource: 'daemonsets.apps', namespaced: true },
      { resource: 'statefulsets.apps', namespaced: true },
      { resource: 'replicationcontrollers', namespaced: true },
      { resource: 'jobs.batch', namespaced: true },
      { resource: 'cronjobs.batch', namespaced: true },
    ],
    nodes: nodeNames,
    async cleanup() {
      clearInterval(heartbeat);
      await send('DELETE', `${env.server}${leasePath}`, agent, token);
      for (const path of finalized) {
        await send('PATCH', `${env.server}${path}`, agent, token, { metadata: { finalizers: null } }, 'application/merge-patch+json');
      }
      for (const n of nodeNames) await send('DELETE', `${env.server}/api/v1/nodes/${n}`, agent, token);
    },
  };
}

/** A CRD whose printer columns read every type and JSONPath form, one without any, and their objects. */
export async function createCustomStates(env: TestEnv, agent: Dispatcher, ns: string, group: string): Promise<States> {
  const token = env.tokens.admin;
  const column = (name: string, type: string, jsonPath: string, extra: Json = {}): Json => ({ name, type, jsonPath, ...extra });
  const crd = (plural: string, kind: string, columns: Json[] | undefined): Json => ({
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${group}` },
    spec: {
      group,
      scope: 'Namespaced',
      names: { plural, singular: kind.toLowerCase(), kind, listKind: `${kind}List` },
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
          ...(columns ? { additionalPrinterColumns: columns } : {}),
        },
      ],
    },
  });
  const columns = [
    column('Replicas', 'integer', '.spec.replicas'),
    column('Ratio', 'number', '.spec.ratio'),
    column('Enabled', 'boolean', '.spec.enabled'),
    column('Mode', 'string', '.spec.mode', { priority: 1, description: 'How it <runs> & why' }),
    column('Config', 'string', '.spec.config'),
    column('Second', 'string', '.spec.list[1]'),
    column('Last', 'string', '.spec.list[-1]'),
    column('Slice', 'string', '.spec.list[0:2]'),
    column('Ready', 'string', '.status.conditions[?(@.type=="Ready")].status'),
    column('Heavy', 'string', '.spec.items[?(@.weight>2)].name'),
    column('Mismatch', 'string', ".spec.items[?(@.weight==2.5)].name"),
    column('Named', 'string', '.spec.items[*].name', { format: 'password' }),
    column('Union', 'string', ".spec['mode','ratio']"),
    column('Missing', 'string', '.spec.missing'),
    column('Nothing', 'string', '.spec.nothing'),
    column('Count', 'integer', '.spec.ratio'),
    column('Float', 'number', '.spec.replicas'),
    column('Seen', 'date', '.status.lastSeen'),
    column('Age', 'date', '.metadata.creationTimestamp'),
  ];
  const created: string[] = [];
  for (const [plural, kind, cols] of [['gadgets', 'Gadget', columns], ['plainthings', 'PlainThing', undefined]] as const) {
    const r = await send('POST', `${env.server}/apis/apiextensions.k8s.io/v1/customresourcedefinitions`, agent, token, crd(plural, kind, cols));
    assert.equal(r.status, 201, r.body);
    created.push(`${plural}.${group}`);
  }
  for (const name of created) {
    for (let i = 0; ; i++) {
      const r = JSON.parse((await get(`${env.server}/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`, agent, token)).body) as { status?: { conditions?: Array<{ type: string; status: string }> } };
      if (r.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) break;
      assert.ok(i < 100, `${name} established`);
      await new Promise((res) => setTimeout(res, 100));
    }
  }
  // Discovery of the new group takes a moment to reach the apiserver's handlers.
  const base = `/apis/${group}/v1/namespaces/${ns}`;
  const post = async (p: string, body: string | Json): Promise<void> => {
    for (let i = 0; ; i++) {
      const r = await send('POST', `${env.server}${p}`, agent, token, body);
      if (r.status === 201) return;
      assert.ok(r.status === 404 && i < 100, `POST ${p}: ${r.status} ${r.body}`);
      await new Promise((res) => setTimeout(res, 100));
    }
  };
  const gadget = (name: string, spec: string, status: string, metadata: Json = {}): string =>
    `{"apiVersion":"${group}/v1","kind":"Gadget","metadata":${JSON.stringify({ name, ...metadata })},"spec":${spec},"status":${status}}`;
  // The owner 'odd' names exists: the garbage collector of a cluster with its control plane deletes
  // an object whose owner does not.
  const owner = await send('POST', `${env.server}/api/v1/namespaces/${ns}/configmaps`, agent, token, { metadata: { name: 'owner' } });
  assert.equal(owner.status, 201, owner.body);
  const ownerUid = (JSON.parse(owner.body) as { metadata: { uid: string } }).metadata.uid;
  // Written as text: numbers keep the form given (1e21, 3.0, digits beyond 2^53).
  await post(
    `${base}/gadgets`,
    gadget(
      'full',
      '{"replicas":3,"ratio":0.25,"enabled":true,"mode":"fast <&> furious","config":{"b":[1,2.5,null],"a":{"z":"<"}},"list":["x","y","z"],"items":[{"name":"a","weight":1},{"name":"b","weight":3},{"name":"c","weight":5}],"nothing":null}',
      `{"conditions":[{"type":"Synced","status":"False"},{"type":"Ready","status":"True"}],"lastSeen":"${ago(3 * H + 20 * M)}"}`,
      { labels: { tier: 'gold', app: 'g' }, annotations: { 'note/x': 'a<b', another: '1' }, finalizers: ['example.com/hold'], generateName: 'ful-' },
    ),
  );
  await post(
    `${base}/gadgets`,
    gadget('odd', '{"replicas":1e21,"ratio":1000000,"enabled":"yes","mode":12.5,"config":3.0,"list":[true],"items":[{"name":"p","weight":1},{"name":"q","weight":2.5}]}', '{"lastSeen":"not a time"}', {
      ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'owner', uid: ownerUid, controller: true, blockOwnerDeletion: false }],
    }),
  );
  await post(`${base}/gadgets`, gadget('big', '{"replicas":-3.7,"ratio":123456789012345678,"enabled":false,"mode":true,"config":[],"list":[],"items":[]}', '{"lastSeen":"","conditions":[]}'));
  await post(`${base}/gadgets`, gadget('tiny', '{"replicas":9223372036854775807,"ratio":1e-7,"mode":0.00001,"config":"text","list":["only"],"items":[{"name":"r","weight":2.5}]}', '{"lastSeen":"null"}'));
  await post(`${base}/gadgets`, gadget('bare', '{}', '{}'));
  await post(`${base}/plainthings`, { apiVersion: `${group}/v1`, kind: 'PlainThing', metadata: { name: 'thing', labels: { a: 'b' } }, spec: {} });
  return {
    resources: created.map((resource) => ({ resource, namespaced: true })),
    nodes: [],
    async cleanup() {
      await send('PATCH', `${env.server}${base}/gadgets/full`, agent, token, { metadata: { finalizers: null } }, 'application/merge-patch+json');
      for (const name of created) await send('DELETE', `${env.server}/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`, agent, token);
    },
  };
}
