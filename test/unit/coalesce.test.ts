import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { OutgoingHttpHeaders } from 'node:http';
import { coalescingKey, ReadCoalescer } from '../../src/upstream/coalesce.ts';
import { isPrettyPrint, prettyPrintingAgent } from '../../src/api/negotiation.ts';
import { isDiscoveryPath } from '../../src/discovery/discovery.ts';

const token = (t: string) => ['Authorization', `Bearer ${t}`, 'Accept', 'application/json'];
const asClient = { identity: 'client' as const };

test('identical reads share a key; identity, query and representation keep them apart', () => {
  const base = coalescingKey('GET', '/api/v1/nodes/n1', token('a'), asClient);
  assert.ok(base);
  assert.equal(coalescingKey('GET', '/api/v1/nodes/n1', [...token('a'), 'User-Agent', 'agent/1', 'Audit-Id', 'x'], asClient), base);
  assert.notEqual(coalescingKey('GET', '/api/v1/nodes/n1', token('b'), asClient), base);
  assert.notEqual(coalescingKey('GET', '/api/v1/nodes/n1?resourceVersion=0', token('a'), asClient), base);
  assert.notEqual(coalescingKey('GET', '/api/v1/nodes/n1', ['Authorization', 'Bearer a', 'Accept', 'application/vnd.kubernetes.protobuf'], asClient), base);
  assert.notEqual(coalescingKey('GET', '/api/v1/nodes/n1', [...token('a'), 'Accept-Encoding', 'gzip'], asClient), base);
  assert.notEqual(coalescingKey('GET', '/api/v1/nodes/n1', [...token('a'), 'Impersonate-User', 'bob'], asClient), base);
  assert.notEqual(coalescingKey('GET', '/api/v1/nodes/n1', [...token('a'), 'If-None-Match', '"x"'], asClient), base);
  // The apiserver indents JSON for curl: other bytes.
  assert.notEqual(coalescingKey('GET', '/api/v1/nodes/n1', [...token('a'), 'User-Agent', 'curl/8.5'], asClient), base);
  // Certificate users impersonated by Levee: the impersonated user is the identity.
  const alice = coalescingKey('GET', '/api/v1/nodes/n1', [], { identity: 'own', impersonate: ['Impersonate-User', 'alice'] });
  assert.notEqual(alice, coalescingKey('GET', '/api/v1/nodes/n1', [], { identity: 'own', impersonate: ['Impersonate-User', 'bob'] }));
  assert.notEqual(alice, coalescingKey('GET', '/api/v1/nodes/n1', [], { identity: 'own' }));
  assert.doesNotMatch(base, /Bearer|a$/, 'the key does not hold the credential');
});

test('writes and requests with a body are never coalesced', () => {
  assert.equal(coalescingKey('POST', '/api/v1/namespaces', token('a'), asClient), undefined);
  assert.equal(coalescingKey('HEAD', '/api/v1/namespaces', token('a'), asClient), undefined);
  assert.equal(coalescingKey('GET', '/api/v1/namespaces', [...token('a'), 'Content-Length', '4'], asClient), undefined);
  assert.equal(coalescingKey('GET', '/api/v1/namespaces', [...token('a'), 'Transfer-Encoding', 'chunked'], asClient), undefined);
  assert.ok(coalescingKey('GET', '/api/v1/namespaces', [...token('a'), 'Content-Length', '0'], asClient));
});

class FakeResponse extends EventEmitter {
  statusCode = 0;
  headers: OutgoingHttpHeaders = {};
  body: Buffer | undefined;
  headersSent = false;
  destroyed = false;
  writableFinished = false;
  writeHead(code: number, headers?: OutgoingHttpHeaders): void {
    this.statusCode = code;
    this.headers = headers ?? {};
    this.headersSent = true;
  }
  write(): boolean {
    return true;
  }
  end(chunk?: Buffer | string): void {
    this.body = chunk === undefined ? Buffer.alloc(0) : Buffer.from(chunk);
    this.writableFinished = true;
  }
  destroy(): void {
    this.destroyed = true;
  }
}

