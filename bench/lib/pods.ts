// A generated cluster for the LIST benchmark: Nodes and realistic Pods, written through the real
// apiserver the way the control plane would write them.
//
// Pods are what makes LIST expensive in real clusters, and their size is mostly what controllers
// and the kubelet add: labels and annotations, owner references, two containers with env, ports,
// probes, resources and mounts, a projected service-account volume, default tolerations,
// managedFields for two managers, and a status with conditions, IPs and container statuses. So
// each pod is created as a ReplicaSet controller would (POST, fieldManager kube-controller-manager,
// spec.nodeName already set since no scheduler runs) and then given its status through pods/status
// as the kubelet would (create drops status). Nodes get the same treatment through nodes/status.
//
// The layout is a pure function of the size (seeded random numbers), so a later run knows every
// pod's name, node and app without listing them. A ConfigMap marks a completed cluster of a given
// size; a run that finds it reuses the cluster (generating 50,000 pods takes minutes). Only one
// generated cluster is kept: the benchmark's full LIST must see exactly one, so generated pods and
// nodes of another size are deleted first.
import { createHash } from 'node:crypto';
import type { Dispatcher } from 'undici';
import { call, must, pool, scannedGet } from './client.ts';
import { EtcdGuard } from './etcd.ts';
import { seededRandom } from '../../test/support/random.ts';

/** Bump when the shape of generated objects changes, so an old cluster is not reused as a new one. */
const LAYOUT_VERSION = 'v2';

export const CLUSTER_LABEL = 'bench.levee.dev/cluster';
const NAMESPACE_LABEL = 'bench.levee.dev/generated';
const MARKER_NAMESPACE = 'levee-bench';

export interface ClusterSize {
  pods: number;
  nodes: number;
  namespaces: number;
  apps: number;
}

export interface App {
  name: string;
  namespace: string;
  team: string;
  tier: string;
  hash: string;
  pods: number;
}

export interface PodRef {
  name: string;
  namespace: string;
  app: number;
  node: number;
  /** Index among the pods of its node, for its IP. */
  slot: number;
}

export interface Layout {
  id: string;
  size: ClusterSize;
  namespaces: string[];
  nodes: string[];
  podsPerNode: number[];
  apps: App[];
  pods: PodRef[];
}

const TEAMS = ['payments', 'search', 'checkout', 'identity', 'platform', 'data', 'ml', 'growth', 'media', 'ops'];
const NOUNS = [
  'cart', 'catalog', 'billing', 'invoice', 'ledger', 'auth', 'session', 'profile', 'feed', 'ranker',
  'indexer', 'crawler', 'gateway', 'router', 'notifier', 'mailer', 'scheduler', 'reporter', 'ingest', 'export',
  'pricing', 'inventory', 'shipping', 'review', 'rating', 'coupon', 'wallet', 'fraud', 'audit', 'tracker',
  'thumbnail', 'transcode', 'upload', 'storage', 'metrics', 'alerts', 'config', 'flags', 'geo', 'translate',
];
const ROLES: [string, string][] = [
  ['api', 'backend'],
  ['web', 'frontend'],
  ['worker', 'worker'],
  ['cache', 'cache'],
  ['consumer', 'worker'],
  ['db-proxy', 'data'],
];
const ZONES = ['a', 'b', 'c'];
const SIDECAR_IMAGE = 'public.ecr.aws/aws-observability/aws-for-fluent-bit:2.32.2';
const ALNUM = 'bcdfghjklmnpqrstvwxz2456789'; // the alphabet of generated Kubernetes name suffixes

/** A small seeded generator, so a layout is the same on every run. */
export const random = seededRandom;

const sha = (s: string): string => createHash('sha256').update(s).digest('hex');
const suffix = (hex: string, n: number): string =>
  Array.from({ length: n }, (_, i) => ALNUM[parseInt(hex.slice(i * 2, i * 2 + 2), 16) % ALNUM.length]).join('');
