// undici pools to the upstream apiserver, one per identity and traffic class. Long-running
// requests (watches, logs, proxies) get their own pools with no body timeout, so a quiet watch is
// never cut after five minutes and never queues a write behind it.
import { BalancedPool, Pool, type Dispatcher } from './undici.ts';
import type { Upstream } from './credentials.ts';
import { identityConnector, type Identity } from './connector.ts';

export type TrafficClass = 'request' | 'longRunning';

// The apiserver's own timeout for a non-long-running request is 60 s; it answers 504 itself then.
// Waiting longer for headers leaves room for that answer to arrive.
const HEADERS_TIMEOUT_MS = 120_000;
// Between two body chunks of a short request. Backpressure from a slow client pauses this timer.
const REQUEST_BODY_TIMEOUT_MS = 120_000;
const OWN_REQUEST_CONNECTIONS = 32;
// How long an idle connection stays open: as long as client-go keeps one (90 s, the apiserver's
// own idle timeout too), less a margin so that Levee, not the apiserver, closes it and no request
// meets a connection the server is closing. undici's 4 s default closed them between a crowd's
// bursts: a consistency proof's LIST and bookmark probe, the first requests a DaemonSet's
// restarting agents cause, then each waited for a new TLS connection, whose handshake takes
// turns of an event loop full of the agents' own handshakes (bench:massrestart: the LIST sent
// 0.57 s after it began, answered 27 ms later). A server that says how long it keeps connections
// (Keep-Alive: timeout=N, as Node's does) is still believed.
const KEEP_ALIVE_TIMEOUT_MS = 60_000;

export class UpstreamPools {
  readonly upstream: Upstream;
  readonly #pools = new Map<string, Pool | BalancedPool>();
  readonly #connectors = new Map<Identity, ReturnType<typeof identityConnector>>();

  constructor(upstream: Upstream) {
    this.upstream = upstream;
  }

  connector(identity: Identity): ReturnType<typeof identityConnector> {
    let c = this.#connectors.get(identity);
    if (!c) {
      c = identityConnector(this.upstream, identity);
      this.#connectors.set(identity, c);
    }
    return c;
  }

  get(identity: Identity, traffic: TrafficClass): Dispatcher {
    const key = `${identity}/${traffic}`;
    let pool = this.#pools.get(key);
    if (!pool) {
      const options = {
        connect: this.connector(identity),
        // Levee's own requests (reviews, probes) share a few connections: a mass restart of
        // thousands of clients would otherwise open a TLS connection upstream for each review.
        connections: identity === 'own' && traffic === 'request' ? OWN_REQUEST_CONNECTIONS : null,
        allowH2: false,
        pipelining: 1,
        keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
        headersTimeout: HEADERS_TIMEOUT_MS,
        bodyTimeout: traffic === 'longRunning' ? 0 : REQUEST_BODY_TIMEOUT_MS,
      };
      const origins = this.upstream.servers.map((s) => s.origin);
      // Several endpoints: undici's BalancedPool spreads requests and lowers the weight of an
      // endpoint that fails, so traffic moves to the ones that answer.
      pool = origins.length > 1 ? new BalancedPool(origins, options) : new Pool(origins[0]!, options);
      this.#pools.set(key, pool);
    }
    return pool;
  }

  async close(): Promise<void> {
    const pools = [...this.#pools.values()];
    this.#pools.clear();
    await Promise.all(pools.map((p) => p.destroy()));
  }
}
