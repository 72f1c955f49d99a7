// Gives back heap that a burst left behind, once the process is idle. A burst of thousands of
// requests at once (a DaemonSet's agents opening their watches after a restart) promotes much of
// its short-lived garbage into the old generation, between the long-lived objects of the watches
// it opened. The next major collection frees the garbage, but the pages stay, each holding a few
// live objects; V8 compacts them only in a memory-reducing collection, which its memory reducer
// starts only on a heap it sees as idle and not after every burst. Measured with 10,000 watches
// opened at once and then idle: the heap kept 60–70 MB of empty space for minutes, 13–14 KiB of
// RSS per watch; one memory-reducing collection (about 0.2 s) brought it to 7.4 KiB. Go's runtime
// returns such memory in the background for the same reason.
//
// Only when idle: the collection stops the event loop, so a trim waits for a quiet moment (a loop
// under 5 % busy that served no request and sent no watch event for a whole check,
// http/activity.ts) and is never taken more than once a minute.
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { performance, type EventLoopUtilization } from 'node:perf_hooks';
import { runInNewContext } from 'node:vm';
import { takeServed } from './http/activity.ts';
import type { Logger } from './log/logger.ts';

const CHECK_EVERY_MS = 5_000;
const MIN_INTERVAL_MS = 60_000;

export interface HeapState {
  /** Heap V8 holds (total_heap_size). */
  total: number;
  /** Of it, what objects use, garbage not yet collected included (used_heap_size). */
  used: number;
}

/** Idle enough (event-loop utilization over the last check) for a pause nobody waits on. */
const IDLE_UTILIZATION = 0.05;
/** Empty heap worth giving back: this much, and this share of what V8 holds. */
const MIN_EMPTY_BYTES = 16 * 1024 * 1024;
const MIN_EMPTY_SHARE = 0.15;

/**
 * Whether to trim now: a quiet loop that served nothing since the last check, enough empty heap,
 * and no trim in the last minute.
 */
export function shouldTrim(heap: HeapState, utilization: number, served: number, sinceLastTrimMs: number): boolean {
  const empty = heap.total - heap.used;
  return (
    utilization < IDLE_UTILIZATION &&
    served === 0 &&
    empty >= MIN_EMPTY_BYTES &&
    empty >= MIN_EMPTY_SHARE * heap.total &&
    sinceLastTrimMs >= MIN_INTERVAL_MS
  );
}

type Collect = (options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

/**
 * Node's gc(), taken without --expose-gc so that no dependency finds it on globalThis. Its
 * 'last-resort' flavor is V8's memory-reducing collection (the one a low-memory notification runs).
 */
function collector(): Collect {
  // V8's flags are the process's: a worker thread starting at the same moment may turn the flag
  // off between this thread's two steps, and the new context then has no gc. Asked again, it has.
  for (let attempt = 0; ; attempt++) {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('typeof gc === "function" ? gc : undefined') as Collect | undefined;
    setFlagsFromString('--no-expose-gc');
    if (gc) return gc;
    if (attempt === 100) throw new Error('V8 did not expose gc to a new context');
  }
}

/** Starts the idle trim; returns its stop. */
export function startHeapTrim(logger: Logger): () => void {
  const gc = collector();
  let lastTrim = -Infinity;
  let elu: EventLoopUtilization = performance.eventLoopUtilization();
  const timer = setInterval(() => {
    const now = performance.eventLoopUtilization();
    const utilization = performance.eventLoopUtilization(now, elu).utilization;
    elu = now;
    const served = takeServed();
    const stats = getHeapStatistics();
    const heap = { total: stats.total_heap_size, used: stats.used_heap_size };
    if (!shouldTrim(heap, utilization, served, performance.now() - lastTrim)) return;
    const started = performance.now();
    gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
    lastTrim = performance.now();
    const after = getHeapStatistics();
    logger.debug(
      { pauseMs: Math.round(lastTrim - started), heapMB: mb(heap.total), heapAfterMB: mb(after.total_heap_size), usedAfterMB: mb(after.used_heap_size) },
      'idle: gave back empty heap',
    );
    // The pause is no part of the next interval's utilization.
    elu = performance.eventLoopUtilization();
  }, CHECK_EVERY_MS);
  timer.unref();
  return () => clearInterval(timer);
}

const mb = (bytes: number): number => Math.round(bytes / 1e5) / 10;
