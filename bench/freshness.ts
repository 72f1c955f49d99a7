// What the apiserver offers a client that must prove its cache of a quiet resource is as new as
// the apiserver (a consistent read served from a cache), measured against the real apiserver while
// other objects change about 50 times a second. For each way: how long until the proof, and what
// it costs the apiserver. Chooses how Levee proves freshness (src/cache/consistency.ts).
//
//   npm run testenv -- up && npm run bench:freshness [-- --trials 20 --writes 50]
//
// The ways, each proving that a stream has delivered every event of the resource up to a revision
// R obtained after the request arrived:
//  - list:       a consistent LIST with limit=1 gives R (and makes the apiserver's own cache fresh);
//                the main watch, quiet, never reaches R by itself: its bookmarks come every minute.
//  - list+watch: the LIST, then a watch resumed from the cache's resourceVersion with
//                timeoutSeconds=2, whose bookmark comes 2 s before its deadline, at the apiserver's
//                next bookmark tick, and carries the apiserver's cache revision (≥ R).
//  - list+watches: the LIST, then the first bookmark at or past R on any of the watches of the
//                list+watch kind begun once a second and kept going (src/reflector/probes.ts):
//                a watch begun a second or more before the tick is already due for its bookmark.
//  - watch-list: a consistent watch-list with a selector matching nothing: its initial-events-end
//                bookmark proves the apiserver reached R, but on another stream than the data.
//  - bookmark:   the main watch's own bookmark, every minute (measured once).
import { mkdirSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { request, type Agent } from 'undici';
import { loadEnv } from '../test/env/testenv.ts';
import { agentFor, send, suffix } from '../test/support/http.ts';

const { values } = parseArgs({
  options: {
    trials: { type: 'string', default: '20' },
    writes: { type: 'string', default: '50' },
    bookmark: { type: 'boolean', default: false },
    'probe-timeout': { type: 'string', default: '3' },
  },
});
const PROBE_TIMEOUT = Number(values['probe-timeout']);
const TRIALS = Number(values.trials);
const WRITES_PER_SECOND = Number(values.writes);

const env = loadEnv();
const agent: Agent = agentFor(env.caFile);
const token = env.tokens.admin;
const run = suffix();
const quiet = `fresh-quiet-${run}`;
const busy = `fresh-busy-${run}`;
for (const ns of [quiet, busy]) await send('POST', `${env.server}/api/v1/namespaces`, agent, token, { metadata: { name: ns } });
await send('POST', `${env.server}/api/v1/namespaces/${quiet}/services`, agent, token, { metadata: { name: 's' }, spec: { ports: [{ port: 80 }] } });
for (let i = 0; i < 20; i++) await send('POST', `${env.server}/api/v1/namespaces/${busy}/configmaps`, agent, token, { metadata: { name: `c${i}` }, data: { v: '0' } });

// Churn elsewhere: every write moves etcd's revision, none is a service.
let churning = true;
let writes = 0;
const churn = (async () => {
  const interval = 1000 / WRITES_PER_SECOND;
  for (let i = 0; churning; i++) {
    const t = performance.now();
    await send('PATCH', `${env.server}/api/v1/namespaces/${busy}/configmaps/c${i % 20}`, agent, token, { data: { v: String(i) } }, 'application/merge-patch+json');
    writes++;
    await new Promise((r) => setTimeout(r, Math.max(0, interval - (performance.now() - t))));
  }
})();

const SERVICES = '/api/v1/services';
const headers = { authorization: `Bearer ${token}`, accept: 'application/json' };

/** A consistent LIST with limit=1: the apiserver's current revision. */
async function currentRevision(): Promise<{ rv: number; ms: number }> {
  const t = performance.now();
  const res = await request(`${env.server}${SERVICES}?limit=1`, { dispatcher: agent, headers });
  const body = JSON.parse(await res.body.text()) as { metadata: { resourceVersion: string } };
  return { rv: Number(body.metadata.resourceVersion), ms: performance.now() - t };
}

/** Reads a watch until `done` says so; resolves with what `done` returned, or undefined at its end. */
async function watchUntil<T>(query: string, done: (event: { type: string; object: { metadata?: { resourceVersion?: string; annotations?: Record<string, string> } } }) => T | undefined): Promise<T | undefined> {
  const ac = new AbortController();
  const res = await request(`${env.server}${SERVICES}?${query}`, { dispatcher: agent, headers, signal: ac.signal });
  let buffered = '';
  try {
    for await (const chunk of res.body) {
      buffered += (chunk as Buffer).toString();
      let nl;
      while ((nl = buffered.indexOf('\n')) !== -1) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        if (line === '') continue;
        const found = done(JSON.parse(line) as Parameters<typeof done>[0]);
        if (found !== undefined) {
          ac.abort();
          return found;
        }
      }
    }
  } catch (err) {
    if (!ac.signal.aborted) throw err;
  }
  return undefined;
}

