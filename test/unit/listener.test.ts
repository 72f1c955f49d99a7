// The listening socket's accept queue is as long as the kernel allows, as kube-apiserver's is, not
// Node's default of 511: connections the process has not accepted yet are held, not dropped.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { listen } from '../../src/http/listener.ts';

// Opens `n` connections to `port` at once and prints how many the kernel completed in `ms`.
const CONNECTOR = `
const net = require('node:net');
const [port, n, ms] = process.argv.slice(1).map(Number);
let connected = 0;
const sockets = [];
for (let i = 0; i < n; i++) {
  const s = net.connect({ port, host: '127.0.0.1' }, () => connected++);
  s.on('error', () => undefined);
  sockets.push(s);
}
setTimeout(() => { console.log(connected); for (const s of sockets) s.destroy(); }, ms);
`;

test('the accept queue holds more than Node\'s default of 511 connections the process has not accepted yet', async () => {
  const somaxconn = Number(readFileSync('/proc/sys/net/core/somaxconn', 'utf8').trim());
  const n = Math.min(somaxconn, 800);
  const listener = await listen({ host: '127.0.0.1', port: 0 }, { request: (_req, res) => res.end(), upgrade: (_req, socket) => socket.destroy() });
  try {
    // While this blocks, the listener's event loop accepts nothing: every connection the child
    // sees completed was queued by the kernel; one that found the queue full was dropped (its
    // SYN is sent again only a second later).
    const connected = Number(execFileSync(process.execPath, ['-e', CONNECTOR, listener.url.port, String(n), '500'], { encoding: 'utf8' }).trim());
    assert.ok(somaxconn > 512, `net.core.somaxconn is ${somaxconn}: the kernel allows no longer queue than Node's default`);
    assert.equal(connected, n, `${connected} of ${n} connections were queued`);
  } finally {
    await listener.close();
  }
});
