import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PerformanceObserver } from 'node:perf_hooks';
import { Registry } from 'prom-client';
import { GatewayMetrics, metricVerb } from '../../src/metrics/metrics.ts';
import { collectRuntimeMetrics } from '../../src/metrics/runtime.ts';

test('metric verbs mirror the apiserver', () => {
  assert.equal(metricVerb('list', 'GET', undefined, false), 'LIST');
  assert.equal(metricVerb('watch', 'GET', undefined, false), 'WATCH');
  assert.equal(metricVerb('patch', 'PATCH', 'application/apply-patch+yaml', false), 'APPLY');
  assert.equal(metricVerb('patch', 'PATCH', 'application/merge-patch+json', false), 'PATCH');
  assert.equal(metricVerb('create', 'POST', undefined, true), 'CONNECT');
  assert.equal(metricVerb('deletecollection', 'DELETE', undefined, false), 'DELETE');
});

test('path-derived label values are bounded', () => {
  const m = new GatewayMetrics();
  assert.equal(m.labels('GET', '', 'pods', '', 'upstream').resource, 'pods');
  assert.equal(m.labels('GET', '', 'Bad%Name', '', 'upstream').resource, 'other');
  for (let i = 0; i < 600; i++) m.labels('GET', '', `r${i}`, '', 'upstream');
  assert.equal(m.labels('GET', '', 'r599', '', 'upstream').resource, 'other');
  assert.equal(m.labels('GET', '', 'pods', '', 'upstream').resource, 'pods');
});

test('with threads, a scrape on any of them adds up every thread\'s series; process-wide ones come from the main thread only', async () => {
  // Two GatewayMetrics on one BroadcastChannel, as the main thread and a worker keep them.
  const main = new GatewayMetrics({ threads: 2 });
  const worker = new GatewayMetrics({ threads: 2, worker: true });
  try {
    main.forwards.inc({ reason: 'test' }, 2);
    worker.forwards.inc({ reason: 'test' }, 3);
    for (const scraped of [await main.render(), await worker.render()]) {
      assert.match(scraped, /^levee_read_forwarded_total\{reason="test"\} 5$/m);
      assert.match(scraped, /^levee_build_info\{[^}]*\} 1$/m, 'build info once, not summed');
      assert.equal(scraped.match(/^process_start_time_seconds /gm)?.length, 1);
    }
  } finally {
    main.close();
    worker.close();
  }
});

test('the runtime metrics are all there, and every garbage collection is counted, not one per observer callback', async () => {
  const registry = new Registry();
  collectRuntimeMetrics(registry);
  const names = (await registry.getMetricsAsJSON()).map((m) => m.name);
  for (const name of ['process_cpu_seconds_total', 'process_resident_memory_bytes', 'nodejs_eventloop_lag_p99_seconds', 'nodejs_heap_size_used_bytes', 'nodejs_version_info', 'nodejs_gc_duration_seconds']) {
    assert.ok(names.includes(name), `${name} is collected`);
  }

  // An independent observer sees every collection, and how many were handed over at once.
  let seen = 0;
  let callbacks = 0;
  const observer = new PerformanceObserver((list) => {
    callbacks++;
    seen += list.getEntries().length;
  });
  observer.observe({ entryTypes: ['gc'] });
  const count = async (): Promise<number> => {
    const m = (await registry.getMetricsAsJSON()).find((x) => x.name === 'nodejs_gc_duration_seconds')!;
    return (m.values as { metricName?: string; value: number }[]).filter((v) => v.metricName === 'nodejs_gc_duration_seconds_count').reduce((a, v) => a + v.value, 0);
  };
  const before = await count();
  // Enough garbage in each turn for several collections between two observer callbacks.
  for (let turn = 0; turn < 20; turn++) {
    let keep: object[] = [];
    for (let i = 0; i < 300_000; i++) keep.push({ i, s: `x${i}` });
    keep = [];
    assert.equal(keep.length, 0);
    await new Promise((resolve) => setImmediate(resolve));
  }
  await new Promise((resolve) => setTimeout(resolve, 50));
  observer.disconnect();
  const counted = (await count()) - before;
  assert.ok(seen > callbacks, `collections came in batches (${seen} in ${callbacks} callbacks)`);
  assert.ok(counted >= seen, `every collection is in the histogram: ${counted} of ${seen}`);
});
