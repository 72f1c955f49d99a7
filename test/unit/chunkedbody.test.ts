// ChunkedBody writes an answer's parts in chunks whose buffers are used again, only once the
// stream has called back for them; each kind of response Levee writes gets the parts' exact
// concatenation; a slow client holds the writer back.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { createServer, request, type ServerResponse } from 'node:http';
import { connect, createServer as createH2Server, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo } from 'node:net';
import type { Readable } from 'node:stream';
import { ChunkedBody, spareChunks } from '../../src/http/chunkedbody.ts';
import { WRITE_CHUNK, type DownstreamResponse } from '../../src/http/downstream.ts';
import { StreamResponse } from '../../src/http/h2stream.ts';

type Done = (error?: Error | null) => void;

/** A response that records each write and calls back only when told. */
class Recorder extends EventEmitter {
  writes: Array<{ chunk: Buffer; copy: Buffer; done: Done | undefined; end: boolean }> = [];
  accept = true;
  headersSent = false;
  destroyed = false;
  writableFinished = false;
  statusCode = 200;
  writeHead(): this {
    return this;
  }
  write(chunk: Buffer, done?: Done): boolean {
    this.writes.push({ chunk, copy: Buffer.from(chunk), done, end: false });
    return this.accept;
  }
  end(chunk?: Buffer, done?: Done): this {
    if (chunk) this.writes.push({ chunk, copy: Buffer.from(chunk), done, end: true });
    return this;
  }
  destroy(): this {
    this.destroyed = true;
    return this;
  }
}

/** Items of distinct bytes, `n` of `size` each. */
function items(n: number, size: number, seed: number): Buffer[] {
  return Array.from({ length: n }, (_, i) => Buffer.alloc(size, String.fromCharCode(0x41 + ((seed + i) % 26))));
}

/** Writes `parts` as one answer, waiting whenever the body asks to. */
async function writeAll(res: DownstreamResponse, parts: readonly Buffer[]): Promise<boolean> {
  const body = new ChunkedBody(res);
  for (const p of parts) {
    body.add(p);
    const more = body.writeIfFull();
    if (more !== true && !(await more)) return false;
  }
  body.end();
  return true;
}

function drainSpares(): void {
  // Spares are per thread; take them so that each test starts with none.
  const r = new Recorder();
  const body = new ChunkedBody(r);
  for (let i = 0; i < 16; i++) {
    body.add(Buffer.alloc(WRITE_CHUNK));
    void body.writeIfFull();
  }
  assert.equal(spareChunks(), 0);
}

test('a chunk\'s buffer is not used again until its write has called back', async () => {
  drainSpares();
  const r = new Recorder();
  const parts = items(40, 10_000, 0);
  assert.equal(await writeAll(r as unknown as DownstreamResponse, parts), true);
  const chunks = r.writes.map((w) => w.chunk);
  assert.ok(chunks.length >= 3);
  // Nothing called back: every chunk in its own memory, none overwritten by the next.
  assert.equal(new Set(chunks.map((c) => c.buffer)).size, chunks.length);
  for (const w of r.writes) assert.ok(w.chunk.equals(w.copy), 'a chunk changed after it was written');
  assert.ok(Buffer.concat(chunks).equals(Buffer.concat(parts)));
  // Chunks end between parts and are full but for the last.
  for (const c of chunks.slice(0, -1)) assert.ok(c.length >= WRITE_CHUNK && c.length % 10_000 === 0, `chunk of ${c.length} bytes`);
});

test('a buffer written and called back serves the next chunk; one that failed does not', async () => {
  drainSpares();
  const r = new Recorder();
  await writeAll(r, items(30, 10_000, 1));
  const full = r.writes.filter((w) => w.chunk.length >= WRITE_CHUNK);
  assert.ok(full.length >= 2);
  full[0]!.done!();
  full[1]!.done!(new Error('stream destroyed'));
  assert.equal(spareChunks(), 1);
  const next = new Recorder();
  const parts = items(30, 10_000, 7);
  await writeAll(next, parts);
  assert.equal(next.writes[0]!.chunk.buffer, full[0]!.chunk.buffer, 'the spare was used');
  assert.notEqual(next.writes[1]!.chunk.buffer, full[1]!.chunk.buffer, 'a failed write\'s buffer was used again');
  assert.ok(Buffer.concat(next.writes.map((w) => w.chunk)).equals(Buffer.concat(parts)));
});

