// What protobuf from the cache costs Levee and saves its clients (docs/design.md,
// "Representations"): N pods created in the test environment (bound to no node, so nothing changes
// them), a Levee caching pods, and in one run:
//   - memory: Levee's RSS once synced (JSON only), then after every pod's message was made by a
//     first protobuf LIST, so the RSS the kept messages cost per pod;
//   - CPU: that first LIST (every message made) against the next ones (every message kept);
//   - LIST of the namespace from the cache in JSON and in protobuf and from the apiserver's watch
//     cache (resourceVersion=0) in protobuf, requests alternated, medians, and the bytes of each.
//
//   npm run bench:protobuf                  # 5,000 pods
//   npm run bench:protobuf -- --pods 1000 --reps 20
import { parseArgs } from 'node:util';
import { request, type Agent } from 'undici';
import { loadEnv } from '../test/env/testenv.ts';
import { startLevee } from '../test/support/levee.ts';
import { agentFor, get, send, suffix } from '../test/support/http.ts';
import { NO_SCHEDULER } from '../test/support/cluster.ts';
import { readFileSync } from 'node:fs';
import { quantile } from './lib/stats.ts';

const { values: flags } = parseArgs({ options: { pods: { type: 'string', default: '5000' }, reps: { type: 'string', default: '30' } } });
const PODS = Number(flags.pods);
const REPS = Number(flags.reps);
const PROTOBUF = 'application/vnd.kubernetes.protobuf';

const env = loadEnv();
const agent: Agent = agentFor(env.caFile);
const ns = `bench-protobuf-${suffix()}`;
const log = (s: string): void => console.log(`bench:protobuf: ${s}`);

function pod(i: number): object {
  const app = `app-${i % 50}`;
  return {
    metadata: { name: `p-${i}`, labels: { app, tier: i % 3 === 0 ? 'web' : 'worker', 'pod-template-hash': '5d8f7c9b4' }, annotations: { 'example.com/revision': String(i % 7) } },
    spec: {
      schedulerName: NO_SCHEDULER,
      containers: [
        {
          name: 'main',
          image: `registry.example.com/${app}:v1.${i % 10}`,
          args: ['--port=8080', '--log-level=info'],
          ports: [{ name: 'http', containerPort: 8080 }],
          env: [{ name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }, { name: 'MODE', value: 'production' }],
          resources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '256Mi' } },
          readinessProbe: { httpGet: { path: '/ready', port: 'http' }, periodSeconds: 5 },
          volumeMounts: [{ name: 'config', mountPath: '/etc/app' }],
        },
        { name: 'sidecar', image: 'registry.example.com/proxy:2.1', resources: { requests: { cpu: '10m', memory: '32Mi' } } },
      ],
      volumes: [{ name: 'config', configMap: { name: `${app}-config` } }],
      tolerations: [{ key: 'example.com/dedicated', operator: 'Equal', value: 'apps', effect: 'NoSchedule' }],
    },
  };
}

async function timed(url: string, accept: string): Promise<{ ms: number; bytes: number }> {
  const t0 = process.hrtime.bigint();
  const r = await request(url, { dispatcher: agent, headers: { authorization: `Bearer ${env.tokens.admin}`, accept } });
  let bytes = 0;
  for await (const c of r.body) bytes += (c as Buffer).length;
  if (r.statusCode !== 200) throw new Error(`${url}: ${r.statusCode}`);
  return { ms: Number(process.hrtime.bigint() - t0) / 1e6, bytes };
}

function cpuSeconds(pid: number): number {
  // utime + stime from /proc/<pid>/stat, in clock ticks of 1/100 s.
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

log(`creating ${PODS} pods in ${ns}`);
await send('POST', `${env.server}/api/v1/namespaces`, agent, env.tokens.admin, { metadata: { name: ns } });
await new Promise((r) => setTimeout(r, 1000));
const podsUrl = `${env.server}/api/v1/namespaces/${ns}/pods`;
for (let i = 0; i < PODS; i += 100) {
  await Promise.all(
    Array.from({ length: Math.min(100, PODS - i) }, async (_, k) => {
      for (;;) {
        const r = await send('POST', podsUrl, agent, env.tokens.admin, pod(i + k));
        if (r.status === 201) return;
        if (r.status !== 429 && r.status < 500) throw new Error(r.body);
        await new Promise((res) => setTimeout(res, 200));
      }
    }),
  );
}
const levee = await startLevee({ kubeconfig: env.kubeconfig, tls: env.leveeServing, extra: ['--cache', 'pods'] });
try {
  for (let i = 0; (await get(`${levee.url.origin}/readyz`, agent)).status !== 200; i++) {
    if (i > 600) throw new Error('levee not ready');
    await new Promise((r) => setTimeout(r, 100));
  }
  const cached = `${levee.url.origin}/api/v1/namespaces/${ns}/pods?resourceVersion=0`;
  const direct = `${podsUrl}?resourceVersion=0`;
  // Settle, then measure: a JSON LIST first (nothing of protobuf made yet).
  await timed(cached, 'application/json');
  await new Promise((r) => setTimeout(r, 2000));
  const rssJson = levee.rss();
  const cpu0 = cpuSeconds(levee.pid);
  const first = await timed(cached, PROTOBUF);
  const cpu1 = cpuSeconds(levee.pid);
  const second = await timed(cached, PROTOBUF);
  const cpu2 = cpuSeconds(levee.pid);
  await new Promise((r) => setTimeout(r, 2000));
  const rssProto = levee.rss();
  log(`first protobuf LIST (every message made): ${first.ms.toFixed(0)} ms, Levee CPU ${(cpu1 - cpu0).toFixed(2)} s (${(((cpu1 - cpu0) * 1e6) / PODS).toFixed(0)} µs per pod)`);
  log(`second (every message kept): ${second.ms.toFixed(0)} ms, Levee CPU ${(cpu2 - cpu1).toFixed(2)} s`);
  log(`RSS: ${(rssJson / 1e6).toFixed(1)} MB synced, ${(rssProto / 1e6).toFixed(1)} MB with every message kept: ${((rssProto - rssJson) / PODS).toFixed(0)} bytes per pod`);

  const targets = { 'cache json': [cached, 'application/json'], 'cache protobuf': [cached, PROTOBUF], 'apiserver protobuf': [direct, PROTOBUF], 'apiserver json': [direct, 'application/json'] } as const;
  const times: Record<string, number[]> = {};
  const bytes: Record<string, number> = {};
  for (let rep = 0; rep < REPS; rep++) {
    for (const [name, [url, accept]] of Object.entries(targets)) {
      const t = await timed(url, accept);
      (times[name] ??= []).push(t.ms);
      bytes[name] = t.bytes;
    }
  }
  console.log(`\n| LIST of ${PODS} pods (${REPS} rounds, alternated) | p50 ms | p90 ms | bytes |\n|---|---:|---:|---:|`);
  for (const name of Object.keys(targets)) {
    console.log(`| ${name} | ${quantile(times[name]!, 0.5).toFixed(1)} | ${quantile(times[name]!, 0.9).toFixed(1)} | ${bytes[name]} |`);
  }
} finally {
  await levee.stop();
  await send('DELETE', `${env.server}/api/v1/namespaces/${ns}`, agent, env.tokens.admin);
  await agent.close();
}
