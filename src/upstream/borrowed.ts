// The upstream as a worker thread sees it (docs/design.md, "Workers"): the main thread's endpoints,
// and its own credentials lent over a MessagePort. A worker then neither reads the kubeconfig nor
// runs exec plugins itself, and does not load @kubernetes/client-node, which holds about 19 MB of
// heap per thread.
import type { MessagePort } from 'node:worker_threads';
import type { OwnCredentials, Upstream } from './credentials.ts';

/** What a worker is told of the upstream: everything but the credentials. */
export interface UpstreamDescription {
  servers: string[];
  pathPrefix: string;
  source: string;
}

type Ask = { id: number };
type Answer = { id: number; credentials?: OwnCredentials; error?: string };

// As the main thread's own cache of its credentials (credentials.ts): a rotated token reaches the
// workers within seconds, without a message per request.
const LENT_TTL_MS = 5_000;

export function describeUpstream(upstream: Upstream): UpstreamDescription {
  return { servers: upstream.servers.map((s) => s.href), pathPrefix: upstream.pathPrefix, source: upstream.source };
}

/** The main thread's side: answers a worker's requests for the credentials. */
export function lendCredentials(upstream: Upstream, port: MessagePort): void {
  port.on('message', (m: Ask) => {
    upstream.ownCredentials().then(
      (credentials) => port.postMessage({ id: m.id, credentials } satisfies Answer),
      (err: unknown) => port.postMessage({ id: m.id, error: err instanceof Error ? err.message : String(err) } satisfies Answer),
    );
  });
  port.unref();
}

/** A worker's upstream: the main thread's endpoints, its credentials borrowed. */
export function borrowedUpstream(d: UpstreamDescription, port: MessagePort): Upstream {
  const waiting = new Map<number, { resolve: (c: OwnCredentials) => void; reject: (err: Error) => void }>();
  let nextId = 1;
  port.on('message', (a: Answer) => {
    const w = waiting.get(a.id);
    waiting.delete(a.id);
    if (!w) return;
    if (a.credentials) w.resolve(a.credentials);
    else w.reject(new Error(a.error ?? 'no credentials'));
  });
  port.unref();
  let cached: { at: number; value: Promise<OwnCredentials> } | undefined;
  const ownCredentials = (): Promise<OwnCredentials> => {
    const now = Date.now();
    if (!cached || now - cached.at > LENT_TTL_MS) {
      const id = nextId++;
      const value = new Promise<OwnCredentials>((resolve, reject) => waiting.set(id, { resolve, reject }));
      port.postMessage({ id } satisfies Ask);
      cached = { at: now, value };
      value.catch(() => {
        if (cached?.value === value) cached = undefined;
      });
    }
    return cached.value;
  };
  const servers = d.servers.map((s) => new URL(s));
  return { server: servers[0]!, servers, pathPrefix: d.pathPrefix, source: d.source, ownCredentials };
}
