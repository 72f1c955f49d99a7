// The replica's string table: what it keeps and its bound; and an object revived through it keeps
// every value it had.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MessageChannel } from 'node:worker_threads';
import { StringTable } from '../../src/cache/strings.ts';
import { revive } from '../../src/cache/replica.ts';
import { sharedCopy } from '../../src/reflector/decode.ts';
import type { CachedObject } from '../../src/store/object.ts';

test('a string is kept once, a long one never, and the table starts again at its bound', () => {
  const t = new StringTable();
  assert.equal(t.intern('node-1'), 'node-1');
  assert.equal(t.intern(['node', '1'].join('-')), 'node-1');
  assert.equal(t.size, 1);
  const long = 'x'.repeat(65);
  assert.equal(t.intern(long), long);
  assert.equal(t.size, 1);
  for (let i = 0; t.size < 65_536; i++) t.intern(`ip-${i}`);
  assert.equal(t.size, 65_536);
  assert.equal(t.intern('after-the-bound'), 'after-the-bound');
  assert.equal(t.size, 1);
});

test('an object revived from a structured clone has its labels, fields and bytes as the owner had them', async () => {
  const owner: CachedObject = {
    key: '/ns/p',
    namespace: 'ns',
    name: 'p',
    resourceVersion: 7,
    labels: { app: 'web', tier: 'front' },
    fields: { 'metadata.name': 'p', 'metadata.namespace': 'ns', 'spec.nodeName': 'node-1', 'status.phase': 'Running' },
    item: sharedCopy(Buffer.from('{"metadata":{"name":"p"}}')),
    typed: true,
  };
  const { port1, port2 } = new MessageChannel();
  const received = new Promise<CachedObject[]>((resolve) => port2.once('message', resolve));
  port1.postMessage([owner, { ...owner, key: '/ns/q', name: 'q', fields: { ...owner.fields, 'metadata.name': 'q' } }]);
  const strings = new StringTable();
  const [a, b] = (await received).map((o) => revive(o, strings));
  port1.close();
  for (const [o, name] of [[a!, 'p'], [b!, 'q']] as const) {
    assert.equal(o.name, name);
    assert.equal(o.namespace, 'ns');
    assert.deepEqual(o.labels, owner.labels);
    assert.deepEqual(o.fields, { ...owner.fields, 'metadata.name': name });
    assert.ok(Buffer.isBuffer(o.item));
    assert.equal(o.item.toString(), '{"metadata":{"name":"p"}}');
  }
  // The owner's shared memory, not a copy: what the owner's view holds, the replica's reads.
  owner.item[0] = 0x20;
  assert.equal(a!.item[0], 0x20);
  assert.equal(b!.item[0], 0x20);
  // ns, web, front, node-1, Running: each once; the names are the objects' own.
  assert.equal(strings.size, 5);
});
