// writeParts hands a frame's parts to each kind of response Levee writes (HTTP/1.1, HTTP/2 on the
// core stream API, HTTP/2 compat) and the client reads exactly their concatenation, parts over
// shared memory (where cached objects' bytes live) included.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, request, type ServerResponse } from 'node:http';
import { connect, createServer as createH2Server, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { StreamResponse } from '../../src/http/h2stream.ts';
import { writeParts, type DownstreamResponse } from '../../src/http/downstream.ts';

function parts(): Buffer[] {
  const shared = Buffer.from(new SharedArrayBuffer(64 * 1024));
  for (let i = 0; i < shared.length; i++) shared[i] = 0x61 + (i % 26);
  // A stored object's bytes are a view into a larger shared buffer.
  return [Buffer.from('{"type":"ADDED","object":'), shared.subarray(100, 40_100), Buffer.from('}\n'), Buffer.from('x'), shared.subarray(0, 20_000)];
}
const expected = Buffer.concat(parts());

async function respond(res: DownstreamResponse): Promise<void> {
  res.writeHead(200, { 'content-type': 'application/json' });
  const ok = writeParts(res, parts());
  if (!ok) await new Promise((r) => res.once('drain', () => r(undefined)));
  res.end();
}

test('HTTP/1.1: parts arrive whole and in order', async () => {
  const server = createServer((_req, res: ServerResponse) => void respond(res));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const body = await new Promise<Buffer>((resolve, reject) => {
      request({ port: (server.address() as AddressInfo).port, host: '127.0.0.1', path: '/' }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve(Buffer.concat(chunks)));
      })
        .on('error', reject)
        .end();
    });
    assert.ok(body.equals(expected));
  } finally {
    server.close();
  }
});

for (const api of ['core stream', 'compat'] as const) {
  test(`HTTP/2 (${api}): parts arrive whole and in order`, async () => {
    const server = createH2Server();
    if (api === 'core stream') server.on('stream', (stream: ServerHttp2Stream) => void respond(new StreamResponse(stream)));
    else server.on('request', (_req, res) => void respond(res as unknown as DownstreamResponse));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const session = connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    try {
      const body = await new Promise<Buffer>((resolve, reject) => {
        const s = session.request({ ':path': '/' });
        const chunks: Buffer[] = [];
        s.on('data', (c: Buffer) => chunks.push(c));
        s.on('end', () => resolve(Buffer.concat(chunks)));
        s.on('error', reject);
      });
      assert.ok(body.equals(expected));
    } finally {
      session.close();
      server.close();
    }
  });
}
