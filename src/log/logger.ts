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

export function createLogger(level: LevelWithSilent = 'info', destination?: NodeJS.WritableStream): Logger {
  return pino(
    { level, redact: { paths: REDACT_PATHS, censor: '[REDACTED]' }, base: { component: 'levee' } },
    destination ?? pino.destination({ sync: false }),
  );
}
