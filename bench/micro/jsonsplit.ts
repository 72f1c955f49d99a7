// Throughput and memory of cutting a LIST body into items (src/reflector/jsonsplit.ts), against
// parsing the whole body with JSON.parse. A pod list of about 100 MB is generated into a temporary
// file once; each measurement then runs in a fresh node process that reads the file in 64 KiB
// chunks, the way a response arrives from the socket, so that its peak RSS is its own.
//
//   node bench/micro/jsonsplit.ts [--mb 100] [--runs 3]
//
// MB/s counts 10^6 bytes of body per second, reading included (the "read only" row is that floor).
// Peak RSS is the process's maximum resident set; "start" is its RSS before the first chunk.
import { spawnSync } from 'node:child_process';
import { closeSync, openSync, readSync, rmSync, writeSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ListBodySplitter } from '../../src/reflector/jsonsplit.ts';

const CHUNK = 64 * 1024;

const MODES = {
  read: 'read only (I/O floor)',
  split: 'splitter alone',
  'split+parse': 'splitter + JSON.parse per item',
  'split+keep': 'splitter, all item bytes kept',
  whole: 'whole-body JSON.parse',
} as const;
type Mode = keyof typeof MODES;

interface Result {
  mode: Mode;
  bytes: number;
  items: number;
  seconds: number;
  startRssMiB: number;
  peakRssMiB: number;
}

const { values } = parseArgs({
  options: {
    mb: { type: 'string', default: '100' },
    runs: { type: 'string', default: '3' },
    mode: { type: 'string' },
    file: { type: 'string' },
  },
});

// Reads the file in CHUNK-sized pieces, each a fresh buffer like a socket read.
function* chunks(file: string): Generator<Buffer> {
  const fd = openSync(file, 'r');
  try {
    for (;;) {
      const buf = Buffer.allocUnsafe(CHUNK);
      const n = readSync(fd, buf, 0, CHUNK, null);
      if (n === 0) return;
      yield n === CHUNK ? buf : buf.subarray(0, n);
    }
  } finally {
    closeSync(fd);
  }
}

function measure(mode: Mode, file: string): Result {
  const startRssMiB = process.memoryUsage.rss() / 2 ** 20;
  const t0 = process.hrtime.bigint();
  let bytes = 0;
  let items = 0;
  if (mode === 'read') {
    for (const c of chunks(file)) bytes += c.length;
  } else if (mode === 'whole') {
    const parts: Buffer[] = [];
    for (const c of chunks(file)) {
      parts.push(c);
      bytes += c.length;
    }
    const list = JSON.parse(Buffer.concat(parts).toString('utf8')) as { items: unknown[] };
    items = list.items.length;
  } else {
    const s = new ListBodySplitter();
    const kept: Buffer[] = [];
    for (const c of chunks(file)) {
      bytes += c.length;
      for (const it of s.push(c)) {
        items++;
        if (mode === 'split+parse') JSON.parse(it.toString('utf8'));
        else if (mode === 'split+keep') kept.push(it);
      }
    }
    s.end();
    if (mode === 'split+keep' && kept.length !== items) throw new Error('lost items');
  }
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  return { mode, bytes, items, seconds, startRssMiB, peakRssMiB: process.resourceUsage().maxRSS / 1024 };
}

