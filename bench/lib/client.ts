// The HTTP client side of the LIST benchmark: timed reads that stream and count bytes, scanned
// reads that count items, and writes that retry what a busy apiserver may transiently refuse.
import { setTimeout as sleep } from 'node:timers/promises';
import { request, type Dispatcher } from 'undici';
import { ListScanner } from './listscan.ts';

export interface Timing {
  /** Request sent to last body byte read. */
  ms: number;
  /** Request sent to response headers. */
  ttfbMs: number;
  bytes: number;
}

function headers(token: string): Record<string, string> {
  // JSON, uncompressed: undici sends no Accept-Encoding, so neither side gzips, and both answer the
  // same representation. (Go clients ask for protobuf for core types; Levee serves JSON.)
  return { authorization: `Bearer ${token}`, accept: 'application/json' };
}

/** One GET, timed to the last byte; the body is counted, never kept. */
export async function timedGet(url: string, dispatcher: Dispatcher, token: string): Promise<Timing> {
  const t0 = process.hrtime.bigint();
  const res = await request(url, { dispatcher, headers: headers(token) });
  const t1 = process.hrtime.bigint();
  let bytes = 0;
  for await (const chunk of res.body) bytes += (chunk as Buffer).length;
  const t2 = process.hrtime.bigint();
  if (res.statusCode !== 200) throw new Error(`GET ${url}: HTTP ${res.statusCode}`);
  return { ms: Number(t2 - t0) / 1e6, ttfbMs: Number(t1 - t0) / 1e6, bytes };
}

export interface Scanned {
  status: number;
  /** Items of a list; for a GET of one object, 1 when it was found. */
  items: number;
  itemBytes: number;
  bytes: number;
}

/** One GET whose body is scanned for items; used to check answers, not to time them. */
export async function scannedGet(url: string, dispatcher: Dispatcher, token: string, single = false): Promise<Scanned> {
  const res = await request(url, { dispatcher, headers: headers(token) });
  const scan = new ListScanner();
  if (single) {
    for await (const chunk of res.body) scan.bytes += (chunk as Buffer).length;
    const found = res.statusCode === 200 ? 1 : 0;
    return { status: res.statusCode, items: found, itemBytes: found * scan.bytes, bytes: scan.bytes };
  }
  for await (const chunk of res.body) scan.push(chunk as Buffer);
  if (res.statusCode === 200 && !scan.complete) throw new Error(`GET ${url}: body ended inside a value`);
  return { status: res.statusCode, items: scan.items, itemBytes: scan.itemBytes, bytes: scan.bytes };
}

export interface Answer {
  status: number;
  body: string;
}

/**
 * A write (or a small read) that retries connection errors, 429 and 5xx with backoff for up to
 * two minutes: generating a cluster sends ~100,000 requests, the shared test apiserver is
 * sometimes restarted by other tests (and then reloads its watch cache), and one refused request
 * should not waste minutes of work. A create retried after its answer was lost meets 409, which
 * the generator accepts.
 */
export async function call(
  dispatcher: Dispatcher,
  token: string,
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
  url: string,
  body?: unknown,
  contentType = 'application/json',
): Promise<Answer> {
  const deadline = Date.now() + 120_000;
  for (let attempt = 0; ; attempt++) {
    const backoff = Math.min(2000, 100 * 2 ** attempt);
    try {
      const res = await request(url, {
        method,
        dispatcher,
        headers: { ...headers(token), 'content-type': contentType },
        body: body === undefined ? null : JSON.stringify(body),
      });
      const text = await res.body.text();
      if ((res.statusCode === 429 || res.statusCode >= 500) && Date.now() < deadline) {
        await sleep(Math.max(backoff, Number(res.headers['retry-after'] ?? 0) * 1000));
        continue;
      }
      return { status: res.statusCode, body: text };
    } catch (err) {
      if (Date.now() >= deadline) throw err;
      await sleep(backoff);
    }
  }
}

/** Like call, but anything other than the accepted codes is an error with the server's message. */
export async function must(
  accept: number[],
  ...args: Parameters<typeof call>
): Promise<Answer> {
  const a = await call(...args);
  if (!accept.includes(a.status)) throw new Error(`${args[2]} ${args[3]}: HTTP ${a.status}: ${a.body.slice(0, 500)}`);
  return a;
}

/** Runs task(i) for i in [0, n) with at most `concurrency` in flight. */
export async function pool(n: number, concurrency: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < n) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, n) }, worker));
}
