// A simulated node agent (a DaemonSet pod such as kube-proxy or a CNI agent) starting its
// informers, as the real HTTP requests a client-go reflector issues, for the pods on its node and
// its Node. As client-go 1.35+ informers start (watch-list, the default): a consistent watch-list,
// without resourceVersion, synced at its initial-events-end bookmark, the stream going on as the
// watch. As older ones (list): LIST with resourceVersion=0, then WATCH from the list's
// resourceVersion, synced once the watch is open. 429s are retried after their Retry-After, other
// failures with client-go's backoff; both counted. Used by bench/massrestart.ts and bench/scale.ts.
import { connect, constants, type ClientHttp2Session } from 'node:http2';
import { createSecureContext } from 'node:tls';

export interface AgentResult {
  syncedMs: number;
  requests: number;
  throttled: number;
  errors: Record<string, number>;
  latenciesMs: number[];
}

/** What agents opened: closed all at once after a run, or per agent when one is restarted. */
export interface Fleet {
  sessions: ClientHttp2Session[];
  streams: Array<{ close(): void }>;
  synced: number;
}

export function newFleet(): Fleet {
  return { sessions: [], streams: [], synced: 0 };
}

/** Closes every watch and connection of the fleet (an agent's process ending). */
export function closeFleet(fleet: Fleet): void {
  for (const s of fleet.streams) s.close();
  for (const s of fleet.sessions) s.destroy();
  fleet.streams.length = 0;
  fleet.sessions.length = 0;
}

export interface AgentOptions {
  origin: string;
  token: string;
  node: string;
  /** Consistent watch-list (client-go 1.35+), else LIST resourceVersion=0 then WATCH. */
  watchList: boolean;
  /** Spreads the watches' timeoutSeconds as client-go does (600 s plus this, modulo 60). */
  index: number;
  /**
   * The watch-lists' Accept: JSON (dynamic clients, the default here) or what client-go's typed
   * clients send, kubelet's and most node agents' among them (protobuf, JSON as the fallback).
   */
  encoding?: 'json' | 'protobuf';
}

// One TLS context for every agent connection, without a CA: the agents do not verify the server's
// certificate. Each connection still makes a full TLS 1.3 handshake, the server's side of it (its
// key share, its signature) exactly as with an agent that verifies; what is left out is the
// agent's own check of the chain, and Node then building the peer certificate as a JavaScript
// object (with its fingerprints) for checkServerIdentity. All the agents share one core, and on a
// fast server that core decides how soon they sync: measured (bench/micro/agenttls.ts, medians of
// four runs of 2,000), the agent side of a connection costs 701 µs of CPU verifying and 528 µs
// not. A context per connect() would also parse a CA each time. The servers benchmarked are this
// machine's, on loopback.
const AGENT_TLS = createSecureContext({});

const ACCEPT = { json: 'application/json', protobuf: 'application/vnd.kubernetes.protobuf, application/json' };
// The end bookmark's annotation key: in JSON and in protobuf alike its bytes appear as they are,
// and nothing else in a watch-list carries them.
const INITIAL_EVENTS_END = 'k8s.io/initial-events-end';

const LIST_RV = /^\{"kind":"[A-Za-z]+List","apiVersion":"[^"]+","metadata":\{"resourceVersion":"(\d+)"/;

function h2get(session: ClientHttp2Session, path: string, tok: string): Promise<{ status: number; body: string; retryAfter: number }> {
  return new Promise((resolvePromise, reject) => {
    const s = session.request({ ':path': path, authorization: `Bearer ${tok}`, accept: 'application/json' });
    // A stream that never answers is a failure to retry, as client-go's request timeout makes it.
    const timer = setTimeout(() => s.close(constants.NGHTTP2_CANCEL), 60_000);
    let status = 0;
    let retryAfter = 0;
    const chunks: Buffer[] = [];
    s.on('response', (h) => {
      status = Number(h[constants.HTTP2_HEADER_STATUS]);
      retryAfter = Number(h['retry-after'] ?? 0);
    });
    s.on('data', (c: Buffer) => chunks.push(c));
    s.on('end', () => resolvePromise({ status, body: Buffer.concat(chunks).toString(), retryAfter }));
    s.on('close', () => {
      clearTimeout(timer);
      if (status === 0) reject(Object.assign(new Error('stream closed'), { code: 'closed' }));
    });
    s.on('error', reject);
  });
}