// A pod roughly as the apiserver serves it, managedFields included (about 5 KB).
function pod(i: number): unknown {
  const name = `web-7d9f8c6b5-${i.toString(36).padStart(5, '0')}`;
  const uid = `${(0x10000000 + i).toString(16)}-3a4b-4c5d-8e9f-${(i * 7919).toString(16).padStart(12, '0')}`;
  const ip = `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
  const labels = { app: 'web', 'pod-template-hash': '7d9f8c6b5', tier: i % 3 === 0 ? 'frontend' : 'backend' };
  const container = {
    name: 'web',
    image: 'registry.example.com/team/web:v1.42.0',
    args: ['--listen=:8080', '--config=/etc/web/config.yaml', '--log-format=json'],
    ports: [{ name: 'http', containerPort: 8080, protocol: 'TCP' }],
    env: [
      { name: 'POD_NAME', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } } },
      { name: 'GREETING', value: 'Grüße aus 日本 — "hello" {world}' },
    ],
    resources: { limits: { cpu: '500m', memory: '256Mi' }, requests: { cpu: '100m', memory: '128Mi' } },
    volumeMounts: [{ name: 'config', mountPath: '/etc/web' }, { name: 'kube-api-access-x7k2p', readOnly: true, mountPath: '/var/run/secrets/kubernetes.io/serviceaccount' }],
    livenessProbe: { httpGet: { path: '/healthz', port: 8080, scheme: 'HTTP' }, timeoutSeconds: 1, periodSeconds: 10, successThreshold: 1, failureThreshold: 3 },
    terminationMessagePath: '/dev/termination-log',
    terminationMessagePolicy: 'File',
    imagePullPolicy: 'IfNotPresent',
  };
  const f = (keys: string[]) => Object.fromEntries(keys.map((k) => [`f:${k}`, {}]));
  return {
    metadata: {
      name,
      generateName: 'web-7d9f8c6b5-',
      namespace: `team-${i % 50}`,
      uid,
      resourceVersion: String(100000 + i),
      creationTimestamp: '2024-05-01T12:00:00Z',
      labels,
      annotations: { 'kubectl.kubernetes.io/restartedAt': '2024-05-01T11:59:00Z', 'example.com/config': '{"replicas":[1,2],"note":"a \\"quoted\\" value"}' },
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-7d9f8c6b5', uid: '5b0c3e2a-1111-4222-8333-944455566677', controller: true, blockOwnerDeletion: true }],
      managedFields: [
        {
          manager: 'kube-controller-manager',
          operation: 'Update',
          apiVersion: 'v1',
          time: '2024-05-01T12:00:00Z',
          fieldsType: 'FieldsV1',
          fieldsV1: {
            'f:metadata': { 'f:generateName': {}, 'f:labels': { '.': {}, ...f(['app', 'pod-template-hash', 'tier']) }, 'f:ownerReferences': { '.': {}, 'k:{"uid":"5b0c3e2a-1111-4222-8333-944455566677"}': {} } },
            'f:spec': { 'f:containers': { 'k:{"name":"web"}': { '.': {}, ...f(['args', 'env', 'image', 'imagePullPolicy', 'livenessProbe', 'name', 'ports', 'resources', 'volumeMounts']) } }, ...f(['dnsPolicy', 'enableServiceLinks', 'restartPolicy', 'schedulerName', 'securityContext', 'terminationGracePeriodSeconds', 'volumes']) },
          },
        },
        {
          manager: 'kubelet',
          operation: 'Update',
          apiVersion: 'v1',
          time: '2024-05-01T12:00:07Z',
          fieldsType: 'FieldsV1',
          fieldsV1: { 'f:status': { 'f:conditions': { 'k:{"type":"ContainersReady"}': f(['lastProbeTime', 'lastTransitionTime', 'status', 'type']), 'k:{"type":"Initialized"}': f(['lastProbeTime', 'lastTransitionTime', 'status', 'type']), 'k:{"type":"Ready"}': f(['lastProbeTime', 'lastTransitionTime', 'status', 'type']) }, ...f(['containerStatuses', 'hostIP', 'phase', 'podIP', 'podIPs', 'startTime']) } },
          subresource: 'status',
        },
      ],
    },
    spec: {
      volumes: [
        { name: 'config', configMap: { name: 'web-config', defaultMode: 420 } },
        { name: 'kube-api-access-x7k2p', projected: { sources: [{ serviceAccountToken: { expirationSeconds: 3607, path: 'token' } }, { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } }], defaultMode: 420 } },
      ],
      containers: [container],
      restartPolicy: 'Always',
      terminationGracePeriodSeconds: 30,
      dnsPolicy: 'ClusterFirst',
      serviceAccountName: 'default',
      nodeName: `node-${i % 500}`,
      securityContext: {},
      schedulerName: 'default-scheduler',
      tolerations: [
        { key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 },
        { key: 'node.kubernetes.io/unreachable', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 },
      ],
      priority: 0,
      enableServiceLinks: true,
      preemptionPolicy: 'PreemptLowerPriority',
    },
    status: {
      phase: 'Running',
      conditions: ['Initialized', 'Ready', 'ContainersReady', 'PodScheduled'].map((type) => ({ type, status: 'True', lastProbeTime: null, lastTransitionTime: '2024-05-01T12:00:07Z' })),
      hostIP: `192.168.${(i >> 8) & 255}.${i & 255}`,
      podIP: ip,
      podIPs: [{ ip }],
      startTime: '2024-05-01T12:00:00Z',
      containerStatuses: [{ name: 'web', state: { running: { startedAt: '2024-05-01T12:00:06Z' } }, lastState: {}, ready: true, restartCount: 0, image: container.image, imageID: `registry.example.com/team/web@sha256:${'0123456789abcdef'.repeat(4)}`, containerID: `containerd://${'fedcba9876543210'.repeat(4)}`, started: true }],
      qosClass: 'Burstable',
    },
  };
}

