// What a request log line costs Levee's serving thread: pino with sonic-boom gathering lines by
// itself (its minLength) against the lines gathered by src/log/linebatch.ts and handed to
// sonic-boom 8 KiB at a time. Lines shaped as src/serve/chain.ts writes them, into /dev/null.
// Each way runs in a fresh node process with Levee's Node flags (src/nodeflags.ts: a 1 MiB young
// generation), the two taking turns, so that collections are counted as Levee would have them.
//
//   node bench/micro/logline.ts [--lines 50000] [--runs 5]
//
// Reported per way: medians over the runs of CPU per line and of young-generation collections
// per 10,000 lines (each a scavenge of the young generation, what the garbage of every line adds up to).
import { spawnSync } from 'node:child_process';
import { openSync } from 'node:fs';
import { constants, PerformanceObserver } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { pino, type DestinationStream } from 'pino';
import { LineBatch } from '../../src/log/linebatch.ts';
import { BUFFER_BYTES, loggerOptions } from '../../src/log/logger.ts';
import { NODE_FLAGS } from '../../src/nodeflags.ts';
import { quantile } from '../lib/stats.ts';

const WAYS = { gathered: 'sonic-boom gathering 8 KiB (minLength)', batched: 'LineBatch, 8 KiB to sonic-boom' } as const;
type Way = keyof typeof WAYS;

const { values } = parseArgs({ options: { lines: { type: 'string', default: '50000' }, runs: { type: 'string', default: '5' }, child: { type: 'string' } } });
const LINES = Number(values.lines);

function destination(way: Way): DestinationStream {
  const dest = openSync('/dev/null', 'w');
  if (way === 'gathered') return pino.destination({ dest, sync: false, minLength: BUFFER_BYTES });
  return new LineBatch(pino.destination({ dest, sync: false }), BUFFER_BYTES);
}

async function child(way: Way): Promise<void> {
  const logger = pino(loggerOptions('info'), destination(way));
  let young = 0;
  const observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries() as { detail?: { kind?: number } }[]) if (e.detail?.kind === constants.NODE_PERFORMANCE_GC_MINOR) young++;
  });
  observer.observe({ entryTypes: ['gc'] });
  const log = (i: number): void =>
    logger.info(
      {
        requestId: `${(i * 2654435761) % 4294967296}-${i}`,
        user: `system:serviceaccount:agents:agent-${i % 2000}`,
        verb: 'watch',
        path: `/api/v1/pods?allowWatchBookmarks=true&fieldSelector=spec.nodeName%3Dnode-${i % 1000}&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&timeoutSeconds=${300 + (i % 300)}&watch=true`,
        resource: 'pods',
        namespace: undefined,
        code: 200,
        source: 'cache',
        latencyMs: (i % 5000) / 7,
      },
      'request',
    );
  // Warm-up, then the measured lines in slices that let the writes complete between them, as
  // requests do.
  for (let i = 0; i < 5000; i++) log(i);
  await new Promise((r) => setTimeout(r, 50));
  young = 0;
  const cpu = process.cpuUsage();
  for (let i = 0; i < LINES; i += 500) {
    for (let j = i; j < i + 500; j++) log(j);
    await new Promise((r) => setImmediate(r));
  }
  const used = process.cpuUsage(cpu);
  await new Promise((r) => setTimeout(r, 50));
  observer.disconnect();
  process.stdout.write(JSON.stringify({ cpuUsPerLine: (used.user + used.system) / LINES, youngPer10k: (young * 10_000) / LINES }));
}

if (values.child) {
  await child(values.child as Way);
} else {
  const runs: Record<Way, { cpuUsPerLine: number; youngPer10k: number }[]> = { gathered: [], batched: [] };
  for (let r = 0; r < Number(values.runs); r++) {
    for (const way of Object.keys(WAYS) as Way[]) {
      const out = spawnSync(process.execPath, [...NODE_FLAGS, import.meta.filename, '--child', way, '--lines', String(LINES)], { encoding: 'utf8' });
      if (out.status !== 0) throw new Error(out.stderr);
      runs[way].push(JSON.parse(out.stdout) as { cpuUsPerLine: number; youngPer10k: number });
    }
  }
  console.log(`${LINES} request log lines per run, ${values.runs} runs, medians:\n`);
  console.log('| way | CPU per line, µs | young collections per 10,000 lines |\n|---|---:|---:|');
  for (const way of Object.keys(WAYS) as Way[]) {
    console.log(`| ${WAYS[way]} | ${quantile(runs[way].map((x) => x.cpuUsPerLine), 0.5).toFixed(2)} | ${quantile(runs[way].map((x) => x.youngPer10k), 0.5).toFixed(1)} |`);
  }
}
