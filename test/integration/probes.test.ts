// Levee's own connections to the real apiserver. A bookmark probe that brought its bookmark is
// read to the end the apiserver gives it at its deadline, not cut, so its connection goes back to
// the pool and the next probe needs no handshake; an idle connection outlives undici's 4 s default
// (docs/design.md, "Consistent reads").
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { Agent } from 'undici';
import { loadEnv, type TestEnv } from '../env/testenv.ts';
import { agentFor, send, suffix } from '../support/http.ts';
import { waitFor } from '../support/wait.ts';
import { Cache } from '../../src/cache/cache.ts';
import { createLogger } from '../../src/log/logger.ts';
import { GatewayMetrics } from '../../src/metrics/metrics.ts';
import { loadUpstream } from '../../src/upstream/credentials.ts';
import { UpstreamPools } from '../../src/upstream/pools.ts';
import { getJson } from '../../src/upstream/client.ts';

let env: TestEnv;
let agent: Agent;
let pools: UpstreamPools;
let cache: Cache;
const secret = `probe-${suffix()}`;

before(async () => {
  env = loadEnv();
  agent = agentFor(env.caFile);
  pools = new UpstreamPools(loadUpstream({ kind: 'kubeconfig', path: env.kubeconfig }));
  cache = new Cache(pools, ['configmaps'], createLogger('silent'), new GatewayMetrics().cache);
  cache.start();
  await waitFor('cache synced', () => cache.synced);
});

after(async () => {
  await cache?.stop();
  await pools?.close();
  await send('DELETE', `${env.server}/api/v1/namespaces/default/secrets/${secret}`, agent, env.tokens.admin);
  await agent?.close();
});

test('a bookmark probe that brought its bookmark is read to its end by the apiserver, not aborted', async () => {
  const r = cache.lookup('', 'configmaps');
  assert.ok(r);
  // A write to another resource moves etcd's revision past the configmaps' store, which its own
  // events cannot bring there: the proof needs a probe's bookmark.
  const created = await send('POST', `${env.server}/api/v1/namespaces/default/secrets`, agent, env.tokens.admin, { metadata: { name: secret } });
  assert.equal(created.status, 201, created.body);
  const isProbe = (m: unknown): boolean => (m as { request: { path: string } }).request.path.includes('timeoutSeconds=3');
  let aborted = 0;
  let completed = 0;
  const onError = (m: unknown): void => void (isProbe(m) && aborted++);
  const onComplete = (m: unknown): void => void (isProbe(m) && completed++);
  subscribe('undici:request:error', onError);
  subscribe('undici:request:trailers', onComplete);
  try {
    assert.equal(await r.consistency.prove(process.hrtime.bigint(), 5_000), true, 'proven by a bookmark');
    // The probe's deadline is 3 s after it began; the apiserver ends it then.
    await waitFor('the probe ended by the apiserver', () => completed > 0, 5_000);
    // Cut at its bookmark, the probe aborted its request, and the connection with it.
    assert.equal(aborted, 0, 'a probe was aborted');
  } finally {
    unsubscribe('undici:request:error', onError);
    unsubscribe('undici:request:trailers', onComplete);
  }
});

test('Levee\'s idle connection to the apiserver is still there 4.5 s later (undici alone closes it after 4 s)', async () => {
  // Pools of its own, so that nothing else in this process (the cache's reflector, its probes)
  // takes or opens a connection between the two requests.
  const own = new UpstreamPools(loadUpstream({ kind: 'kubeconfig', path: env.kubeconfig }));
  const path = `/api/v1/namespaces/default/configmaps?limit=1&labelSelector=idle-${suffix()}`;
  const sockets: unknown[] = [];
  const onSendHeaders = (m: unknown): void => {
    const { request, socket } = m as { request: { path: string }; socket: unknown };
    if (request.path.endsWith(path)) sockets.push(socket);
  };
  subscribe('undici:client:sendHeaders', onSendHeaders);
  try {
    await getJson(own, path);
    await new Promise((resolve) => setTimeout(resolve, 4_500));
    await getJson(own, path);
    assert.equal(sockets.length, 2);
    assert.ok(sockets[0] === sockets[1], 'the second request went out on a new connection');
  } finally {
    unsubscribe('undici:client:sendHeaders', onSendHeaders);
    await own.close();
  }
});
