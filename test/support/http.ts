// Plain HTTP(S) helpers for tests: undici with the test CA, bodies read as the test needs them.
import { readFileSync } from 'node:fs';
import { Agent, request, type Dispatcher } from 'undici';

export function agentFor(caFile: string): Agent {
  return new Agent({ connect: { ca: readFileSync(caFile) }, allowH2: false });
}

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

export async function get(url: string, dispatcher: Dispatcher, token?: string, headers: Record<string, string> = {}): Promise<Answer> {
  const h: Record<string, string> = { accept: 'application/json', ...headers };
  if (token) h.authorization = `Bearer ${token}`;
  const res = await request(url, { dispatcher, headers: h });
  return { status: res.statusCode, headers: res.headers, body: await res.body.text() };
}

export async function send(
  method: 'POST' | 'PUT' | 'PATCH' | 'DELETE',
  url: string,
  dispatcher: Dispatcher,
  token: string,
  body?: unknown,
  contentType = 'application/json',
): Promise<Answer> {
  const res = await request(url, {
    method,
    dispatcher,
    headers: { authorization: `Bearer ${token}`, 'content-type': contentType, accept: 'application/json' },
    body: body === undefined ? null : typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.statusCode, headers: res.headers, body: await res.body.text() };
}

/** A random lower-case suffix for names that must not collide between runs. */
export function suffix(): string {
  return Math.random().toString(36).slice(2, 8);
}
