// The shipped manifests and image start Levee with flags it accepts, and with the promised
// hardening: non-root, read-only root filesystem, probes on /livez and /readyz, and time for the
// graceful shutdown before the kubelet kills the pod.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { parseOptions, type Options } from '../../src/config/options.ts';
import { NODE_FLAGS } from '../../src/nodeflags.ts';

const ROOT = resolve(import.meta.dirname, '../..');

interface Container {
  name: string;
  image: string;
  args?: string[];
  env?: { name: string; valueFrom?: { fieldRef?: { fieldPath: string } } }[];
  readinessProbe?: Probe;
  livenessProbe?: Probe;
  startupProbe?: Probe;
  securityContext?: { readOnlyRootFilesystem?: boolean; allowPrivilegeEscalation?: boolean; capabilities?: { drop?: string[] } };
  restartPolicy?: string;
}
interface Probe {
  httpGet?: { path: string };
  exec?: { command: string[] };
}
interface PodSpec {
  terminationGracePeriodSeconds?: number;
  securityContext?: { runAsNonRoot?: boolean; runAsUser?: number };
  containers: Container[];
  initContainers?: Container[];
}

function workloads(file: string): { kind: string; name: string; pod: PodSpec }[] {
  const docs = parseAllDocuments(readFileSync(resolve(ROOT, 'deploy', file), 'utf8')).map((d) => d.toJS() as { kind: string; metadata: { name: string }; spec?: { template?: { spec: PodSpec } } });
  return docs.filter((d) => d.spec?.template).map((d) => ({ kind: d.kind, name: d.metadata.name, pod: d.spec!.template!.spec }));
}

function levee(pod: PodSpec): Container {
  const c = [...pod.containers, ...(pod.initContainers ?? [])].find((x) => x.image.includes('/levee:'));
  assert.ok(c, 'no Levee container');
  return c;
}

/** Kubernetes expands $(VAR) in args from the container's environment. */
function options(c: Container): Options {
  const args = (c.args ?? []).map((a) => a.replace(/\$\((\w+)\)/g, (_, name: string) => {
    assert.ok(c.env?.some((e) => e.name === name), `$(${name}) is not in the container's env`);
    return 'node-1';
  }));
  const o = parseOptions(args);
  assert.notEqual(o, 'help');
  return o as Options;
}

function hardened(pod: PodSpec, c: Container): void {
  assert.equal(pod.securityContext?.runAsNonRoot, true);
  assert.ok((pod.securityContext?.runAsUser ?? 0) > 0);
  assert.equal(c.securityContext?.readOnlyRootFilesystem, true);
  assert.equal(c.securityContext?.allowPrivilegeEscalation, false);
  assert.deepEqual(c.securityContext?.capabilities?.drop, ['ALL']);
}

function probePath(p: Probe | undefined): string | undefined {
  return p?.httpGet?.path ?? /127\.0\.0\.1:\d+(\/\w+)/.exec(p?.exec?.command.join(' ') ?? '')?.[1];
}

test('the central gateway: TLS on all addresses, probes, hardening, time to drain', () => {
  const [deployment] = workloads('gateway.yaml');
  assert.equal(deployment!.kind, 'Deployment');
  const c = levee(deployment!.pod);
  const o = options(c);
  assert.equal(o.listen, '0.0.0.0:8443');
  assert.ok(o.tlsCertFile && o.tlsKeyFile);
  assert.equal(o.auth, 'delegate');
  assert.equal(probePath(c.readinessProbe), '/readyz');
  assert.equal(probePath(c.livenessProbe), '/livez');
  hardened(deployment!.pod, c);
  assert.ok((deployment!.pod.terminationGracePeriodSeconds ?? 30) * 1000 > o.shutdownDelayMs + o.shutdownGraceMs);
});

