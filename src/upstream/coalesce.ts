// Identical reads that arrive while one of them is already on its way upstream share its answer:
// when a thousand agents restart and send the same GET at the same moment, the apiserver sees one.
// Requests are identical only when everything that can change the apiserver's answer is the same:
// path and query, the identity they travel under (the same Authorization header or the same
// impersonated user, so the apiserver's authorization of the one stands for all), and every other
// header (Accept, Accept-Encoding, conditionals). Only answers small enough to hold are shared:
// past the bound the waiters each go upstream themselves, so memory stays bounded. Writes, watches
// and requests with a body are never coalesced.
import { prettyPrintingAgent } from '../api/negotiation.ts';
import { createHash } from 'node:crypto';
import type { DownstreamResponse } from '../http/downstream.ts';
import type { UpstreamAuth } from './connector.ts';

export interface SharedAnswer {
  statusCode: number;
  headers: Record<string, string | string[]>;
  body: Buffer;
}

/** The leader's side of a flight: settles once, with the whole answer or with nothing to share. */
export interface Flight {
  /** The largest body that is shared; past it the followers go upstream themselves. */
  readonly maxBytes: number;
  settle(answer: SharedAnswer | undefined): void;
}

export type Joined =
  | { role: 'leader'; flight: Flight }
  | { role: 'follower'; answer: Promise<SharedAnswer | undefined> };

// Headers that differ on every request but not in what the apiserver answers: they would keep
// identical reads apart. The apiserver's audit log records only the request that went upstream.
const PER_REQUEST = new Set(['audit-id', 'kubectl-command', 'kubectl-session', 'traceparent', 'tracestate', 'x-request-id']);
// Connection-level headers, which never reach the apiserver.
const CONNECTION = new Set(['host', 'connection', 'keep-alive', 'proxy-connection', 'te', 'upgrade', 'http2-settings', 'content-length']);

/**
 * What identifies a read for coalescing, or undefined when it must not be coalesced (not a GET, or
 * a body). Hashed: the key holds the client's credentials otherwise.
 */
export function coalescingKey(method: string | undefined, url: string, rawHeaders: readonly string[], auth: UpstreamAuth): string | undefined {
  if (method !== 'GET') return undefined;
  const h = createHash('sha256');
  h.update(`${auth.identity}\u0000${url}\u0000`);
  for (const v of auth.impersonate ?? []) h.update(`${v}\u0000`);
  h.update('\u0001');
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase();
    if (name === 'transfer-encoding') return undefined;
    if (name === 'content-length' && rawHeaders[i + 1] !== '0') return undefined;
    if (name.startsWith(':') || PER_REQUEST.has(name) || CONNECTION.has(name)) continue;
    if (name === 'user-agent') {
      // Only whether the apiserver indents its JSON for this agent changes the answer.
      if (prettyPrintingAgent(rawHeaders[i + 1])) h.update('pretty\u0000');
      continue;
    }
    h.update(`${name}\u0000${rawHeaders[i + 1]}\u0000`);
  }
  return h.digest('base64');
}

export class ReadCoalescer {
  readonly maxBytes: number;
  /** Requests answered with another request's upstream answer: upstream requests saved. */
  saved = 0;
  readonly #flights = new Map<string, Promise<SharedAnswer | undefined>>();

  constructor(maxBytes: number) {
    this.maxBytes = maxBytes;
  }

  /** In flight now, for tests and metrics. */
  get inFlight(): number {
    return this.#flights.size;
  }

  /**
   * The first request for a key leads: it goes upstream and must settle its flight (at the latest
   * when it ends). Later ones follow and get the leader's answer, or undefined when it could not be
   * shared (too large, failed, the leader's client gone), and then go upstream themselves.
   */
  join(key: string): Joined {
    const pending = this.#flights.get(key);
    if (pending) return { role: 'follower', answer: pending };
    let resolve!: (a: SharedAnswer | undefined) => void;
    const answer = new Promise<SharedAnswer | undefined>((r) => (resolve = r));
    this.#flights.set(key, answer);
    let settled = false;
    return {
      role: 'leader',
      flight: {
        maxBytes: this.maxBytes,
        settle: (a) => {
          if (settled) return;
          settled = true;
          // A request arriving after the answer is complete asks anew: it may be a re-read after
          // a change, and the apiserver should see it.
          this.#flights.delete(key);
          resolve(a);
        },
      },
    };
  }

  /** Writes a shared answer to a follower; undefined when there is none and it must go upstream. */
  async follow(answer: Promise<SharedAnswer | undefined>, res: DownstreamResponse, requestId: string | undefined): Promise<number | undefined> {
    const shared = await answer;
    if (!shared) return undefined;
    this.saved++;
    const headers: Record<string, string | string[]> = { ...shared.headers };
    if (shared.statusCode !== 204 && shared.statusCode !== 304) headers['content-length'] = String(shared.body.length);
    // The apiserver's Audit-Id names its request; this client's request is Levee's.
    delete headers['audit-id'];
    if (requestId) headers['audit-id'] = requestId;
    res.writeHead(shared.statusCode, headers);
    res.end(shared.body);
    return shared.statusCode;
  }
}
