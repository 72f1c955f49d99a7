// Progress of a long sync in the logs. A first list of every pod of a large cluster takes minutes and
// gigabytes; an operator watching Levee start must see that it is moving, how fast, and which
// resource it is waiting for. The counts are read on a timer, never logged per object.
import type { Logger } from '../log/logger.ts';

export interface SyncCounts {
  objects: number;
  bytes: number;
}

export const PROGRESS_INTERVAL_MS = 5_000;

/** Rates over `seconds`, rounded for a log line. */
export function rates(counts: SyncCounts, seconds: number): { objectsPerSecond: number; bytesPerSecond: number } {
  if (seconds <= 0) return { objectsPerSecond: 0, bytesPerSecond: 0 };
  return { objectsPerSecond: Math.round(counts.objects / seconds), bytesPerSecond: Math.round(counts.bytes / seconds) };
}

/**
 * Logs "syncing" with the objects and bytes received so far and the rate every `intervalMs` until
 * stopped. `read` is asked only then, so the sync itself pays nothing.
 */
export function reportProgress(
  log: Logger,
  via: string,
  read: () => SyncCounts,
  intervalMs = PROGRESS_INTERVAL_MS,
  now: () => number = () => performance.now(),
): () => void {
  const started = now();
  const timer = setInterval(() => {
    const counts = read();
    const seconds = (now() - started) / 1000;
    log.info({ via, ...counts, seconds: Math.round(seconds * 10) / 10, ...rates(counts, seconds) }, 'syncing');
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