/** Opens a watch; resolves with its status once the response head arrives. The stream stays open. */
function h2watch(session: ClientHttp2Session, path: string, tok: string, fleet: Fleet): Promise<{ status: number; retryAfter: number }> {
  return new Promise((resolvePromise, reject) => {
    const s = session.request({ ':path': path, authorization: `Bearer ${tok}`, accept: 'application/json' });
    let answered = false;
    // A connection the server gave up on (Go's "timeout waiting for SETTINGS frames" from a client
    // slow to start) closes its streams without an error: a failure to retry, not a wait forever.
    s.on('close', () => {
      if (!answered) reject(Object.assign(new Error('stream closed'), { code: 'closed' }));
    });
    s.on('response', (h) => {
      answered = true;
      const status = Number(h[constants.HTTP2_HEADER_STATUS]);
      if (status === 200) {
        fleet.streams.push({ close: () => s.close() });
        s.on('data', () => undefined);
      } else {
        s.resume();
      }
      resolvePromise({ status, retryAfter: Number(h['retry-after'] ?? 0) });
    });
    s.on('error', reject);
  });
}

/**
 * Opens a watch-list; resolves with its status once its initial-events-end bookmark has arrived (or
 * with the status of a refusal). The stream stays open as the watch.
 */
function h2watchList(session: ClientHttp2Session, path: string, tok: string, fleet: Fleet, accept: string): Promise<{ status: number; retryAfter: number }> {
  return new Promise((resolvePromise, reject) => {
    const s = session.request({ ':path': path, authorization: `Bearer ${tok}`, accept });
    let tail = '';
    let done = false;
    s.on('close', () => {
      if (!done) reject(Object.assign(new Error('stream closed before the initial state'), { code: 'closed' }));
    });
    s.on('response', (h) => {
      const status = Number(h[constants.HTTP2_HEADER_STATUS]);
      if (status !== 200) {
        done = true;
        s.resume();
        resolvePromise({ status, retryAfter: Number(h['retry-after'] ?? 0) });
        return;
      }
      fleet.streams.push({ close: () => s.close() });
      // Only the end bookmark's annotation matters; the objects are not parsed.
      s.on('data', (c: Buffer) => {
        if (done) return;
        const text = tail + c.toString('latin1');
        // Kept: enough of the end to find the annotation split across two chunks.
        tail = text.slice(-64);
        if (text.includes(INITIAL_EVENTS_END)) {
          done = true;
          resolvePromise({ status: 200, retryAfter: 0 });
        }
      });
      s.on('end', () => {
        if (!done) reject(Object.assign(new Error('watch-list ended before its initial state'), { code: 'ended' }));
      });
    });
    s.on('error', reject);
  });
}

/** The collections an agent on `node` reads: the pods on its node, and its Node. */
export function agentPaths(node: string): [pods: string, nodes: string] {
  return [`/api/v1/pods?fieldSelector=${encodeURIComponent(`spec.nodeName=${node}`)}`, `/api/v1/nodes?fieldSelector=${encodeURIComponent(`metadata.name=${node}`)}`];
}

/** What a client-go 1.35+ informer adds to a collection's path for its consistent watch-list. */
export const WATCH_LIST_QUERY = '&watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true';

/**
 * The bytes of a watch-list up to and including its initial-events-end bookmark, the stream then
 * cancelled: what a server answered, for a replay of it (bench/lib/watchreplay.ts).
 */
export function captureWatchList(session: ClientHttp2Session, path: string, tok: string, accept = ACCEPT.json): Promise<Buffer> {
  return new Promise((resolvePromise, reject) => {
    const s = session.request({ ':path': path, authorization: `Bearer ${tok}`, accept });
    // The chunks are kept as they came and joined once: joining them on every chunk cost time in
    // the square of the answer's size, a megabyte's watch-list tens of milliseconds.
    const chunks: Buffer[] = [];
    let total = 0;
    // Where the bookmark's annotation was found (past its end), and the bytes before a chunk that
    // could hold the start of it.
    let marked = -1;
    let carry = Buffer.alloc(0);
    s.on('response', (h) => {
      const status = Number(h[constants.HTTP2_HEADER_STATUS]);
      if (status !== 200) reject(new Error(`${path}: ${status}`));
    });
    s.on('data', (c: Buffer) => {
      const base = total;
      chunks.push(c);
      total += c.length;
      if (marked < 0) {
        const window = Buffer.concat([carry, c]);
        const at = window.indexOf(INITIAL_EVENTS_END);
        if (at >= 0) marked = base - carry.length + at + INITIAL_EVENTS_END.length;
        else carry = window.subarray(Math.max(0, window.length - INITIAL_EVENTS_END.length));
      }
      // Up to the end of the bookmark's line: in JSON a watch event is one object per line.
      const nl = marked < 0 ? -1 : c.indexOf('\n', Math.max(0, marked - base));
      if (nl < 0) return;
      resolvePromise(Buffer.concat(chunks, total).subarray(0, base + nl + 1));
      s.close(constants.NGHTTP2_CANCEL);
    });
    s.on('close', () => reject(new Error(`${path}: closed before its initial-events-end bookmark`)));
    s.on('error', reject);
  });
}

