// Consistent reads through Levee are linearizable: concurrent writes, GETs, LISTs and watch-list
// starts against the real apiserver, with Lease renewals moving etcd's revision elsewhere, checked
// by porcupine (testenv/cmd/linearizability). Levee's connection to the apiserver runs through a
// relay that delays every byte from the apiserver, so its cache lags behind: only the proof keeps
// its answers exact. Levee runs with --consistent-read-proof-bytes 0, so every consistent read it
// can is answered from its cache after the proof rather than forwarded. A control run shows the
// checker catches a cache that answers consistent reads as they stand. A longer run:
// npm run bench:linearizability.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { Agent } from 'undici';
import { loadEnv, startApiserver, stopApiserver, type TestEnv } from '../env/testenv.ts';
import { agentFor, get, send, suffix } from '../support/http.ts';
import { startLevee, writeKubeconfig, type LeveeProcess } from '../support/levee.ts';
import { startRelay } from '../support/relay.ts';
import { waitReady } from '../support/wait.ts';

let env: TestEnv;
let agent: Agent;
const namespaces: string[] = [];

interface Summary {
  operations: number;
  counts: Record<string, number>;
  result: string;
}

/** Runs the checker through `levee` for `seconds`; `during` runs meanwhile. */
async function check(levee: LeveeProcess, seconds: number, extra: string[], during?: () => Promise<void>): Promise<{ code: number | null; summary: Summary; err: string }> {
  const ns = `linearizable-${suffix()}`;
  namespaces.push(ns);
  assert.equal((await send('POST', `${env.server}/api/v1/namespaces`, agent, env.tokens.admin, { metadata: { name: ns } })).status, 201);
  const child = spawn(env.linearizability, [
    '-server', levee.url.origin,
    '-direct', env.server,
    '-token', env.tokens.admin,
    '-ca', env.caFile,
    '-namespace', ns,
    '-duration', `${seconds}s`,
    '-check-timeout', '90s',
    ...extra,
  ]);
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  await during?.();
  const code = await exited;
  const summary = JSON.parse(out.trim().split('\n').at(-1) || '{}') as Summary;
  console.log(`linearizability ${extra.join(' ')}: ${JSON.stringify(summary)}`);
  return { code, summary, err };
}

before(() => {
  env = loadEnv();
  agent = agentFor(env.caFile);
});

after(async () => {
  for (const ns of namespaces) await send('DELETE', `${env.server}/api/v1/namespaces/${ns}`, agent, env.tokens.admin);
  await agent.close();
});

test('writes and consistent reads (GET, LIST, watch-list) through a lagging Levee are linearizable, across an apiserver restart', async () => {
  const relay = await startRelay(env.server, { delayMs: 100 });
  const levee = await startLevee({
    kubeconfig: writeKubeconfig(relay.url, env.caFile, env.tokens.admin),
    tls: env.leveeServing,
    extra: ['--cache', 'configmaps', '--consistent-read-proof-bytes', '0'],
  });
  try {
    await waitReady(levee, agent);
    const seconds = 40;
    const { code, summary, err } = await check(levee, seconds, [], async () => {
      // Halfway, the apiserver goes away for a few seconds and comes back with the same etcd.
      await new Promise((r) => setTimeout(r, (seconds / 2) * 1000));
      await stopApiserver();
      await new Promise((r) => setTimeout(r, 3000));
      await startApiserver();
    });
    assert.equal(summary.result, 'Ok', err);
    assert.equal(code, 0, err);
    const n = (k: string) => summary.counts[k] ?? 0;
    assert.ok(n('write') >= 50, 'too few writes to judge');
    for (const k of ['get', 'list', 'watch-list']) assert.ok(n(k) >= 10, `too few ${k} reads to judge`);
    // Answered from the cache: the checker judged Levee, not only the apiserver.
    assert.ok(n('get-from-cache') >= n('get') / 2 && n('list-from-cache') >= n('list') / 2, JSON.stringify(summary.counts));
    const metrics = (await get(`${levee.url.origin}/metrics`, agent)).body;
    const verified = Number(/^levee_consistent_reads_total\{resource="configmaps",result="verified"\} (\d+)/m.exec(metrics)?.[1] ?? 0);
    assert.ok(verified - n('get-from-cache') - n('list-from-cache') >= n('watch-list') / 2, `watch-list starts were not answered from the cache (${verified} verified)`);
  } finally {
    await levee.stop();
    await relay.close();
  }
});

test('control: the checker finds a lagging cache that answers consistent reads as they stand not linearizable', async () => {
  const relay = await startRelay(env.server, { delayMs: 300 });
  const levee = await startLevee({
    kubeconfig: writeKubeconfig(relay.url, env.caFile, env.tokens.admin),
    tls: env.leveeServing,
    extra: ['--cache', 'configmaps', '--consistent-reads', 'cache'],
  });
  try {
    await waitReady(levee, agent);
    const { code, summary } = await check(levee, 15, ['-write-direct']);
    assert.equal(summary.result, 'Illegal');
    assert.equal(code, 1);
  } finally {
    await levee.stop();
    await relay.close();
  }
});
