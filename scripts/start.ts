// `npm start`: Levee's main job on any machine. With a cluster given (--kubeconfig, $KUBECONFIG,
// in a pod, or ~/.kube/config) it runs Levee in front of it. With none, it starts the local real
// cluster of the test environment, seeds a few objects, puts Levee in front of it and prints how
// to point kubectl at Levee.
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { NODE_FLAGS } from '../src/nodeflags.ts';
import { resolveUpstreamSource } from '../src/upstream/credentials.ts';
import { up } from '../test/env/testenv.ts';
import { kubectl } from '../test/support/kubectl.ts';
import { agentFor } from '../test/support/http.ts';
import { namespaceReady } from '../test/support/cluster.ts';

const root = resolve(import.meta.dirname, '..');
const cli = resolve(root, 'src/cli.ts');
const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = args.findIndex((a) => a === name || a.startsWith(`${name}=`));
  if (i === -1) return undefined;
  return args[i]!.includes('=') ? args[i]!.split('=').slice(1).join('=') : args[i + 1];
};

function runLevee(argv: string[]): void {
  const child = spawn(process.execPath, [...NODE_FLAGS, cli, ...argv], { stdio: 'inherit' });
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => child.kill(sig));
  child.on('exit', (code) => process.exit(code ?? 0));
}

// Pods without a node: the scheduler places them on the simulated nodes, where they run (a bare
// environment leaves them Pending).
const DEMO_OBJECTS = (ns: string) =>
  JSON.stringify({
    apiVersion: 'v1',
    kind: 'List',
    items: [
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'settings', namespace: ns, labels: { app: 'web' } }, data: { greeting: 'hello' } },
      ...[1, 2, 3, 4].map((i) => ({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: `web-${i}`, namespace: ns, labels: { app: 'web', tier: 'front' } },
        spec: { containers: [{ name: 'web', image: 'registry.example/web:1' }] },
      })),
      { apiVersion: 'v1', kind: 'Service', metadata: { name: 'web', namespace: ns }, spec: { selector: { app: 'web' }, ports: [{ port: 80 }] } },
    ],
  });

if (args.includes('-h') || args.includes('--help')) {
  runLevee(['--help']);
} else if (resolveUpstreamSource(flag('--kubeconfig'))) {
  runLevee(args);
} else {
  console.log('No cluster given: starting the local test cluster, a real control plane with simulated nodes (the first run builds it, which takes minutes).');
  const env = await up();
  const created = await kubectl(env.kubectl, env.kubeconfig, ['create', 'namespace', 'demo']);
  if (created.code !== 0 && !created.stderr.includes('AlreadyExists')) throw new Error(`creating namespace demo failed: ${created.stderr}`);
  // Pods are admitted once the controllers have given the namespace its ServiceAccount.
  const agent = agentFor(env.caFile);
  await namespaceReady(env, agent, 'demo').finally(() => agent.close());
  const seeded = await kubectl(env.kubectl, env.kubeconfig, ['apply', '-f', '-'], DEMO_OBJECTS('demo'));
  if (seeded.code !== 0) throw new Error(`seeding demo objects failed: ${seeded.stderr}`);
  const listen = flag('--listen') ?? '127.0.0.1:8443';
  const port = listen.slice(listen.lastIndexOf(':') + 1);
  const leveeKubeconfig = resolve(root, '.testenv/levee.kubeconfig');
  writeFileSync(
    leveeKubeconfig,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'levee', cluster: { server: `https://127.0.0.1:${port}`, 'certificate-authority': env.caFile } }],
      users: [{ name: 'admin', user: { token: env.tokens.admin } }],
      contexts: [{ name: 'levee', context: { cluster: 'levee', user: 'admin', namespace: 'demo' } }],
      'current-context': 'levee',
    }),
    { mode: 0o600 },
  );
  console.log(`
Levee will listen on https://127.0.0.1:${port}, in front of the local apiserver at ${env.server}.
Seeded namespace "demo" with pods (scheduled onto the simulated nodes), a service and a configmap.
Point kubectl at Levee:

  export KUBECONFIG=${leveeKubeconfig}
  ${env.kubectl} get pods -o wide
  ${env.kubectl} get pods --watch

Ctrl-C stops Levee; the cluster keeps running until \`npm run testenv -- down\`.
`);
  runLevee([
    '--kubeconfig', env.kubeconfig,
    '--listen', listen,
    '--tls-cert-file', env.leveeServing.cert,
    '--tls-private-key-file', env.leveeServing.key,
    ...args.filter((a, i) => !(a.startsWith('--listen') || args[i - 1] === '--listen')),
  ]);
}
