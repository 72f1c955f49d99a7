// Answers from the cache are written in chunks whose buffers are used again once written
// (src/http/chunkedbody.ts). Many clients reading large answers at once, some slowly, over
// HTTP/1.1 and HTTP/2 and in every representation the cache writes in chunks, must each get their
// answer whole: a buffer used again before its stream was done with it would put one answer's
// bytes into another's.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type ClientHttp2Session } from 'node:http2';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { request, type Agent } from 'undici';
import { loadEnv, type TestEnv } from '../env/testenv.ts';
import { startLevee, type LeveeProcess } from '../support/levee.ts';
import { agentFor, get, send, suffix } from '../support/http.ts';
import { createNamespace } from '../support/cluster.ts';
import { waitFor } from '../support/wait.ts';
import { leveeCounters } from '../support/counters.ts';

// 160 objects of ~20 KB: a list of ~3.3 MB, about 25 chunks, each object's bytes its own; their
// metadata (a 2 KB annotation each) makes a PartialObjectMetadataList of several chunks too.
const OBJECTS = 160;
const FILLER = 20_000;
const META = 'meta.k8s.io';
// Each form, and the query that makes it large: a Table carries each whole object.
const FORMS: Record<string, { accept: string; query: string }> = {
  json: { accept: 'application/json', query: '' },
  table: { accept: `application/json;as=Table;v=v1;g=${META}`, query: '&includeObject=Object' },
  metadata: { accept: `application/json;as=PartialObjectMetadataList;v=v1;g=${META}`, query: '' },
  protobuf: { accept: 'application/vnd.kubernetes.protobuf', query: '' },
};

let env: TestEnv;
let levee: LeveeProcess;
let agent: Agent;
const ns = `chunks-${suffix()}`;
const path = `/api/v1/namespaces/${ns}/configmaps`;
const { fromCache, forwardedAll, forwardedLines } = leveeCounters(() => levee.url.origin, () => agent);

before(async () => {
  env = loadEnv();
  agent = agentFor(env.caFile);
  await createNamespace(env, agent, ns);
  for (let i = 0; i < OBJECTS; i += 16) {
    await Promise.all(
      Array.from({ length: 16 }, async (_, j) => {
        const name = `cm-${String(i + j).padStart(3, '0')}`;
        // Every object's data differs all along, so that bytes out of place cannot pass.
        const r = await send('POST', `${env.server}${path}`, agent, env.tokens.admin, {
          metadata: { name, annotations: { note: name.repeat(2000 / name.length) } },
          data: { filler: name.repeat(FILLER / name.length) },
        });
        assert.equal(r.status, 201, r.body.slice(0, 300));
      }),
    );
  }
  levee = await startLevee({ kubeconfig: env.kubeconfig, tls: env.leveeServing, extra: ['--cache', 'configmaps'] });
  await waitFor('levee caches every object', async () => {
    const r = await get(`${levee.url.origin}${path}?resourceVersion=0`, agent, env.tokens.admin);
    return r.status === 200 && (JSON.parse(r.body) as { items: unknown[] }).items.length >= OBJECTS;
  }, 30_000);
});

after(async () => {
  await levee?.stop();
  await send('DELETE', `${env.server}/api/v1/namespaces/${ns}`, agent, env.tokens.admin).catch(() => undefined);
  await agent?.close();
});

/** Reads an HTTP/1.1 answer; a slow reader waits after each piece it takes. */
async function overHttp1(url: string, accept: string, slow: boolean): Promise<Buffer> {
  const res = await request(url, { dispatcher: agent, headers: { authorization: `Bearer ${env.tokens.admin}`, accept } });
  assert.equal(res.statusCode, 200);
  const chunks: Buffer[] = [];
  for await (const c of res.body) {
    chunks.push(c as Buffer);
    if (slow) await sleep(2);
  }
  return Buffer.concat(chunks);
}

/** Reads an HTTP/2 answer; a slow reader pauses the stream after each piece. */
function overHttp2(session: ClientHttp2Session, p: string, accept: string, slow: boolean): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const stream = session.request({ ':path': p, authorization: `Bearer ${env.tokens.admin}`, accept });
    const chunks: Buffer[] = [];
    stream.on('response', (h) => {
      if (h[':status'] !== 200) reject(new Error(`HTTP/2 ${p}: ${h[':status']}`));
    });
    stream.on('data', (c: Buffer) => {
      chunks.push(c);
      if (slow) {
        stream.pause();
        setTimeout(() => stream.resume(), 2);
      }
    });
    stream.on('end', () => resolve(Buffer.concat(chunks)));
    stream.on('error', reject);
  });
}

test('many clients at once, some slow, each get their chunked answer whole, over HTTP/1.1 and HTTP/2', async () => {
  const ca = readFileSync(env.caFile);
  const sessions = [connect(levee.url.origin, { ca }), connect(levee.url.origin, { ca })];
  try {
    // One resourceVersion for all, so that every answer in a representation is the same bytes.
    const first = JSON.parse((await get(`${levee.url.origin}${path}?resourceVersion=0`, agent, env.tokens.admin)).body) as { metadata: { resourceVersion: string } };
    const q = `${path}?resourceVersion=${first.metadata.resourceVersion}&resourceVersionMatch=Exact`;
    const cachedBefore = await fromCache();
    const forwardedBefore = await forwardedAll();
    // The objects in the namespace: the test's, and the CA bundle the controllers add to each.
    let objects = 0;
    for (const [form, { accept, query }] of Object.entries(FORMS)) {
      const reads: Array<Promise<Buffer>> = [];
      for (let i = 0; i < 4; i++) {
        reads.push(overHttp1(levee.url.origin + q + query, accept, i % 2 === 0));
        reads.push(overHttp2(sessions[i % 2]!, q + query, accept, i % 2 === 1));
      }
      const answers = await Promise.all(reads);
      assert.ok(answers[0]!.length > 300_000, `${form}: ${answers[0]!.length} bytes, fewer than three chunks`);
      for (const [i, a] of answers.entries()) assert.ok(a.equals(answers[0]!), `${form}: answer ${i} (${a.length} bytes) differs from answer 0 (${answers[0]!.length} bytes)`);
      if (form === 'json' || form === 'metadata' || form === 'protobuf') {
        // The apiserver's answer at the same resourceVersion is the same bytes.
        const direct = await overHttp1(env.server + q + query, accept, false);
        assert.ok(answers[0]!.equals(direct), `${form}: Levee's answer differs from the apiserver's`);
        if (form === 'json') objects = (JSON.parse(direct.toString()) as { items: unknown[] }).items.length;
      } else {
        const rows = (JSON.parse(answers[0]!.toString()) as { rows: unknown[] }).rows;
        assert.ok(objects >= OBJECTS);
        assert.equal(rows.length, objects);
      }
    }
    assert.equal((await fromCache()) - cachedBefore, 8 * Object.keys(FORMS).length, 'every answer came from the cache');
    assert.equal((await forwardedAll()) - forwardedBefore, 0, await forwardedLines());
  } finally {
    for (const s of sessions) s.close();
  }
});