// Writes the list in pieces so that generating it never holds the whole body as one string.
function generate(file: string, targetBytes: number): { bytes: number; items: number } {
  const fd = openSync(file, 'w');
  let bytes = 0;
  let items = 0;
  const write = (s: string) => {
    bytes += writeSync(fd, s);
  };
  try {
    write('{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"987654","continue":"eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ","remainingItemCount":12},"items":[');
    let batch: string[] = [];
    let written = 0;
    const flush = () => {
      write((written > 0 ? ',' : '') + batch.join(','));
      written += batch.length;
      batch = [];
    };
    while (bytes + batch.length * 5000 < targetBytes) {
      batch.push(JSON.stringify(pod(items++)));
      if (batch.length === 1000) flush();
    }
    if (batch.length > 0) flush();
    write(']}');
  } finally {
    closeSync(fd);
  }
  return { bytes, items };
}

if (values.mode !== undefined) {
  // A child: one measurement, one JSON line on stdout.
  if (!(values.mode in MODES) || values.file === undefined) throw new Error(`bad child arguments: ${values.mode} ${values.file}`);
  process.stdout.write(JSON.stringify(measure(values.mode as Mode, values.file)) + '\n');
} else {
  const mb = Number(values.mb);
  const runs = Number(values.runs);
  const file = join(tmpdir(), `levee-jsonsplit-bench-${process.pid}.json`);
  try {
    const g = generate(file, mb * 1e6);
    console.log(`pod list: ${(g.bytes / 1e6).toFixed(1)} MB, ${g.items} pods (${Math.round(g.bytes / g.items)} bytes each), ${CHUNK / 1024} KiB chunks`);
    console.log(`node ${process.version}, ${cpus()[0]?.model ?? 'unknown cpu'}; median of ${runs} runs, each in a fresh process\n`);
    const rows: string[] = ['| mode | MB/s | seconds | peak RSS MiB | start RSS MiB |', '|---|---:|---:|---:|---:|'];
    for (const mode of Object.keys(MODES) as Mode[]) {
      const results: Result[] = [];
      for (let r = 0; r < runs; r++) {
        const child = spawnSync(process.execPath, [import.meta.filename, '--mode', mode, '--file', file], { encoding: 'utf8', maxBuffer: 1 << 20 });
        if (child.status !== 0) throw new Error(`${mode}: exit ${child.status}: ${child.stderr}`);
        const res = JSON.parse(child.stdout) as Result;
        if (res.bytes !== g.bytes || (mode !== 'read' && res.items !== g.items)) throw new Error(`${mode}: saw ${res.bytes} bytes, ${res.items} items`);
        results.push(res);
      }
      const median = (f: (r: Result) => number) => results.map(f).sort((a, b) => a - b)[Math.floor(results.length / 2)]!;
      const seconds = median((r) => r.seconds);
      rows.push(`| ${MODES[mode]} | ${(g.bytes / 1e6 / seconds).toFixed(0)} | ${seconds.toFixed(3)} | ${median((r) => r.peakRssMiB).toFixed(0)} | ${median((r) => r.startRssMiB).toFixed(0)} |`);
    }
    console.log(rows.join('\n'));
  } finally {
    rmSync(file, { force: true });
  }
}