const uuid = (hex: string): string => `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-a${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
const pad = (n: number, w = 4): string => String(n).padStart(w, '0');

export function clusterId(size: ClusterSize): string {
  return `${LAYOUT_VERSION}-p${size.pods}-n${size.nodes}-ns${size.namespaces}-a${size.apps}`;
}

export function layout(size: ClusterSize): Layout {
  const id = clusterId(size);
  const rand = random(parseInt(sha(id).slice(0, 8), 16));
  const namespaces = Array.from({ length: size.namespaces }, (_, i) => `bench-${TEAMS[i % TEAMS.length]}-${pad(i, 2)}`);
  const nodes = Array.from({ length: size.nodes }, (_, i) => `bench-node-${ZONES[i % ZONES.length]}-${pad(i)}`);
  const apps: App[] = Array.from({ length: size.apps }, (_, j) => {
    const [role, tier] = ROLES[Math.floor(j / NOUNS.length) % ROLES.length]!;
    const round = Math.floor(j / (NOUNS.length * ROLES.length));
    const name = `${NOUNS[j % NOUNS.length]}-${role}${round ? `-${round}` : ''}`;
    const namespace = namespaces[j % namespaces.length]!;
    return { name, namespace, team: namespace.split('-')[1]!, tier, hash: suffix(sha(`${id}/${name}`), 10), pods: 0 };
  });
  const podsPerNode = new Array<number>(size.nodes).fill(0);
  const pods: PodRef[] = [];
  for (let i = 0; i < size.pods; i++) {
    const appIndex = i % apps.length;
    const app = apps[appIndex]!;
    app.pods++;
    const node = Math.floor(rand() * size.nodes);
    const slot = podsPerNode[node]!++;
    pods.push({ name: `${app.name}-${app.hash}-${suffix(sha(`${id}/${i}`), 5)}`, namespace: app.namespace, app: appIndex, node, slot });
  }
  return { id, size, namespaces, nodes, podsPerNode, apps, pods };
}

// ---------------------------------------------------------------- objects

const nodeOctets = (n: number): [number, number] => [64 + (n >> 8), n & 255];
const hostIP = (n: number): string => `172.16.${(n >> 8) & 255}.${n & 255}`;
const podIP = (n: number, slot: number): string => {
  const [a, b] = nodeOctets(n);
  return `10.${a}.${b}.${2 + (slot % 250)}`;
};

function nodeObject(l: Layout, n: number): object {
  const name = l.nodes[n]!;
  const zone = `eu-west-1${ZONES[n % ZONES.length]}`;
  const [a, b] = nodeOctets(n);
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name,
      labels: {
        [CLUSTER_LABEL]: l.id,
        'kubernetes.io/hostname': name,
        'kubernetes.io/os': 'linux',
        'kubernetes.io/arch': 'amd64',
        'beta.kubernetes.io/os': 'linux',
        'beta.kubernetes.io/arch': 'amd64',
        'node.kubernetes.io/instance-type': n % 4 === 0 ? 'm6i.4xlarge' : 'm6i.2xlarge',
        'topology.kubernetes.io/region': 'eu-west-1',
        'topology.kubernetes.io/zone': zone,
        'node-role.kubernetes.io/worker': '',
        'node.kubernetes.io/pool': n % 4 === 0 ? 'large' : 'general',
      },
      annotations: {
        'node.alpha.kubernetes.io/ttl': '0',
        'volumes.kubernetes.io/controller-managed-attach-detach': 'true',
        'csi.volume.kubernetes.io/nodeid': JSON.stringify({ 'ebs.csi.aws.com': `i-0${sha(name).slice(0, 16)}` }),
      },
    },
    spec: {
      podCIDR: `10.${a}.${b}.0/24`,
      podCIDRs: [`10.${a}.${b}.0/24`],
      providerID: `aws:///${zone}/i-0${sha(name).slice(0, 16)}`,
    },
  };
}