const bookmarkRV = (e: Parameters<Parameters<typeof watchUntil>[1]>[0]): number | undefined =>
  e.type === 'BOOKMARK' ? Number(e.object.metadata?.resourceVersion) : undefined;

// The cache's resourceVersion: a watch-list's end, as Levee's reflector starts.
const start = await watchUntil('watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=30', bookmarkRV);
if (start === undefined) throw new Error('no initial-events-end bookmark');
let storeRV = start;

// list+watches: a watch resumed every second from the newest revision they brought, each with the
// probe's deadline, through every trial; each bookmark is noted as it arrives.
const standing: { at: number; rv: number }[] = [];
const standingWaiters: (() => void)[] = [];
let standingRV = start;
let standingOn = true;
const standingLoop = (async () => {
  const open: Promise<unknown>[] = [];
  while (standingOn) {
    open.push(
      watchUntil(`watch=true&resourceVersion=${standingRV}&allowWatchBookmarks=true&timeoutSeconds=${PROBE_TIMEOUT}`, (e) => {
        const rv = bookmarkRV(e);
        if (rv === undefined) return undefined;
        standing.push({ at: performance.now(), rv });
        standingRV = Math.max(standingRV, rv);
        for (const w of standingWaiters.splice(0)) w();
        return rv;
      }),
    );
    await new Promise((r) => setTimeout(r, 1000));
  }
  await Promise.all(open);
})();

/** From `after`, how long until one of those watches had a bookmark at or past `target`. */
async function standingBookmark(after: number, target: number): Promise<number | undefined> {
  for (;;) {
    const hit = standing.find((b) => b.at >= after && b.rv >= target);
    if (hit) return hit.at - after;
    if (performance.now() - after > 10_000) return undefined;
    await new Promise<void>((r) => {
      standingWaiters.push(r);
      setTimeout(r, 500);
    });
  }
}

interface Trial {
  listMs: number;
  behindBy: number;
  listWatchMs: number | undefined;
  listWatchesMs: number | undefined;
  watchListMs: number | undefined;
}
const trials: Trial[] = [];
for (let i = 0; i < TRIALS; i++) {
  await new Promise((r) => setTimeout(r, 200 + Math.random() * 800));
  const arrived = performance.now();
  const { rv: target, ms: listMs } = await currentRevision();
  // Measured over the same ticks as list+watch below.
  const listWatches = standingBookmark(arrived, target);
  // list+watch: resumed from the cache's resourceVersion, a bookmark at or past the target.
  let listWatchMs: number | undefined;
  for (let attempt = 0; attempt < 3 && listWatchMs === undefined; attempt++) {
    const reached = await watchUntil(`watch=true&resourceVersion=${storeRV}&allowWatchBookmarks=true&timeoutSeconds=${PROBE_TIMEOUT}`, (e) => {
      const rv = bookmarkRV(e);
      return rv !== undefined && rv >= target ? rv : undefined;
    });
    if (reached !== undefined) {
      listWatchMs = performance.now() - arrived;
      storeRV = reached;
    }
  }
  // watch-list with a selector matching nothing: its end bookmark.
  const t = performance.now();
  const end = await watchUntil('watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=10&labelSelector=levee.dev%2Fnone%3Dnone', (e) =>
    e.object.metadata?.annotations?.['k8s.io/initial-events-end'] === 'true' ? Number(e.object.metadata.resourceVersion) : undefined,
  );
  const watchListMs = end !== undefined && end >= target ? performance.now() - t : undefined;
  trials.push({ listMs, behindBy: target - start, listWatchMs, listWatchesMs: await listWatches, watchListMs });
}
standingOn = false;
await standingLoop;

