// Upstream protection against the real apiserver: discovery and OpenAPI answered from Levee's
// short-lived cache byte for byte as the apiserver answers them (bodies, ETags, 304s, the 403 of a
// user it refuses), at most one upstream request per document and TTL, kubectl working through it;
// and identical concurrent reads sent upstream once.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { request, type Agent } from 'undici';
import { loadEnv, type TestEnv } from '../env/testenv.ts';
import { kubectl } from '../support/kubectl.ts';
import { startLevee, writeKubeconfig, type LeveeProcess } from '../support/levee.ts';
import { agentFor, send, suffix } from '../support/http.ts';
import { createNamespace } from '../support/cluster.ts';
import { tempDir } from '../support/tempdir.ts';

let env: TestEnv;
let agent: Agent;
let levee: LeveeProcess;
const ns = `discovery-${suffix()}`;

const AGGREGATED = 'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json';
const UA = 'discovery-test/1.0';

interface Raw {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

async function raw(origin: string, path: string, token: string | undefined, headers: Record<string, string> = {}): Promise<Raw> {
  const h: Record<string, string> = { 'user-agent': UA, ...headers };
  if (token) h.authorization = `Bearer ${token}`;
  const res = await request(origin + path, { dispatcher: agent, headers: h });
  return { status: res.statusCode, headers: res.headers, body: Buffer.from(await res.body.arrayBuffer()) };
}

async function metric(origin: string, pattern: RegExp): Promise<number> {
  const text = (await raw(origin, '/metrics', env.tokens.admin)).body.toString();
  let sum = 0;
  for (const line of text.split('\n')) {
    const m = pattern.exec(line);
    if (m) sum += Number(m[1]);
  }
  return sum;
}

before(async () => {
  env = loadEnv();
  agent = agentFor(env.caFile);
  levee = await startLevee({ kubeconfig: env.kubeconfig, tls: env.leveeServing, extra: ['--cache', 'configmaps', '--anonymous-auth'] });
});

after(async () => {
  await send('DELETE', `${env.server}/api/v1/namespaces/${ns}`, agent, env.tokens.admin);
  await levee?.stop();
  await agent.close();
});

test('discovery and OpenAPI: the apiserver\'s bytes, ETags and headers, and its 304s', async () => {
  const index = JSON.parse((await raw(env.server, '/openapi/v3', env.tokens.alice)).body.toString()) as { paths: Record<string, { serverRelativeURL: string }> };
  const appsV3 = index.paths['apis/apps/v1']!.serverRelativeURL;
  const cases: Array<[string, Record<string, string>]> = [
    ['/api', { accept: AGGREGATED }],
    ['/apis', { accept: AGGREGATED, 'accept-encoding': 'gzip' }],
    ['/apis', { accept: 'application/json' }],
    ['/api/v1?timeout=32s', { accept: 'application/json' }],
    ['/apis/apps/v1', {}],
    ['/apis/apps', {}],
    ['/openapi/v2', { accept: 'application/com.github.proto-openapi.spec.v2@v1.0+protobuf', 'accept-encoding': 'gzip' }],
    ['/openapi/v2', { accept: 'application/json' }],
    ['/openapi/v3', {}],
    [appsV3, { accept: 'application/json' }],
  ];
  const before = await metric(levee.url.origin, /^levee_request_total\{verb="GET",group="",resource="",subresource="",source="cache",code="(?:200|304)"\} (\d+)/);
  for (const [path, headers] of cases) {
    // Twice through Levee: the first fills the cache, the second is answered from it.
    for (let round = 0; round < 2; round++) {
      const [direct, through] = await Promise.all([raw(env.server, path, env.tokens.alice, headers), raw(levee.url.origin, path, env.tokens.alice, headers)]);
      assert.equal(through.status, direct.status, path);
      assert.ok(through.body.equals(direct.body), `${path}: bodies differ (${through.body.length} and ${direct.body.length} bytes)`);
      for (const h of ['content-type', 'content-encoding', 'etag', 'vary', 'cache-control']) {
        assert.deepEqual(through.headers[h], direct.headers[h], `${path}: ${h}`);
      }
      assert.ok(through.headers['audit-id'], 'every answer names its request');
      const etag = direct.headers.etag as string | undefined;
      if (!etag) continue;
      // A client that holds the current document is told so, as the apiserver tells it.
      const [d304, l304] = await Promise.all([
        raw(env.server, path, env.tokens.alice, { ...headers, 'if-none-match': etag }),
        raw(levee.url.origin, path, env.tokens.alice, { ...headers, 'if-none-match': etag }),
      ]);
      assert.equal(d304.status, 304, path);
      assert.equal(l304.status, 304, path);
      assert.equal(l304.body.length, 0);
      for (const h of ['etag', 'vary', 'cache-control', 'content-type', 'last-modified']) assert.deepEqual(l304.headers[h], d304.headers[h], `${path} 304: ${h}`);
      // A tag that is not the current one gets the document.
      const stale = await raw(levee.url.origin, path, env.tokens.alice, { ...headers, 'if-none-match': '"not-the-etag"' });
      assert.equal(stale.status, 200);
      assert.ok(stale.body.equals(direct.body));
    }
  }
  const after = await metric(levee.url.origin, /^levee_request_total\{verb="GET",group="",resource="",subresource="",source="cache",code="(?:200|304)"\} (\d+)/);
  assert.ok(after - before >= cases.length * 2, `only ${after - before} discovery answers came from the cache`);
});

test('a user the apiserver refuses discovery to gets its 403 and no cached byte', async () => {
  // system:discovery is granted to authenticated users only: anonymous is refused /apis and OpenAPI.
  for (const path of ['/apis', '/api/v1', '/openapi/v2', '/openapi/v3']) {
    const warm = await raw(levee.url.origin, path, env.tokens.bob);
    assert.equal(warm.status, 200, path);
    const [direct, through] = await Promise.all([raw(env.server, path, undefined), raw(levee.url.origin, path, undefined)]);
    assert.equal(direct.status, 403, path);
    assert.equal(through.status, 403, path);
    assert.deepEqual(JSON.parse(through.body.toString()), JSON.parse(direct.body.toString()));
  }
  // /version is public; it is not discovery and is forwarded, and anonymous gets it.
  assert.equal((await raw(levee.url.origin, '/version', undefined)).status, 200);
});

test('repeated discovery requests reach the apiserver at most once per TTL, revalidated with 304', async () => {
  // One thread: each keeps its own discovery cache (README, "Workers"), fetched once per TTL.
  const l = await startLevee({ kubeconfig: env.kubeconfig, tls: env.leveeServing, extra: ['--workers', '1', '--cache', 'configmaps', '--discovery-cache-ttl', '1s'] });
  try {
    const fetched = (code: string) => metric(l.url.origin, new RegExp(`^levee_discovery_upstream_requests_total\\{code="${code}"\\} (\\d+)`));
    const started = Date.now();
    let answered = 0;
    while (Date.now() - started < 3_200) {
      const round = await Promise.all(Array.from({ length: 10 }, () => raw(l.url.origin, '/apis', env.tokens.alice, { accept: AGGREGATED })));
      for (const r of round) assert.equal(r.status, 200);
      answered += round.length;
      await new Promise((r) => setTimeout(r, 50));
    }
    const full = await fetched('200');
    const unchanged = await fetched('304');
    assert.equal(full, 1, 'the document did not change: fetched whole once');
    assert.ok(unchanged >= 1, 'revalidated with If-None-Match');
    // One fetch, then at most one revalidation per second of the run (and one for a round that straddles).
    assert.ok(full + unchanged <= 5, `${full + unchanged} upstream requests for ${answered} answers`);
  } finally {
    await l.stop();
  }
});

test('kubectl through Levee with the discovery cache: api-resources, get, explain', async () => {
  const viaLevee = writeKubeconfig(levee.url.href, env.caFile, env.tokens.admin);
  await createNamespace(env, agent, ns);
  // A fresh disk cache each time, so kubectl asks for discovery rather than reading it from disk.
  const k = (kc: string, args: string[]) => kubectl(env.kubectl, kc, ['--cache-dir', tempDir('levee-disc-'), ...args]);
  const before = await metric(levee.url.origin, /^levee_request_total\{verb="GET",group="",resource="",subresource="",source="cache",code="200"\} (\d+)/);
  for (const args of [['api-resources'], ['api-resources', '--api-group', 'apps', '-o', 'wide'], ['get', 'configmaps', '-n', ns], ['explain', 'pods.spec.containers.resources'], ['explain', 'deployments.spec.strategy', '--api-version', 'apps/v1']]) {
    const [a, b] = await Promise.all([k(viaLevee, args), k(env.kubeconfig, args)]);
    assert.equal(a.code, 0, `${args.join(' ')}: ${a.stderr}`);
    assert.equal(a.code, b.code);
    // The two run at once, and an age printed on either side of a second's turn differs by one.
    const ages = (out: string): string => out.replace(/ +\d+[smhd]$/gm, ' <age>');
    assert.equal(ages(a.stdout), ages(b.stdout), args.join(' '));
  }
  const after = await metric(levee.url.origin, /^levee_request_total\{verb="GET",group="",resource="",subresource="",source="cache",code="200"\} (\d+)/);
  assert.ok(after > before, 'kubectl\'s discovery was answered from the cache');
});

test('identical concurrent GETs through Levee cause one upstream request', async () => {
  const admin = env.tokens.admin;
  if ((await raw(env.server, `/api/v1/namespaces/${ns}`, admin)).status === 404) {
    await createNamespace(env, agent, ns);
  }
  // Podtemplates are not cached (so reads are forwarded), and no other test reads them (only the
  // namespace controller, in namespaces being deleted). About 2 MB: long enough upstream to overlap.
  const filler = 'x'.repeat(40_000);
  await Promise.all(
    Array.from({ length: 50 }, (_, i) =>
      send('POST', `${env.server}/api/v1/namespaces/${ns}/podtemplates`, agent, admin, {
        metadata: { name: `t-${i}`, annotations: { filler } },
        template: { spec: { containers: [{ name: 'c', image: 'registry.example/c:1' }] } },
      }),
    ),
  );
  const upstreamLists = () => metric(env.server, /^apiserver_request_total\{[^}]*resource="podtemplates"[^}]*verb="LIST"[^}]*\} (\d+)/);
  const saved = () => metric(levee.url.origin, /^levee_upstream_requests_coalesced_total (\d+)/);
  const path = `/api/v1/namespaces/${ns}/podtemplates`;
  // alice may not list podtemplates: every answer is the apiserver's 403 for her, shared or not.
  const refusal = (await raw(env.server, path, env.tokens.alice, { accept: 'application/json' })).body.toString();
  for (const a of await Promise.all(Array.from({ length: 20 }, () => raw(levee.url.origin, path, env.tokens.alice, { accept: 'application/json' })))) {
    assert.equal(a.status, 403);
    assert.equal(a.body.toString(), refusal);
  }
  const items = (a: Raw) => JSON.stringify((JSON.parse(a.body.toString()) as { items: unknown[] }).items);
  const [lists0, saved0] = [await upstreamLists(), await saved()];
  const asAdmin = await Promise.all(Array.from({ length: 20 }, () => raw(levee.url.origin, path, admin, { accept: 'application/json' })));
  const lists1 = await upstreamLists();
  const savedAdmin = (await saved()) - saved0;
  for (const a of asAdmin) {
    assert.equal(a.status, 200);
    assert.equal(items(a), items(asAdmin[0]!));
  }
  assert.equal((JSON.parse(asAdmin[0]!.body.toString()) as { items: unknown[] }).items.length, 50);
  assert.ok(savedAdmin >= 10, `only ${savedAdmin} of 20 reads shared an upstream request`);
  // The reads that were not shared reached the apiserver. At least: the namespace controller lists
  // podtemplates too, in every namespace other tests delete meanwhile.
  assert.ok(lists1 - lists0 >= 20 - savedAdmin);

  // Past the size bound every read goes upstream itself.
  const small = await startLevee({ kubeconfig: env.kubeconfig, tls: env.leveeServing, extra: ['--cache', 'configmaps', '--coalesce-max-bytes', '1000'] });
  try {
    const l0 = await upstreamLists();
    const big = await Promise.all(Array.from({ length: 10 }, () => raw(small.url.origin, path, admin, { accept: 'application/json' })));
    for (const a of big) assert.equal(items(a), items(asAdmin[0]!));
    assert.equal(await metric(small.url.origin, /^levee_upstream_requests_coalesced_total (\d+)/), 0);
    assert.ok((await upstreamLists()) - l0 >= 10);
  } finally {
    await small.stop();
  }
});
