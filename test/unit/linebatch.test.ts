import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { LineBatch, type LineSink } from '../../src/log/linebatch.ts';
import { NODE_FLAGS } from '../../src/nodeflags.ts';

/** A sink that records what it is handed. */
function sink(): LineSink & { writes: string[]; syncs: number } {
  const s = {
    writes: [] as string[],
    syncs: 0,
    write(data: string): boolean {
      s.writes.push(data);
      return true;
    },
    flushSync(): void {
      s.syncs++;
    },
  };
  return s;
}

test('lines are held until a batch is full, then handed on as one string, in order', () => {
  const out = sink();
  const batch = new LineBatch(out, 30);
  batch.write('{"n":1}\n');
  batch.write('{"n":2}\n');
  batch.write('{"n":3}\n');
  assert.deepEqual(out.writes, [], 'under the batch size nothing goes out');
  batch.write('{"n":4}\n');
  assert.deepEqual(out.writes, ['{"n":1}\n{"n":2}\n{"n":3}\n{"n":4}\n']);
  batch.write('{"n":5}\n');
  assert.equal(out.writes.length, 1, 'the next batch starts empty');
});

test('flush hands on what is held; flushSync also flushes the sink', () => {
  const out = sink();
  const batch = new LineBatch(out, 1024);
  batch.flush();
  assert.deepEqual(out.writes, [], 'an empty batch writes nothing');
  batch.write('a\n');
  batch.flush();
  assert.deepEqual(out.writes, ['a\n']);
  batch.write('b\n');
  batch.write('c\n');
  batch.flushSync();
  assert.deepEqual(out.writes, ['a\n', 'b\nc\n']);
  assert.equal(out.syncs, 1);
});

test("Levee's logger writes every line to stdout, in order, those still held at exit included", () => {
  const script = `
    import { createLogger } from ${JSON.stringify(new URL('../../src/log/logger.ts', import.meta.url).href)};
    const logger = createLogger('info');
    for (let i = 0; i < 500; i++) logger.info({ i }, 'line');
  `;
  const r = spawnSync(process.execPath, [...NODE_FLAGS, '--input-type=module', '-e', script], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as { i: number; msg: string });
  assert.deepEqual(
    lines.map((l) => l.i),
    Array.from({ length: 500 }, (_, i) => i),
  );
});