// The main watch's own bookmark: how long a quiet resource waits for one.
let bookmarkMs: number | undefined;
if (values.bookmark) {
  const t = performance.now();
  const got = await watchUntil(`watch=true&resourceVersion=${storeRV}&allowWatchBookmarks=true&timeoutSeconds=600`, bookmarkRV);
  bookmarkMs = got === undefined ? undefined : performance.now() - t;
}

churning = false;
await churn;
for (const ns of [quiet, busy]) await send('DELETE', `${env.server}/api/v1/namespaces/${ns}`, agent, token);
await agent.close();

const q = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
};
const defined = (xs: Array<number | undefined>): number[] => xs.filter((x): x is number => x !== undefined);
const row = (name: string, xs: number[], requests: string, proves: string) => ({
  way: name,
  proven: `${xs.length}/${TRIALS}`,
  p50Ms: Math.round(q(xs, 0.5)),
  p90Ms: Math.round(q(xs, 0.9)),
  maxMs: Math.round(Math.max(...xs)),
  upstreamRequests: requests,
  proves,
});
const rows = [
  row('list (wait for the main watch)', [], '1 LIST limit=1', 'never for a quiet resource: the cache does not move'),
  row(`list + watch resumed with timeoutSeconds=${PROBE_TIMEOUT}`, defined(trials.map((t) => t.listWatchMs)), '1 LIST limit=1 + 1 watch from the cache', 'the cache (its events arrive on the same stream as the bookmark)'),
  row(
    `list + watches resumed once a second with timeoutSeconds=${PROBE_TIMEOUT}, kept going`,
    defined(trials.map((t) => t.listWatchesMs)),
    '1 LIST limit=1 + 1 watch from the cache a second while reads come',
    'the cache, as above',
  ),
  row('watch-list, selector matching nothing', defined(trials.map((t) => t.watchListMs)), '1 watch', 'only the apiserver: its bookmark is on another stream than the data'),
  ...(bookmarkMs !== undefined ? [row('the main watch\'s minute bookmark', [bookmarkMs], '0', 'the cache')] : []),
];
const result = {
  date: new Date().toISOString(),
  apiserver: env.version,
  trials: TRIALS,
  writesPerSecond: Math.round((writes / Math.max(1, trials.length)) * 10) / 10,
  consistentListMs: { p50: Math.round(q(trials.map((t) => t.listMs), 0.5) * 10) / 10, p90: Math.round(q(trials.map((t) => t.listMs), 0.9) * 10) / 10 },
  revisionsBehindAtEachTrial: trials.map((t) => t.behindBy),
  ways: rows,
};
const out = resolve(import.meta.dirname, 'results');
mkdirSync(out, { recursive: true });
writeFileSync(resolve(out, 'freshness.json'), `${JSON.stringify(result, null, 2)}\n`);
const md = [
  '# Proving a quiet resource fresh: what the apiserver offers',
  '',
  `${result.date}, kube-apiserver ${env.version}, ${TRIALS} trials while other objects changed about ${WRITES_PER_SECOND} times a second. A consistent LIST with limit=1: p50 ${result.consistentListMs.p50} ms, p90 ${result.consistentListMs.p90} ms.`,
  '',
  '| way | proven | p50 ms | p90 ms | max ms | upstream requests per proof | proves |',
  '|---|---|---|---|---|---|---|',
  ...rows.map((r) => `| ${r.way} | ${r.proven} | ${Number.isNaN(r.p50Ms) ? '–' : r.p50Ms} | ${Number.isNaN(r.p90Ms) ? '–' : r.p90Ms} | ${Number.isFinite(r.maxMs) ? r.maxMs : '–'} | ${r.upstreamRequests} | ${r.proves} |`),
  '',
];
writeFileSync(resolve(out, 'freshness.md'), md.join('\n'));
console.log(md.join('\n'));
