// Structured logs. Credentials never reach a log line: Levee logs no headers, and redaction guards
// the paths where a header object could still slip in.
import { pino, type Logger, type LevelWithSilent } from 'pino';

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
// bench/list.ts and a CPU profile); lines are gathered into 8 KiB writes instead, and flushed at
// least every 250 ms so a quiet gateway's logs still appear promptly.
const BUFFER_BYTES = 8 * 1024;
const FLUSH_INTERVAL_MS = 250;

export function createLogger(level: LevelWithSilent = 'info', destination?: NodeJS.WritableStream): Logger {
  if (destination) {
    return pino({ level, redact: { paths: REDACT_PATHS, censor: '[REDACTED]' }, base: { component: 'levee' } }, destination);
  }
  const stream = pino.destination({ sync: false, minLength: BUFFER_BYTES });
  const logger = pino({ level, redact: { paths: REDACT_PATHS, censor: '[REDACTED]' }, base: { component: 'levee' } }, stream);
  setInterval(() => stream.flush(), FLUSH_INTERVAL_MS).unref();
  // What is still buffered must not be lost when the process ends.
  process.once('exit', () => stream.flushSync());
  return logger;
}
