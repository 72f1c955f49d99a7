// Writing Levee's own answers. Status errors go out exactly as the apiserver writes them.
import { encodeStatus, encodeStatusAs, type StatusEncoding } from '../api/status.ts';
import type { Status } from '../api/types.ts';
import type { DownstreamResponse } from './downstream.ts';

/** Writes a Status: compact JSON, or as the client's request negotiates it (`how`). */
export function writeStatus(res: DownstreamResponse, status: Status, how?: StatusEncoding): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const { contentType, body } = how ? encodeStatusAs(status, how) : { contentType: 'application/json', body: encodeStatus(status) };
  const headers: Record<string, string> = {
    'content-type': contentType,
    'content-length': String(body.length),
    'cache-control': 'no-cache, private',
  };
  const retry = status.details?.retryAfterSeconds;
  if (retry) headers['retry-after'] = String(retry);
  res.writeHead(status.code, headers);
  res.end(body);
}

export function writeText(res: DownstreamResponse, code: number, body: string, contentType = 'text/plain; charset=utf-8'): void {
  res.writeHead(code, {
    'content-type': contentType,
    'content-length': String(Buffer.byteLength(body)),
    'cache-control': 'no-cache, private',
    'x-content-type-options': 'nosniff',
  });
  res.end(body);
}
