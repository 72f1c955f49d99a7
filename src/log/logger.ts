// Structured logs. Credentials never reach a log line: Levee logs no headers, and redaction guards
// the paths where a header object could still slip in.
import { pino, type Logger, type LevelWithSilent, type LoggerOptions } from 'pino';
import sonicBoom from 'sonic-boom';
import { LineBatch } from './linebatch.ts';

export type { Logger };

export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers["proxy-authorization"]',
  'req.headers.cookie',
  'headers.authorization',
  'headers["proxy-authorization"]',
  'headers.cookie',
  'res.headers["set-cookie"]',
  'authorization',
  'token',
];

// One write to stdout per log line cost about 0.4 ms of a cached LIST answer (measured with
// bench/list.ts and a CPU profile); lines are gathered into 8 KiB writes instead (linebatch.ts),
// and flushed at least every 250 ms so a quiet gateway's logs still appear promptly.
export const BUFFER_BYTES = 8 * 1024;
const FLUSH_INTERVAL_MS = 250;

/** Levee's pino options: its level, the redacted paths, the component name on every line. */
export function loggerOptions(level: LevelWithSilent): LoggerOptions {
  return { level, redact: { paths: REDACT_PATHS, censor: '[REDACTED]' }, base: { component: 'levee' } };
}

export function createLogger(level: LevelWithSilent = 'info', destination?: NodeJS.WritableStream): Logger {
  if (destination) return pino(loggerOptions(level), destination);
  // sonic-boom made here rather than by pino.destination(), whose exit hook ends the stream when
  // the event loop empties, before the lines still held in the batch could reach it.
  const out = new sonicBoom.SonicBoom({ fd: 1, sync: false });
  const stream = new LineBatch(out, BUFFER_BYTES);
  // Standard output that fails (its reader went away: EPIPE) ends the logs, not the process.
  out.on('error', (err: NodeJS.ErrnoException) => {
    stream.stop();
    if (err.code !== 'EPIPE') process.stderr.write(`levee: logs stopped: standard output failed: ${err.message}\n`);
  });
  const logger = pino(loggerOptions(level), stream);
  setInterval(() => stream.flush(), FLUSH_INTERVAL_MS).unref();
  // What is still held must not be lost when the process ends.
  // sonic-boom made synchronous first: handed to an idle sonic-boom, the last batch would start an
  // asynchronous write that the ending process never completes (3 runs in 30 lost it). `sync` is
  // the property its writes check each time (sonic-boom 4.2.1, pinned), not in its types.
  process.once('exit', () => {
    (out as typeof out & { sync: boolean }).sync = true;
    stream.flushSync();
  });
  return logger;
}