/**
 * Starts one agent's informers (pods on its node, its Node); resolves once both are synced, the
 * watches staying open in `fleet`. `syncedMs` is measured from `t0` (performance.now()).
 */
export async function runAgent(o: AgentOptions, t0: number, fleet: Fleet): Promise<AgentResult> {
  const tok = o.token;
  const node = o.node;
  const i = o.index;
  // One connection per agent, opened again when it breaks (as client-go's transport does).
  let current: ClientHttp2Session | undefined;
  const sessionNow = (): ClientHttp2Session => {
    if (!current || current.destroyed || current.closed) {
      current = connect(o.origin, { secureContext: AGENT_TLS, rejectUnauthorized: false });
      current.on('error', () => undefined);
      fleet.sessions.push(current);
    }
    return current;
  };
  const r: AgentResult = { syncedMs: 0, requests: 0, throttled: 0, errors: {}, latenciesMs: [] };
  // client-go: 429 waits its Retry-After; anything else backs off from 800 ms, doubling to 30 s.
  const attempt = async <T extends { status: number; retryAfter: number }>(f: () => Promise<T>): Promise<T> => {
    let backoff = 800;
    for (;;) {
      const started = performance.now();
      r.requests++;
      let a: T | undefined;
      try {
        a = await f();
      } catch (err) {
        const code = (err as { code?: string }).code ?? 'error';
        r.errors[code] = (r.errors[code] ?? 0) + 1;
      }
      r.latenciesMs.push(performance.now() - started);
      if (a?.status === 200) return a;
      if (a?.status === 429) {
        r.throttled++;
        await new Promise((w) => setTimeout(w, Math.max(1, a.retryAfter) * 1000));
        continue;
      }
      if (a) r.errors[String(a.status)] = (r.errors[String(a.status)] ?? 0) + 1;
      await new Promise((w) => setTimeout(w, backoff * (0.5 + Math.random())));
      backoff = Math.min(backoff * 2, 30_000);
    }
  };
  const [podsPath, nodesPath] = agentPaths(node);
  // A List's metadata comes before its items, from the apiserver and from Levee alike: reading the
  // resourceVersion there, rather than parsing every pod, keeps the agents' own CPU off the cores
  // that serve them (JSON.parse of the pod lists was a third of it).
  const rvOf = (body: string): string => {
    const m = LIST_RV.exec(body.slice(0, 512));
    if (!m) throw new Error(`no resourceVersion in ${body.slice(0, 200)}`);
    return m[1]!;
  };
  if (o.watchList) {
    const watchList = (path: string) =>
      attempt(() =>
        h2watchList(sessionNow(), `${path}${WATCH_LIST_QUERY}&timeoutSeconds=${600 + (i % 60)}`, tok, fleet, ACCEPT[o.encoding ?? 'json']),
      );
    await Promise.all([watchList(podsPath), watchList(nodesPath)]);
  } else {
    const [pods, nodes] = await Promise.all([
      attempt(() => h2get(sessionNow(), `${podsPath}&resourceVersion=0`, tok)),
      attempt(() => h2get(sessionNow(), `${nodesPath}&resourceVersion=0`, tok)),
    ]);
    const watch = (path: string, rv: string) =>
      attempt(() => h2watch(sessionNow(), `${path}&watch=true&allowWatchBookmarks=true&resourceVersion=${rv}&timeoutSeconds=${600 + (i % 60)}`, tok, fleet));
    await Promise.all([watch(podsPath, rvOf(pods.body)), watch(nodesPath, rvOf(nodes.body))]);
  }
  r.syncedMs = performance.now() - t0;
  fleet.synced++;
  return r;
}
