// A TCP relay on loopback between Levee and the apiserver, to make the network misbehave: every
// byte from the apiserver arrives `delayMs` late, or none at all while stalled. TLS passes through
// untouched (the apiserver's certificate is valid for 127.0.0.1, whatever the port).
import net from 'node:net';

export interface Relay {
  /** The relay's address, to use as the apiserver's in a kubeconfig. */
  url: string;
  /**
   * Stops passing bytes, in both directions, on every connection open now, without closing any
   * (a peer that went silent, a black-holed route): what arrives meanwhile is held, not dropped.
   * Connections opened later pass bytes as usual unless `newConnections` is true too.
   * Resolves with how many connections were stalled.
   */
  stall(opts?: { newConnections?: boolean }): number;
  /** Passes bytes again: what was held goes first, in order. */
  release(): void;
  /** Connections open now. */
  connections(): number;
  close(): Promise<void>;
}

interface Pair {
  client: net.Socket;
  upstream: net.Socket;
  stalled: boolean;
  held: Array<{ to: net.Socket; chunk: Buffer }>;
}

export async function startRelay(target: string, opts: { delayMs?: number } = {}): Promise<Relay> {
  const to = new URL(target);
  const pairs = new Set<Pair>();
  let stallNew = false;
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(to.port), to.hostname);
    const pair: Pair = { client, upstream, stalled: stallNew, held: [] };
    pairs.add(pair);
    const drop = (): void => {
      client.destroy();
      upstream.destroy();
      pairs.delete(pair);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    const pass = (dest: net.Socket, chunk: Buffer): void => {
      if (pair.stalled) pair.held.push({ to: dest, chunk });
      else if (!dest.destroyed) dest.write(chunk);
    };
    client.on('data', (chunk: Buffer) => pass(upstream, chunk));
    client.on('end', () => upstream.end());
    const delay = opts.delayMs ?? 0;
    // Order is kept: each chunk leaves `delay` after it arrived, after the ones before it.
    upstream.on('data', (chunk: Buffer) => (delay === 0 ? pass(client, chunk) : setTimeout(() => pass(client, chunk), delay)));
    upstream.on('end', () => setTimeout(() => client.end(), delay));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `https://127.0.0.1:${port}`,
    stall: (o = {}) => {
      stallNew = o.newConnections ?? false;
      for (const p of pairs) p.stalled = true;
      return pairs.size;
    },
    release: () => {
      stallNew = false;
      for (const p of pairs) {
        p.stalled = false;
        for (const { to: dest, chunk } of p.held.splice(0)) if (!dest.destroyed) dest.write(chunk);
      }
    },
    connections: () => pairs.size,
    close: async () => {
      for (const p of pairs) {
        p.client.destroy();
        p.upstream.destroy();
      }
      await new Promise((r) => server.close(r));
    },
  };
}