test('a small answer with no spare gets a buffer of its own size, and one larger than a spare too', async () => {
  drainSpares();
  const small = new Recorder();
  await writeAll(small, items(3, 1000, 2));
  assert.equal(small.writes.length, 1);
  assert.ok(small.writes[0]!.end);
  assert.ok(small.writes[0]!.chunk.buffer.byteLength < WRITE_CHUNK, `${small.writes[0]!.chunk.buffer.byteLength} bytes held for 3000`);
  const large = new Recorder();
  const parts = [Buffer.alloc(10), Buffer.alloc(3 * WRITE_CHUNK, 'z'), Buffer.alloc(10)];
  await writeAll(large, parts);
  assert.ok(Buffer.concat(large.writes.map((w) => w.chunk)).equals(Buffer.concat(parts)));
  large.writes[0]!.done?.();
  assert.equal(spareChunks(), 0, 'an oversized chunk is no spare');
});

test('a slow client holds the writer back; one that leaves stops it', async () => {
  drainSpares();
  const r = new Recorder();
  r.accept = false;
  const writing = writeAll(r, items(60, 10_000, 3));
  await new Promise((res) => setImmediate(res));
  assert.equal(r.writes.length, 1, 'a second chunk was written before the first drained');
  r.emit('drain');
  await new Promise((res) => setImmediate(res));
  assert.equal(r.writes.length, 2);
  r.destroyed = true;
  r.emit('close');
  assert.equal(await writing, false);
  assert.equal(r.writes.length, 2);
});

// Real responses: many answers at once, each of distinct bytes, through each kind of response.
const ANSWERS = 6;
const bodies = Array.from({ length: ANSWERS }, (_, k) => items(80, 9_000 + k * 37, k));
const expected = bodies.map((b) => Buffer.concat(b));

/** Reads a client's answer; a slow reader (every other one) pauses after each piece. */
function readAll(stream: Readable, k: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => {
      chunks.push(c);
      if (k % 2 === 0) {
        stream.pause();
        setTimeout(() => stream.resume(), 1);
      }
    });
    stream.on('end', () => resolve(Buffer.concat(chunks)));
    stream.on('error', reject);
  });
}

function serve(res: DownstreamResponse, path: string): void {
  const k = Number(path.slice(1));
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(expected[k]!.length) });
  void writeAll(res, bodies[k]!);
}

test('HTTP/1.1: answers written at once arrive whole', async () => {
  const server = createServer((req, res: ServerResponse) => serve(res, req.url!));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const port = (server.address() as AddressInfo).port;
    const got = await Promise.all(
      expected.map(
        (_, k) =>
          new Promise<Buffer>((resolve, reject) => {
            request({ port, host: '127.0.0.1', path: `/${k}` }, (res) => void readAll(res, k).then(resolve, reject))
              .on('error', reject)
              .end();
          }),
      ),
    );
    got.forEach((g, k) => assert.ok(g.equals(expected[k]!), `answer ${k}`));
  } finally {
    server.close();
  }
});

for (const api of ['core stream', 'compat'] as const) {
  test(`HTTP/2 (${api}): answers written at once arrive whole`, async () => {
    const server = createH2Server();
    if (api === 'core stream') server.on('stream', (stream: ServerHttp2Stream, headers) => serve(new StreamResponse(stream), String(headers[':path'])));
    else server.on('request', (req, res) => serve(res as unknown as DownstreamResponse, req.url));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const session = connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    try {
      const got = await Promise.all(
        expected.map(
          (_, k) => readAll(session.request({ ':path': `/${k}` }), k),
        ),
      );
      got.forEach((g, k) => assert.ok(g.equals(expected[k]!), `answer ${k}`));
    } finally {
      session.close();
      server.close();
    }
  });
}
