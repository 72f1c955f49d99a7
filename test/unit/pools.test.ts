import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadUpstream } from '../../src/upstream/credentials.ts';
import { UpstreamPools } from '../../src/upstream/pools.ts';
import { getJson } from '../../src/upstream/client.ts';
import { writeKubeconfig } from '../support/levee.ts';

test('Levee keeps its idle connection upstream past undici\'s 4 s default, as client-go does', async () => {
  let connections = 0;
  const server = createServer((_req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end('{"kind":"PodList","metadata":{"resourceVersion":"7"},"items":[]}');
  });
  // As the apiserver: no Keep-Alive hint, and idle connections kept far longer than the gap.
  server.keepAliveTimeout = 0;
  server.on('connection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const kubeconfig = writeKubeconfig(`http://127.0.0.1:${port}`, undefined, 'levee-token');
  const pools = new UpstreamPools(loadUpstream({ kind: 'kubeconfig', path: kubeconfig }));
  try {
    await getJson(pools, '/api/v1/pods?limit=1');
    // Longer than undici's default keep-alive (4 s), which had closed it.
    await new Promise((r) => setTimeout(r, 4_500));
    await getJson(pools, '/api/v1/pods?limit=1');
    assert.equal(connections, 1, 'the second request opened a new connection');
  } finally {
    await pools.close();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
});
