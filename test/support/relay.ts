// A TCP relay on loopback between Levee and the apiserver, to make the network misbehave: every
// byte from the apiserver arrives `delayMs` late, or none at all while stalled. TLS passes through
// untouched (the apiserver's certificate is valid for 127.0.0.1, whatever the port).
import net from 'node:net';

export interface Relay {
  /** The relay's address, to use as the apiserver's in a kubeconfig. */
  url: string;
  close(): Promise<void>;
}

export async function startRelay(target: string, opts: { delayMs?: number } = {}): Promise<Relay> {
  const to = new URL(target);
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(to.port), to.hostname);
    sockets.add(client).add(upstream);
    const drop = (): void => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    const delay = opts.delayMs ?? 0;
    if (delay === 0) {
      upstream.pipe(client);
      return;
    }
    // Order is kept: each chunk leaves `delay` after it arrived, after the ones before it.
    upstream.on('data', (chunk: Buffer) => {
      setTimeout(() => {
        if (!client.destroyed) client.write(chunk);
      }, delay);
    });
    upstream.on('end', () => setTimeout(() => client.end(), delay));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `https://127.0.0.1:${port}`,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}
