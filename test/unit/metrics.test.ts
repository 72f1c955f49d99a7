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
