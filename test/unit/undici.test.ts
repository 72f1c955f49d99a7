// src/upstream/undici.ts takes undici's parts from their own files: they must be the entry point's
// own, and a pool made from them must have the request API the entry point puts on Dispatcher.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { BalancedPool, Pool, buildConnector, errors } from '../../src/upstream/undici.ts';

test('a pool made from them sends a request with the request API', async () => {
  const entryPoint = createRequire(import.meta.url).resolve('undici');
  assert.equal(createRequire(import.meta.url).cache[entryPoint], undefined, "undici's entry point is not loaded yet: it would add the request API itself");
  const server = createServer((req, res) => res.end(`${req.method} ${req.url}`));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const pool = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  try {
    const res = await pool.request({ method: 'GET', path: '/api/v1/pods' });
    assert.equal(res.statusCode, 200);
    assert.equal(await res.body.text(), 'GET /api/v1/pods');
  } finally {
    await pool.close();
    server.close();
  }
});

test('the parts taken from their own files are those undici exports', async () => {
  const undici = await import('undici');
  assert.equal(Pool, undici.Pool);
  assert.equal(BalancedPool, undici.BalancedPool);
  assert.equal(buildConnector, undici.buildConnector);
  assert.equal(errors, undici.errors);
});