function nodeStatus(l: Layout, n: number, now: string): object {
  const name = l.nodes[n]!;
  const large = n % 4 === 0;
  const h = sha(`node/${name}`);
  const condition = (type: string, status: string, reason: string, message: string): object => ({
    type,
    status,
    lastHeartbeatTime: now,
    lastTransitionTime: now,
    reason,
    message,
  });
  const images = [
    'registry.k8s.io/kube-proxy:v1.37.1',
    'quay.io/prometheus/node-exporter:v1.8.2',
    SIDECAR_IMAGE,
    'registry.k8s.io/pause:3.10',
    'quay.io/cilium/cilium:v1.16.3',
    ...TEAMS.slice(0, 6).map((t) => `registry.example.com/${t}/service:v1.${n % 20}.3`),
  ].map((img, i) => ({ names: [`${img.split(':')[0]}@sha256:${sha(img)}`, img], sizeBytes: 10_000_000 + i * 7_345_123 }));
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name },
    status: {
      capacity: { cpu: large ? '16' : '8', memory: large ? '65021048Ki' : '32509700Ki', pods: '110', 'ephemeral-storage': '104845292Ki', 'hugepages-2Mi': '0' },
      allocatable: { cpu: large ? '15890m' : '7910m', memory: large ? '63512824Ki' : '31001476Ki', pods: '110', 'ephemeral-storage': '95551679124', 'hugepages-2Mi': '0' },
      conditions: [
        condition('MemoryPressure', 'False', 'KubeletHasSufficientMemory', 'kubelet has sufficient memory available'),
        condition('DiskPressure', 'False', 'KubeletHasNoDiskPressure', 'kubelet has no disk pressure'),
        condition('PIDPressure', 'False', 'KubeletHasSufficientPID', 'kubelet has sufficient PID available'),
        condition('Ready', 'True', 'KubeletReady', 'kubelet is posting ready status'),
      ],
      addresses: [
        { type: 'InternalIP', address: hostIP(n) },
        { type: 'InternalDNS', address: `ip-172-16-${n >> 8}-${n & 255}.eu-west-1.compute.internal` },
        { type: 'Hostname', address: name },
      ],
      daemonEndpoints: { kubeletEndpoint: { Port: 10250 } },
      nodeInfo: {
        machineID: h.slice(0, 32),
        systemUUID: uuid(h.slice(32)),
        bootID: uuid(sha(`boot/${name}`)),
        kernelVersion: '6.1.112-124.190.amzn2023.x86_64',
        osImage: 'Amazon Linux 2023.6.20241031',
        containerRuntimeVersion: 'containerd://1.7.23',
        kubeletVersion: 'v1.37.1',
        operatingSystem: 'linux',
        architecture: 'amd64',
      },
      images,
    },
  };
}

