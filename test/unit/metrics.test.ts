import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GatewayMetrics, metricVerb } from '../../src/metrics/metrics.ts';

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
