// Flow control against the real apiserver: past its seats and queues a client gets APF's 429 with
// Retry-After, system:masters passes regardless, and reads of a resource that cannot sync yet are
// turned away with a Retry-After that grows instead of piling onto the apiserver.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, request } from 'undici';
import { readFileSync } from 'node:fs';
import { loadEnv, type TestEnv } from '../env/testenv.ts';
import { startLevee, writeKubeconfig, type LeveeProcess } from '../support/levee.ts';
import { send, suffix } from '../support/http.ts';
import { createNamespace } from '../support/cluster.ts';

let env: TestEnv;
let agent: Agent;
const ns = `flow-${suffix()}`;

async function waitFor(check: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 150; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function get(origin: string, path: string, token: string): Promise<{ status: number; body: string; retryAfter: string | undefined }> {
  const res = await request(origin + path, { dispatcher: agent, headers: { authorization: `Bearer ${token}`, accept: 'application/json' } });
  return { status: res.statusCode, body: await res.body.text(), retryAfter: res.headers['retry-after'] as string | undefined };
}

before(async () => {
  env = loadEnv();
  agent = new Agent({ connect: { ca: readFileSync(env.caFile) }, allowH2: false });
  const admin = env.tokens.admin;
  await createNamespace(env, agent, ns);
  for (let i = 0; i < 5; i++) await send('POST', `${env.server}/api/v1/namespaces/${ns}/secrets`, agent, admin, { metadata: { name: `s-${i}` } });
  assert.equal((await send('POST', `${env.server}/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`, agent, admin, {
    metadata: { name: 'reader' },
    rules: [{ apiGroups: [''], resources: ['configmaps', 'secrets'], verbs: ['get', 'list'] }],
  })).status, 201);
  assert.equal((await send('POST', `${env.server}/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, agent, admin, {
    metadata: { name: 'alice-reader' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'reader' },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'alice' }],
  })).status, 201);
  await waitFor(async () => (await get(env.server, `/api/v1/namespaces/${ns}/secrets`, env.tokens.alice)).status === 200, 'RBAC in force');
});

after(async () => {
  await send('DELETE', `${env.server}/api/v1/namespaces/${ns}`, agent, env.tokens.admin);
  await agent.close();
});

test('past its seats and queues a user gets APF\'s 429 with Retry-After; system:masters is exempt', async () => {
  const levee: LeveeProcess = await startLevee({
    kubeconfig: env.kubeconfig,
    tls: env.leveeServing,
    // One thread: each thread has its share of the seats, its own queues and the users it knows
    // (README, "Workers"); this pins one thread's.
    extra: ['--workers', '1', '--cache', 'configmaps', '--client-ca-file', env.caFile, '--max-requests-inflight', '1', '--flow-queue-length', '1', '--flow-queue-wait', '2s'],
  });
  try {
    const path = `/api/v1/namespaces/${ns}/secrets`;
    const burst = async (token: string) => Promise.all(Array.from({ length: 40 }, () => get(levee.url.origin, path, token)));
    const alice = await burst(env.tokens.alice);
    const codes = alice.map((r) => r.status);
    assert.ok(codes.includes(200), codes.join(','));
    const rejected = alice.filter((r) => r.status === 429);
    assert.ok(rejected.length > 0, codes.join(','));
    for (const r of rejected) {
      assert.equal(r.retryAfter, '1');
      assert.deepEqual(JSON.parse(r.body), {
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: 'Too many requests, please try again later.',
        reason: 'TooManyRequests',
        details: { retryAfterSeconds: 1 },
        code: 429,
      });
    }
    assert.ok(codes.every((c) => c === 200 || c === 429), codes.join(','));
    // The same burst from system:masters is never queued, once Levee knows the client is: by its
    // certificate, or by a token it reviewed lately (a forwarded token alone is not reviewed).
    const admin = new Agent({ connect: { ca: readFileSync(env.caFile), cert: readFileSync(env.clientCerts.admin.cert), key: readFileSync(env.clientCerts.admin.key) }, allowH2: false });
    try {
      const byCertificate = await Promise.all(Array.from({ length: 40 }, async () => {
        const res = await request(levee.url.origin + path, { dispatcher: admin, headers: { accept: 'application/json' } });
        await res.body.text();
        return res.statusCode;
      }));
      assert.deepEqual([...new Set(byCertificate)], [200]);
    } finally {
      await admin.close();
    }
    assert.equal((await get(levee.url.origin, `/api/v1/namespaces/${ns}/configmaps?resourceVersion=0`, env.tokens.admin)).status, 200);
    assert.deepEqual([...new Set((await burst(env.tokens.admin)).map((r) => r.status))], [200]);
    const metrics = (await get(levee.url.origin, '/metrics', env.tokens.admin)).body;
    const m = /levee_flowcontrol_rejected_requests_total\{class="read",stage="requests",reason="queue-full"\} (\d+)/.exec(metrics);
    assert.equal(Number(m?.[1]), rejected.length);
    assert.match(metrics, /levee_flowcontrol_seats\{class="read",stage="requests"\} 1/);
  } finally {
    await levee.stop();
  }
});

test('a resource that cannot sync: not ready, reads forwarded under the upstream bound, past it 429 with a growing Retry-After', async () => {
  // bob may not list secrets nor configmaps, so a Levee running as bob never syncs them. The
  // reads are identical and would share one upstream request; without coalescing each needs a
  // seat of the bound.
  const levee = await startLevee({
    kubeconfig: writeKubeconfig(env.server, env.caFile, env.tokens.bob),
    tls: env.leveeServing,
    // One thread, whose rejections lengthen its Retry-After (each thread counts its own).
    extra: ['--workers', '1', '--cache', 'secrets,configmaps', '--upstream-max-requests-inflight', '1', '--flow-queue-length', '1', '--flow-queue-wait', '5s', '--coalesce-max-bytes', '0'],
  });
  try {
    const ready = await get(levee.url.origin, '/readyz?verbose', env.tokens.alice);
    // The apiserver's own format for a failed readiness check.
    assert.equal(ready.status, 500);
    assert.match(ready.body, /\[-\]cache-synced failed/);
    const path = `/api/v1/namespaces/${ns}/secrets`;
    const answers = await Promise.all(Array.from({ length: 300 }, () => get(levee.url.origin, path, env.tokens.alice)));
    const ok = answers.filter((a) => a.status === 200);
    const rejected = answers.filter((a) => a.status === 429);
    assert.equal(ok.length + rejected.length, answers.length, answers.map((a) => a.status).join(','));
    assert.ok(ok.length > 0);
    for (const a of ok) assert.equal((JSON.parse(a.body) as { items: unknown[] }).items.length, 5);
    const waits = rejected.map((a) => Number(a.retryAfter));
    assert.ok(rejected.length > 200, `only ${rejected.length} rejected`);
    assert.equal(Math.min(...waits), 1);
    assert.ok(Math.max(...waits) >= 3, `Retry-After never grew: ${[...new Set(waits)].join(',')}`);
    // The crowd at secrets does not lengthen the wait at another resource still warming up.
    const others = await Promise.all(Array.from({ length: 30 }, () => get(levee.url.origin, `/api/v1/namespaces/${ns}/configmaps`, env.tokens.alice)));
    const otherWaits = others.filter((a) => a.status === 429).map((a) => Number(a.retryAfter));
    assert.ok(otherWaits.length > 0, others.map((a) => a.status).join(','));
    assert.deepEqual([...new Set(otherWaits)], [1]);
  } finally {
    await levee.stop();
  }
});