function podObject(l: Layout, i: number): object {
  const p = l.pods[i]!;
  const app = l.apps[p.app]!;
  const version = `v1.${p.app % 17}.${p.app % 5}`;
  const image = `registry.example.com/${app.team}/${app.name}:${version}`;
  const saVolume = `kube-api-access-${suffix(sha(`sa/${p.name}`), 5)}`;
  const appPort = 8080;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: p.name,
      generateName: `${app.name}-${app.hash}-`,
      namespace: p.namespace,
      labels: {
        [CLUSTER_LABEL]: l.id,
        app: app.name,
        'app.kubernetes.io/name': app.name,
        'app.kubernetes.io/version': version,
        tier: app.tier,
        team: app.team,
        environment: 'production',
        'pod-template-hash': app.hash,
      },
      annotations: {
        'kubectl.kubernetes.io/restartedAt': '2025-10-01T09:12:44Z',
        'prometheus.io/scrape': 'true',
        'prometheus.io/port': '9090',
        'checksum/config': sha(`config/${app.name}`),
      },
      ownerReferences: [
        { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: `${app.name}-${app.hash}`, uid: uuid(sha(`rs/${l.id}/${app.name}`)), controller: true, blockOwnerDeletion: true },
      ],
    },
    spec: {
      nodeName: l.nodes[p.node],
      serviceAccountName: app.name,
      securityContext: { runAsNonRoot: true, runAsUser: 10001, runAsGroup: 10001, fsGroup: 10001, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [
        {
          name: app.name,
          image,
          imagePullPolicy: 'IfNotPresent',
          args: ['--config=/etc/app/config.yaml', `--listen=:${appPort}`, '--metrics-listen=:9090', '--log-format=json'],
          ports: [
            { name: 'http', containerPort: appPort, protocol: 'TCP' },
            { name: 'metrics', containerPort: 9090, protocol: 'TCP' },
          ],
          env: [
            { name: 'POD_NAME', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } } },
            { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } } },
            { name: 'POD_IP', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'status.podIP' } } },
            { name: 'NODE_NAME', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'spec.nodeName' } } },
            { name: 'LOG_LEVEL', value: 'info' },
            { name: 'OTEL_EXPORTER_OTLP_ENDPOINT', value: 'http://otel-collector.observability.svc.cluster.local:4317' },
            { name: 'DATABASE_URL', valueFrom: { secretKeyRef: { name: `${app.name}-db`, key: 'url' } } },
          ],
          resources: { requests: { cpu: '250m', memory: '512Mi' }, limits: { cpu: '1', memory: '1Gi' } },
          livenessProbe: { httpGet: { path: '/healthz', port: appPort, scheme: 'HTTP' }, initialDelaySeconds: 10, periodSeconds: 10, timeoutSeconds: 2, successThreshold: 1, failureThreshold: 3 },
          readinessProbe: { httpGet: { path: '/readyz', port: appPort, scheme: 'HTTP' }, periodSeconds: 5, timeoutSeconds: 2, successThreshold: 1, failureThreshold: 3 },
          volumeMounts: [
            { name: 'config', mountPath: '/etc/app', readOnly: true },
            { name: 'tls', mountPath: '/etc/tls', readOnly: true },
            { name: 'tmp', mountPath: '/tmp' },
            { name: saVolume, mountPath: '/var/run/secrets/kubernetes.io/serviceaccount', readOnly: true },
          ],
          securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
          terminationMessagePath: '/dev/termination-log',
          terminationMessagePolicy: 'File',
        },
        {
          name: 'log-shipper',
          image: SIDECAR_IMAGE,
          imagePullPolicy: 'IfNotPresent',
          args: ['--config=/etc/fluent-bit/fluent-bit.conf'],
          ports: [{ name: 'http-metrics', containerPort: 2020, protocol: 'TCP' }],
          resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { memory: '128Mi' } },
          volumeMounts: [
            { name: 'shipper-config', mountPath: '/etc/fluent-bit', readOnly: true },
            { name: 'tmp', mountPath: '/var/log/app' },
          ],
          terminationMessagePath: '/dev/termination-log',
          terminationMessagePolicy: 'File',
        },
      ],
      volumes: [
        { name: 'config', configMap: { name: `${app.name}-config`, defaultMode: 420 } },
        { name: 'shipper-config', configMap: { name: 'log-shipper', defaultMode: 420 } },
        { name: 'tls', secret: { secretName: `${app.name}-tls`, defaultMode: 420 } },
        { name: 'tmp', emptyDir: { sizeLimit: '256Mi' } },
        {
          name: saVolume,
          projected: {
            defaultMode: 420,
            sources: [
              { serviceAccountToken: { expirationSeconds: 3607, path: 'token' } },
              { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
              { downwardAPI: { items: [{ path: 'namespace', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } }] } },
            ],
          },
        },
      ],
      tolerations: [
        { key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 },
        { key: 'node.kubernetes.io/unreachable', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 },
      ],
      terminationGracePeriodSeconds: 30,
      dnsPolicy: 'ClusterFirst',
      restartPolicy: 'Always',
    },
  };
}

function podStatus(l: Layout, i: number, now: string): object {
  const p = l.pods[i]!;
  const app = l.apps[p.app]!;
  const h = sha(`pod/${l.id}/${i}`);
  const ip = podIP(p.node, p.slot);
  const condition = (type: string): object => ({ type, status: 'True', lastProbeTime: null, lastTransitionTime: now });
  const container = (name: string, image: string, n: number): object => ({
    name,
    state: { running: { startedAt: now } },
    lastState: {},
    ready: true,
    restartCount: 0,
    image,
    imageID: `${image.split(':')[0]}@sha256:${sha(image)}`,
    containerID: `containerd://${sha(`${h}/${n}`)}`,
    started: true,
  });
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: p.name, namespace: p.namespace },
    status: {
      phase: 'Running',
      conditions: ['PodReadyToStartContainers', 'Initialized', 'Ready', 'ContainersReady', 'PodScheduled'].map(condition),
      hostIP: hostIP(p.node),
      hostIPs: [{ ip: hostIP(p.node) }],
      podIP: ip,
      podIPs: [{ ip }],
      startTime: now,
      containerStatuses: [
        container(app.name, `registry.example.com/${app.team}/${app.name}:v1.${p.app % 17}.${p.app % 5}`, 0),
        container('log-shipper', SIDECAR_IMAGE, 1),
      ],
    },
  };
}

// ---------------------------------------------------------------- writing

export interface GenerateOptions {
  server: string;
  dispatcher: Dispatcher;
  token: string;
  size: ClusterSize;
  concurrency: number;
  log: (line: string) => void;
  /** etcd's client URL: when given, writes pause while etcd is close to its quota. */
  etcd?: string;
}

