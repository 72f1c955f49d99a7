// What a client is told when the upstream apiserver cannot answer. A Status with 502, 503 or 504,
// as the apiserver's aggregator answers for an unreachable backend, never a dropped connection.
import { errors } from './undici.ts';
import { newBadGateway, newServiceUnavailable, newTimeout } from '../api/status.ts';
import type { Status } from '../api/types.ts';

const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'UND_ERR_DESTROYED',
]);

function codeOf(err: unknown): string | undefined {
  for (let e: unknown = err; e && typeof e === 'object'; e = (e as { cause?: unknown }).cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return undefined;
}

/** True when the error only says the client went away: nothing is left to answer. */
export function isClientAbort(err: unknown): boolean {
  return err instanceof errors.RequestAbortedError || (err instanceof Error && err.name === 'AbortError');
}

export function upstreamFailureStatus(err: unknown): Status {
  const code = codeOf(err) ?? 'unknown';
  if (err instanceof errors.ConnectTimeoutError || err instanceof errors.HeadersTimeoutError || code === 'ETIMEDOUT') {
    return newTimeout(`the upstream apiserver did not answer in time (${code})`);
  }
  if (UNAVAILABLE_CODES.has(code)) {
    return newServiceUnavailable(`the upstream apiserver is unavailable (${code})`);
  }
  return newBadGateway(`the upstream apiserver could not be reached: ${err instanceof Error ? err.message : String(err)}`);
}

/** The connection could not be made: nothing reached the upstream, so another endpoint may be tried. */
export function isConnectFailure(err: unknown): boolean {
  const code = codeOf(err);
  return err instanceof errors.ConnectTimeoutError || code === 'ECONNREFUSED' || code === 'EHOSTUNREACH' || code === 'ENETUNREACH' || code === 'ENOTFOUND' || code === 'EAI_AGAIN';
}
