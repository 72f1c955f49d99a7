// Levee's own small requests to the upstream (discovery, probes), with its own identity. Bodies
// here are small JSON documents; large bodies are never read through this.
import type { UpstreamPools } from './pools.ts';

export class UpstreamStatusError extends Error {
  readonly code: number;
  readonly reason: string;
  constructor(code: number, reason: string, message: string) {
    super(message);
    this.code = code;
    this.reason = reason;
  }
}

const MAX_SMALL_BODY = 16 * 1024 * 1024;

/** `accept` names the JSON media type the path serves (the apiserver's JWKS is only application/jwk-set+json). */
export async function getJson<T>(pools: UpstreamPools, path: string, signal?: AbortSignal, accept = 'application/json'): Promise<T> {
  const creds = await pools.upstream.ownCredentials();
  const headers: Record<string, string> = { accept, 'user-agent': 'levee' };
  if (creds.authorization) headers.authorization = creds.authorization;
  const res = await pools.get('own', 'request').request({
    method: 'GET',
    path: pools.upstream.pathPrefix + path,
    headers,
    signal,
  });
  const text = await res.body.text();
  if (text.length > MAX_SMALL_BODY) throw new Error(`${path}: answer too large for a small request`);
  if (res.statusCode !== 200) throw statusError(res.statusCode, text, path);
  return JSON.parse(text) as T;
}

/** POSTs a small JSON document (a review) as Levee itself and returns the created object. */
export async function postJson<T>(pools: UpstreamPools, path: string, body: unknown, signal?: AbortSignal): Promise<T> {
  const creds = await pools.upstream.ownCredentials();
  const headers: Record<string, string> = { accept: 'application/json', 'content-type': 'application/json', 'user-agent': 'levee' };
  if (creds.authorization) headers.authorization = creds.authorization;
  const res = await pools.get('own', 'request').request({
    method: 'POST',
    path: pools.upstream.pathPrefix + path,
    headers,
    body: JSON.stringify(body),
    signal,
  });
  const text = await res.body.text();
  if (text.length > MAX_SMALL_BODY) throw new Error(`${path}: answer too large for a small request`);
  if (res.statusCode !== 200 && res.statusCode !== 201) throw statusError(res.statusCode, text, path);
  return JSON.parse(text) as T;
}

export function statusError(code: number, body: string, path: string): UpstreamStatusError {
  try {
    const s = JSON.parse(body) as { reason?: string; message?: string };
    return new UpstreamStatusError(code, s.reason ?? '', `${path}: ${code} ${s.message ?? ''}`);
  } catch {
    return new UpstreamStatusError(code, '', `${path}: ${code}`);
  }
}
