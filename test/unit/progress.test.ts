import { test, mock } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { createLogger } from '../../src/log/logger.ts';
import { rates, reportProgress } from '../../src/reflector/progress.ts';

function capture(): { lines: Record<string, unknown>[]; stream: Writable } {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString().split('\n')) if (l) lines.push(JSON.parse(l) as Record<string, unknown>);
      done();
    },
  });
  return { lines, stream };
}

test('a sync in progress is logged with what arrived so far and the rate, until it stops', () => {
  mock.timers.enable({ apis: ['setInterval'] });
  try {
    const { lines, stream } = capture();
    const log = createLogger('info', stream).child({ resource: 'pods' });
    let clock = 0;
    const counts = { objects: 0, bytes: 0 };
    const stop = reportProgress(log, 'watch-list', () => ({ ...counts }), 5_000, () => clock);
    counts.objects = 1_000;
    counts.bytes = 4_000_000;
    clock = 5_000;
    mock.timers.tick(5_000);
    counts.objects = 3_000;
    counts.bytes = 12_000_000;
    clock = 10_000;
    mock.timers.tick(5_000);
    stop();
    clock = 15_000;
    mock.timers.tick(5_000);
    assert.deepEqual(
      lines.map((l) => [l.msg, l.resource, l.via, l.objects, l.bytes, l.seconds, l.objectsPerSecond, l.bytesPerSecond]),
      [
        ['syncing', 'pods', 'watch-list', 1_000, 4_000_000, 5, 200, 800_000],
        ['syncing', 'pods', 'watch-list', 3_000, 12_000_000, 10, 300, 1_200_000],
      ],
    );
  } finally {
    mock.timers.reset();
  }
});

test('rates of an instant sync are zero rather than infinite', () => {
  assert.deepEqual(rates({ objects: 5, bytes: 10 }, 0), { objectsPerSecond: 0, bytesPerSecond: 0 });
  assert.deepEqual(rates({ objects: 5, bytes: 10 }, 2), { objectsPerSecond: 3, bytesPerSecond: 5 });
});