test('the sidecar: only its node\'s pods, trusted loopback, NODE_NAME from the downward API', () => {
  const [daemonset] = workloads('sidecar-daemonset.yaml');
  assert.equal(daemonset!.kind, 'DaemonSet');
  const c = levee(daemonset!.pod);
  assert.equal(c.restartPolicy, 'Always');
  assert.equal(c.env?.find((e) => e.name === 'NODE_NAME')?.valueFrom?.fieldRef?.fieldPath, 'spec.nodeName');
  const o = options(c);
  assert.equal(o.listen, '127.0.0.1:8080');
  assert.equal(o.auth, 'trust-loopback');
  assert.deepEqual(o.cache, ['pods']);
  assert.deepEqual(o.resourceOptions, { pods: { fieldSelector: 'spec.nodeName=node-1' } });
  assert.equal(probePath(c.startupProbe), '/readyz');
  assert.equal(probePath(c.livenessProbe), '/livez');
  hardened(daemonset!.pod, c);
  assert.ok((daemonset!.pod.terminationGracePeriodSeconds ?? 30) * 1000 > o.shutdownDelayMs + o.shutdownGraceMs);
});

test('the sidecar\'s role: list and watch what it caches, reviews, and never impersonate', () => {
  interface Rule { apiGroups?: string[]; resources?: string[]; verbs: string[] }
  const docs = parseAllDocuments(readFileSync(resolve(ROOT, 'deploy/sidecar-rbac.yaml'), 'utf8')).map((d) => d.toJS() as { kind: string; metadata: { name: string }; rules?: Rule[]; roleRef?: { name: string }; subjects?: { name: string }[] });
  const role = docs.find((d) => d.kind === 'ClusterRole');
  assert.ok(role?.rules);
  const verbs = role.rules.flatMap((r) => r.verbs);
  assert.ok(!verbs.includes('impersonate') && !verbs.includes('*') && !verbs.some((v) => v.startsWith('impersonate')), verbs.join(','));
  const [daemonset] = workloads('sidecar-daemonset.yaml');
  const grants = (resource: string, verb: string): boolean => role.rules!.some((r) => r.resources?.includes(resource) && r.verbs.includes(verb));
  for (const resource of options(levee(daemonset!.pod)).cache) {
    for (const verb of ['list', 'watch']) assert.ok(grants(resource, verb), `${verb} ${resource}`);
  }
  assert.ok(grants('tokenreviews', 'create') && grants('subjectaccessreviews', 'create'));
  const binding = docs.find((d) => d.kind === 'ClusterRoleBinding');
  assert.equal(binding?.roleRef?.name, role.metadata.name);
  assert.equal(binding?.subjects?.[0]?.name, (daemonset!.pod as { serviceAccountName?: string }).serviceAccountName);
});

test('the image: a numeric non-root user, a health check, flags Levee accepts', () => {
  const dockerfile = readFileSync(resolve(ROOT, 'Dockerfile'), 'utf8');
  const runtime = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
  assert.match(runtime, /^FROM node:24-/m);
  const user = /^USER (\S+)$/m.exec(runtime)?.[1];
  assert.match(user ?? '', /^[1-9]\d*(:\d+)?$/);
  assert.match(runtime, /^HEALTHCHECK /m);
  const cmd = JSON.parse(/^CMD (\[.*\])$/m.exec(runtime)![1]!) as string[];
  const o = parseOptions(cmd);
  assert.notEqual(o, 'help');
});

test('the image and the levee command start Node with the flags the tests and benchmarks use', () => {
  const dockerfile = readFileSync(resolve(ROOT, 'Dockerfile'), 'utf8');
  const entrypoint = JSON.parse(/^ENTRYPOINT (\[.*\])$/m.exec(dockerfile)![1]!) as string[];
  assert.deepEqual(entrypoint, ['node', ...NODE_FLAGS, 'dist/cli.js']);
  const shebang = readFileSync(resolve(ROOT, 'src/cli.ts'), 'utf8').split('\n', 1)[0]!;
  assert.equal(shebang, `#!/usr/bin/env -S node ${NODE_FLAGS.join(' ')}`);
});