test('followers get the leader\'s whole answer with their own Audit-Id, and count as saved', async () => {
  const c = new ReadCoalescer(1024);
  const lead = c.join('k');
  assert.equal(lead.role, 'leader');
  const f1 = c.join('k');
  const f2 = c.join('k');
  assert.equal(f1.role, 'follower');
  assert.equal(f2.role, 'follower');
  const r1 = new FakeResponse();
  const r2 = new FakeResponse();
  const answered = Promise.all([c.follow(f1.role === 'follower' ? f1.answer : Promise.resolve(undefined), r1, 'id-1'), c.follow(f2.role === 'follower' ? f2.answer : Promise.resolve(undefined), r2, 'id-2')]);
  if (lead.role !== 'leader') throw new Error('no leader');
  lead.flight.settle({ statusCode: 200, headers: { 'content-type': 'application/json', 'audit-id': 'upstream' }, body: Buffer.from('{"kind":"Node"}') });
  assert.deepEqual(await answered, [200, 200]);
  assert.equal(r1.body?.toString(), '{"kind":"Node"}');
  assert.equal(r1.headers['audit-id'], 'id-1');
  assert.equal(r2.headers['audit-id'], 'id-2');
  assert.equal(r1.headers['content-length'], '15');
  assert.equal(c.saved, 2);
  // Settled: the next identical read asks the apiserver again.
  assert.equal(c.inFlight, 0);
  assert.equal(c.join('k').role, 'leader');
});

test('an answer that could not be shared sends each follower upstream itself', async () => {
  const c = new ReadCoalescer(1024);
  const lead = c.join('k');
  const f = c.join('k');
  if (lead.role !== 'leader' || f.role !== 'follower') throw new Error('roles');
  lead.flight.settle(undefined);
  // Settling twice (the chain settles every flight when a request ends) changes nothing.
  lead.flight.settle({ statusCode: 200, headers: {}, body: Buffer.alloc(1) });
  const r = new FakeResponse();
  assert.equal(await c.follow(f.answer, r, 'id'), undefined);
  assert.equal(r.headersSent, false);
  assert.equal(c.saved, 0);
});

test('different keys fly separately', () => {
  const c = new ReadCoalescer(1024);
  assert.equal(c.join('a').role, 'leader');
  assert.equal(c.join('b').role, 'leader');
  assert.equal(c.inFlight, 2);
});

test('the apiserver\'s pretty printing: the pretty parameter, else the agent', () => {
  assert.ok(prettyPrintingAgent('curl/8.5.0'));
  assert.ok(prettyPrintingAgent('Wget/1.21'));
  assert.ok(prettyPrintingAgent('Mozilla/5.0 (X11)'));
  assert.ok(!prettyPrintingAgent('wget/1.21'), 'case matters, as in Go\'s strings.HasPrefix');
  assert.ok(!prettyPrintingAgent('kubectl/v1.37.1 (linux/amd64) kubernetes/abc'));
  assert.ok(!prettyPrintingAgent(undefined));
  const q = (s: string) => new URLSearchParams(s);
  assert.ok(isPrettyPrint(q('pretty=true'), 'kubectl/v1.37.1'));
  assert.ok(isPrettyPrint(q('pretty=1'), undefined));
  assert.ok(!isPrettyPrint(q('pretty=false'), 'curl/8.5.0'), 'a pretty parameter decides');
  assert.ok(!isPrettyPrint(q('pretty=yes'), 'curl/8.5.0'), 'strconv.ParseBool cannot read it: false');
  assert.ok(isPrettyPrint(q('pretty='), 'curl/8.5.0'), 'an empty one leaves it to the agent');
  assert.ok(isPrettyPrint(q(''), 'Mozilla/5.0 (X11)'), 'browsers get indented JSON');
});

test('discovery and OpenAPI paths', () => {
  for (const p of ['/api', '/apis', '/api/v1', '/apis/apps', '/apis/apps/v1', '/openapi/v2', '/openapi/v3', '/openapi/v3/apis/apps/v1', '/openapi/v3/api/v1']) {
    assert.ok(isDiscoveryPath(p), p);
  }
  for (const p of ['/api/v1/pods', '/apis/apps/v1/deployments', '/api/', '/apis/apps/v1/', '/openapi', '/openapi/v3/', '/version', '/healthz']) {
    assert.ok(!isDiscoveryPath(p), p);
  }
});