export interface Generation {
  id: string;
  /** True when a complete cluster of this size was already there. */
  reused: boolean;
  /** Seconds spent writing (0 when reused). */
  seconds: number;
  /** Generated pods as the apiserver lists them: count and the sum of their JSON sizes. */
  podItems: number;
  podBytes: number;
  nodeItems: number;
  nodeBytes: number;
}

const STRATEGIC = 'application/strategic-merge-patch+json';

/** Makes sure the generated cluster of this size exists, and only it; returns its layout. */
export async function ensureCluster(o: GenerateOptions): Promise<{ layout: Layout; generation: Generation }> {
  const l = layout(o.size);
  const api = `${o.server}/api/v1`;
  const selector = encodeURIComponent(`${CLUSTER_LABEL}=${l.id}`);

  const marker = await call(o.dispatcher, o.token, 'GET', `${api}/namespaces/${MARKER_NAMESPACE}/configmaps/${l.id}`);
  if (marker.status === 200) {
    const data = (JSON.parse(marker.body) as { data?: Record<string, string> }).data ?? {};
    const counted = await measure(o, selector);
    if (counted.podItems === o.size.pods && counted.nodeItems === o.size.nodes) {
      o.log(`reusing generated cluster ${l.id} (generated ${data['generatedAt'] ?? '?'} in ${data['seconds'] ?? '?'} s)`);
      return { layout: l, generation: { id: l.id, reused: true, seconds: 0, ...counted } };
    }
    o.log(`marker for ${l.id} found but ${counted.podItems} pods / ${counted.nodeItems} nodes listed: completing it`);
  }

  const started = performance.now();
  await removeOthers(o, l);
  await must([201, 409], o.dispatcher, o.token, 'POST', `${api}/namespaces`, { metadata: { name: MARKER_NAMESPACE } });
  for (const ns of l.namespaces) {
    await must([201, 409], o.dispatcher, o.token, 'POST', `${api}/namespaces`, { metadata: { name: ns, labels: { [NAMESPACE_LABEL]: 'true', team: ns.split('-')[1]! } } });
  }

  // A create that meets 409 belongs to an earlier, interrupted run of the same size (names are
  // derived from the size); its status is written again, which is harmless and covers a run that
  // stopped between create and status.
  const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const guard = o.etcd ? new EtcdGuard(o.etcd, o.log) : null;
  try {
    await writeAll(o, 'nodes', l.nodes.length, async (n) => {
      await guard?.ready();
      await must([201, 409], o.dispatcher, o.token, 'POST', `${api}/nodes?fieldManager=kubelet`, nodeObject(l, n));
      await must([200], o.dispatcher, o.token, 'PATCH', `${api}/nodes/${l.nodes[n]}/status?fieldManager=kubelet`, nodeStatus(l, n, now), STRATEGIC);
    });
    await writeAll(o, 'pods', l.pods.length, async (i) => {
      const p = l.pods[i]!;
      await guard?.ready();
      await must([201, 409], o.dispatcher, o.token, 'POST', `${api}/namespaces/${p.namespace}/pods?fieldManager=kube-controller-manager`, podObject(l, i));
      await must([200], o.dispatcher, o.token, 'PATCH', `${api}/namespaces/${p.namespace}/pods/${p.name}/status?fieldManager=kubelet`, podStatus(l, i, now), STRATEGIC);
    });
  } finally {
    await guard?.stop();
  }
  const seconds = (performance.now() - started) / 1000;

  const counted = await measure(o, selector);
  if (counted.podItems !== o.size.pods || counted.nodeItems !== o.size.nodes) {
    throw new Error(`generated ${o.size.pods} pods and ${o.size.nodes} nodes but the apiserver lists ${counted.podItems} and ${counted.nodeItems}`);
  }
  const data = { pods: String(o.size.pods), nodes: String(o.size.nodes), podBytes: String(counted.podBytes), seconds: seconds.toFixed(1), generatedAt: new Date().toISOString() };
  await must([201, 409], o.dispatcher, o.token, 'POST', `${api}/namespaces/${MARKER_NAMESPACE}/configmaps`, {
    metadata: { name: l.id, labels: { [CLUSTER_LABEL]: l.id } },
    data,
  });
  o.log(`generated ${l.id} in ${seconds.toFixed(1)} s`);
  return { layout: l, generation: { id: l.id, reused: false, seconds, ...counted } };
}

