import { test } from 'node:test';
import assert from 'node:assert/strict';
import { dealHand, FairQueue, RejectedError, type Grant } from '../../src/flow/fairqueue.ts';
import { classify, isExempt, limitsFrom, shareOf } from '../../src/flow/flowcontrol.ts';
import { WarmupBackoff } from '../../src/flow/warmup.ts';
import { parseRequestInfo } from '../../src/api/requestinfo.ts';

const opts = { seats: 2, queues: 8, handSize: 2, queueLength: 4, maxWaitMs: 60_000 };

test('shuffle sharding deals each flow the same distinct queues', () => {
  const hand = dealHand('system:serviceaccount:ns:agent-1', 64, 6);
  assert.deepEqual(hand, dealHand('system:serviceaccount:ns:agent-1', 64, 6));
  assert.equal(new Set(hand).size, 6);
  assert.ok(hand.every((i) => i >= 0 && i < 64));
  const hands = new Set(Array.from({ length: 200 }, (_, i) => dealHand(`user-${i}`, 64, 6).sort().join(',')));
  assert.ok(hands.size > 190, 'different flows rarely share a whole hand');
});

test('seats are granted at once while free, then in turn; a flood from one flow does not starve another', async () => {
  const q = new FairQueue({ ...opts, seats: 1 });
  const first = await q.acquire('a');
  assert.equal(q.inFlight, 1);
  const order: string[] = [];
  const grants: Grant[] = [];
  const waiting: Array<Promise<void>> = [];
  const ask = (flow: string) => waiting.push(q.acquire(flow).then((g) => void (order.push(flow), grants.push(g))));
  // Flow a queues 6 requests (spread over its hand of 2 queues); flow b then asks once.
  for (let i = 0; i < 6; i++) ask('a');
  ask('b');
  assert.equal(q.queued, 7);
  first.release();
  // One seat: each release hands it to the next queue in turn.
  while (order.length < 7) {
    await new Promise((r) => setImmediate(r));
    grants.shift()?.release();
  }
  await Promise.all(waiting);
  grants.forEach((g) => g.release());
  assert.ok(order.indexOf('b') <= 2, `b waited behind a's requests: ${order.join(' ')}`);
  assert.equal(q.inFlight, 0);
  assert.equal(q.queued, 0);
});

test('a full queue rejects at once, a long wait times out, a cancelled wait leaves its queue', async () => {
  const q = new FairQueue({ ...opts, seats: 1, queues: 1, handSize: 1, queueLength: 1, maxWaitMs: 30 });
  const g = await q.acquire('a');
  const queuedOne = q.acquire('a');
  await assert.rejects(q.acquire('a'), (e: unknown) => e instanceof RejectedError && e.why === 'queue-full');
  await assert.rejects(queuedOne, (e: unknown) => e instanceof RejectedError && e.why === 'timeout');
  const ac = new AbortController();
  const cancelled = q.acquire('b', ac.signal);
  ac.abort();
  await assert.rejects(cancelled, (e: unknown) => e instanceof RejectedError && e.why === 'cancelled');
  assert.equal(q.queued, 0);
  g.release();
  g.release();
  assert.equal(q.inFlight, 0, 'releasing twice frees one seat');
});

test('new limits take effect without a restart', async () => {
  const q = new FairQueue({ ...opts, seats: 1 });
  const a = await q.acquire('a');
  const b = q.acquire('b');
  assert.equal(q.queued, 1);
  q.reconfigure({ ...opts, seats: 2 });
  const granted = await b;
  assert.equal(q.inFlight, 2);
  a.release();
  granted.release();
});

test('classes and exemptions', () => {
  const info = (method: string, url: string) => parseRequestInfo(method, url);
  assert.equal(classify(info('GET', '/api/v1/pods'), false), 'read');
  assert.equal(classify(info('POST', '/api/v1/namespaces/a/pods'), false), 'mutating');
  assert.equal(classify(info('GET', '/api/v1/pods?watch=1'), true), 'long-running');
  const masters = { username: 'root', uid: '', groups: ['system:masters'], extra: {} };
  const agent = { username: 'agent', uid: '', groups: ['system:authenticated'], extra: {} };
  assert.equal(isExempt(info('GET', '/api/v1/pods'), masters), true);
  assert.equal(isExempt(info('GET', '/api/v1/pods'), agent), false);
  assert.equal(isExempt(info('PUT', '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/x'), agent), true);
  assert.equal(isExempt(info('GET', '/livez'), undefined), true);
  assert.equal(isExempt(info('GET', '/apis'), undefined), false);
  const limits = limitsFrom({ requests: { read: 0, mutating: 5, 'long-running': 7 }, upstream: { read: 1, mutating: 2, 'long-running': 3 }, queueWaitMs: 100, queueLength: 9 });
  assert.equal(limits.requests.read.seats, Infinity);
  assert.equal(limits.requests.mutating.seats, 5);
  assert.equal(limits.upstream['long-running'].queueLength, 9);
});

test('warm-up Retry-After grows with the rejections of that resource lately, and falls back once they stop', () => {
  let now = 0;
  const warmup = new WarmupBackoff(() => now);
  const waits = Array.from({ length: 350 }, () => warmup.retryAfter('/secrets'));
  assert.equal(waits[0], 1);
  assert.equal(waits[99], 1);
  assert.equal(waits[100], 2);
  assert.equal(waits[349], 4);
  // Another resource's crowd is its own.
  assert.equal(warmup.retryAfter('/pods'), 1);
  // It never advises more than 10 s.
  for (let i = 0; i < 5_000; i++) warmup.retryAfter('/secrets');
  assert.equal(warmup.retryAfter('/secrets'), 10);
  // Half a window later the older half still counts; a whole quiet window later nothing does.
  now += 6_000;
  assert.ok(warmup.retryAfter('/secrets') > 1);
  now += 20_000;
  assert.equal(warmup.retryAfter('/secrets'), 1);
});

test('threads share the process\'s seats: each gets its part rounded up, so together they hold at most one more each', () => {
  const limits = limitsFrom({ requests: { read: 50, mutating: 3, 'long-running': 0 }, upstream: { read: 5, mutating: 1, 'long-running': 7 }, queueWaitMs: 1000, queueLength: 10 });
  assert.deepEqual(shareOf(limits, 1), limits);
  const half = shareOf(limits, 2);
  assert.deepEqual(
    [half.requests.read.seats, half.requests.mutating.seats, half.requests['long-running'].seats, half.upstream.read.seats, half.upstream.mutating.seats, half.upstream['long-running'].seats],
    [25, 2, Infinity, 3, 1, 4],
  );
  assert.equal(half.requests.read.queueLength, 10, 'queues stay: each thread queues only its own clients');
  assert.equal(shareOf(limits, 16).upstream.read.seats, 1, 'never no seat at all');
});