/** Counts generated pods and nodes as the apiserver lists them, with the sum of their item sizes. */
async function measure(o: GenerateOptions, selector: string): Promise<Omit<Generation, 'id' | 'reused' | 'seconds'>> {
  const pods = await scannedGet(`${o.server}/api/v1/pods?labelSelector=${selector}`, o.dispatcher, o.token);
  const nodes = await scannedGet(`${o.server}/api/v1/nodes?labelSelector=${selector}`, o.dispatcher, o.token);
  if (pods.status !== 200 || nodes.status !== 200) throw new Error(`listing generated objects: HTTP ${pods.status} / ${nodes.status}`);
  return { podItems: pods.items, podBytes: pods.itemBytes, nodeItems: nodes.items, nodeBytes: nodes.itemBytes };
}

/**
 * Deletes generated pods and nodes of any other size, and their markers. Pods are deleted with a
 * grace period of 0: they are bound to nodes, and with no kubelet to confirm, a graceful delete
 * would leave them in place forever.
 */
async function removeOthers(o: GenerateOptions, l: Layout): Promise<void> {
  const api = `${o.server}/api/v1`;
  const others = encodeURIComponent(`${CLUSTER_LABEL},${CLUSTER_LABEL}!=${l.id}`);
  const probe = await scannedGet(`${api}/pods?labelSelector=${others}&limit=1`, o.dispatcher, o.token);
  const nodes = await scannedGet(`${api}/nodes?labelSelector=${others}&limit=1`, o.dispatcher, o.token);
  if (probe.items === 0 && nodes.items === 0) return;
  o.log('deleting the generated pods and nodes of another size');
  const nsList = await must([200], o.dispatcher, o.token, 'GET', `${api}/namespaces?labelSelector=${encodeURIComponent(NAMESPACE_LABEL)}`);
  const namespaces = (JSON.parse(nsList.body) as { items: { metadata: { name: string } }[] }).items.map((n) => n.metadata.name);
  const now = { apiVersion: 'v1', kind: 'DeleteOptions', gracePeriodSeconds: 0 };
  // One collection delete per namespace, in parallel: the apiserver deletes a collection's items
  // one by one, so splitting by namespace is what makes this fast.
  await pool(namespaces.length, 16, async (k) => {
    await must([200], o.dispatcher, o.token, 'DELETE', `${api}/namespaces/${namespaces[k]}/pods?labelSelector=${others}`, now);
  });
  await must([200], o.dispatcher, o.token, 'DELETE', `${api}/nodes?labelSelector=${others}`, now);
  await must([200, 404], o.dispatcher, o.token, 'DELETE', `${api}/namespaces/${MARKER_NAMESPACE}/configmaps?labelSelector=${others}`);
}

/** Removes the generated cluster of this size (pods, nodes, marker); namespaces stay. */
export async function removeCluster(o: GenerateOptions): Promise<void> {
  const l = layout(o.size);
  const api = `${o.server}/api/v1`;
  const mine = encodeURIComponent(`${CLUSTER_LABEL}=${l.id}`);
  const now = { apiVersion: 'v1', kind: 'DeleteOptions', gracePeriodSeconds: 0 };
  await pool(l.namespaces.length, 16, async (k) => {
    await must([200, 404], o.dispatcher, o.token, 'DELETE', `${api}/namespaces/${l.namespaces[k]}/pods?labelSelector=${mine}`, now);
  });
  await must([200], o.dispatcher, o.token, 'DELETE', `${api}/nodes?labelSelector=${mine}`, now);
  await must([200, 404], o.dispatcher, o.token, 'DELETE', `${api}/namespaces/${MARKER_NAMESPACE}/configmaps?labelSelector=${mine}`);
}

/** Runs n writes with bounded concurrency, printing progress every few seconds. */
async function writeAll(o: GenerateOptions, what: string, n: number, write: (i: number) => Promise<void>): Promise<void> {
  const started = performance.now();
  let done = 0;
  const report = (): void => {
    const s = (performance.now() - started) / 1000;
    o.log(`${what}: ${done}/${n} (${Math.round(done / s)}/s, ${s.toFixed(0)} s)`);
  };
  const timer = setInterval(report, 5000);
  try {
    await pool(n, o.concurrency, async (i) => {
      await write(i);
      done++;
    });
  } finally {
    clearInterval(timer);
  }
  report();
}
