// The clients of the fault suite (test/integration/faults.test.ts): churn written to the apiserver,
// and through Levee the readers whose view is judged after each fault — raw watches recorded event
// by event, a client-go informer, an @kubernetes/client-node informer, `kubectl get --watch`, and
// requests with a deadline that must each end, one way or another, by it.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import { KubeConfig, makeInformer, CoreV1Api, type V1ConfigMap } from '@kubernetes/client-node';
import { request, type Dispatcher } from 'undici';
import type { TestEnv } from '../env/testenv.ts';
import { writeKubeconfig } from './levee.ts';
import type { Delivered, History, Segment } from './watchcheck.ts';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Meta {
  metadata: { name: string; namespace?: string; resourceVersion: string };
}

/** A request with a deadline, and how it ended. */
export interface Timed {
  what: string;
  started: number;
  ms: number;
  limitMs: number;
  /** HTTP status, or the error's name/message. */
  outcome: string;
  /** Still unanswered at its limit (aborted by the client then). */
  hung: boolean;
}

/** Every request the suite's clients made through Levee, with its limit. */
export class RequestLog {
  readonly entries: Timed[] = [];
  /** Runs `fn` with an abort signal that fires at `limitMs`; records how it ended. */
  async timed<T>(what: string, limitMs: number, fn: (signal: AbortSignal) => Promise<T>, outcome: (v: T) => string): Promise<T | undefined> {
    const started = Date.now();
    const abort = new AbortController();
    let hung = false;
    const timer = setTimeout(() => {
      hung = true;
      abort.abort(new Error(`no answer within ${limitMs} ms`));
    }, limitMs);
    try {
      const v = await fn(abort.signal);
      this.entries.push({ what, started, ms: Date.now() - started, limitMs, outcome: outcome(v), hung });
      return v;
    } catch (err) {
      const outcome = hung ? `hung: ${String((err as Error)?.message ?? err)}` : (err as Error)?.name === 'AbortError' ? 'stopped' : `error: ${String((err as Error)?.message ?? err)}`;
      this.entries.push({ what, started, ms: Date.now() - started, limitMs, outcome: outcome.slice(0, 120), hung });
      return undefined;
    } finally {
      clearTimeout(timer);
    }
  }
  hungSince(t: number): Timed[] {
    return this.entries.filter((e) => e.started >= t && e.hung);
  }
  since(t: number): Timed[] {
    return this.entries.filter((e) => e.started >= t);
  }
}

// ---------------------------------------------------------------- raw watches

export interface WatchOptions {
  origin: () => string;
  /** The collection, e.g. /api/v1/namespaces/NS/configmaps. */
  path: string;
  token: string;
  dispatcher: Dispatcher;
  bookmarks: boolean;
  log: RequestLog;
}

/**
 * A watch through Levee as a careful client runs one: LIST, watch from the list's resourceVersion,
 * resume from the last resourceVersion delivered (a bookmark's too) whenever the stream ends or
 * breaks, LIST again after 410 Gone. Every event is recorded (watchcheck.ts judges them).
 */
export class RecordingWatch {
  readonly history: History;
  #rv: number | undefined;
  #stopped = true;
  #abort: AbortController | undefined;
  #loop: Promise<void> | undefined;
  readonly #o: WatchOptions;

  constructor(name: string, o: WatchOptions) {
    this.history = { name, segments: [] };
    this.#o = o;
  }

  /** 410 Gone answers and ERROR events seen. */
  get gone(): number {
    return this.history.segments.filter((s) => s.end === 'gone').length;
  }

  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#loop = this.#run();
  }

  /** Ends the current watch; the next start() resumes from the last resourceVersion delivered. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#abort?.abort();
    await this.#loop;
  }

  async #run(): Promise<void> {
    const o = this.#o;
    while (!this.#stopped) {
      let seg: Segment;
      if (this.#rv === undefined) {
        const list = await o.log.timed(
          `${this.history.name} LIST`,
          15_000,
          async (signal) => {
            const r = await request(`${o.origin()}${o.path}?timeout=10s`, { dispatcher: o.dispatcher, signal, headers: { authorization: `Bearer ${o.token}`, accept: 'application/json' } });
            return { status: r.statusCode, body: await r.body.text() };
          },
          (r) => String(r.status),
        );
        if (list?.status !== 200) {
          await sleep(300);
          continue;
        }
        const l = JSON.parse(list.body) as { metadata: { resourceVersion: string }; items: Meta[] };
        this.#rv = Number(l.metadata.resourceVersion);
        seg = { from: this.#rv, listed: true, state: l.items.map((i) => `${i.metadata.namespace}/${i.metadata.name}@${i.metadata.resourceVersion}`), items: [], end: '' };
        this.history.segments.push(seg);
      } else {
        seg = { from: this.#rv, listed: false, items: [], end: '' };
      }
      const timeoutSeconds = 4 + Math.floor(Math.random() * 8);
      this.#abort = new AbortController();
      const abort = this.#abort;
      let pushed = seg.listed;
      // The stream must end by its own timeoutSeconds (the server ends it); allowed a few more.
      const outcome = await o.log.timed(
        `${this.history.name} WATCH timeoutSeconds=${timeoutSeconds}`,
        (timeoutSeconds + 5) * 1000,
        async (signal) => {
          const both = AbortSignal.any([signal, abort.signal]);
          const q = `?watch=true&resourceVersion=${seg.from}&timeoutSeconds=${timeoutSeconds}${o.bookmarks ? '&allowWatchBookmarks=true' : ''}`;
          const res = await request(`${o.origin()}${o.path}${q}`, { dispatcher: o.dispatcher, signal: both, headers: { authorization: `Bearer ${o.token}`, accept: 'application/json' } });
          if (res.statusCode === 410) {
            await res.body.dump();
            if (!pushed) this.history.segments.push(seg);
            seg.end = 'gone';
            this.#rv = undefined;
            return '410';
          }
          if (res.statusCode !== 200) {
            const text = await res.body.text();
            return `${res.statusCode} ${text.slice(0, 100)}`;
          }
          if (!pushed) this.history.segments.push(seg);
          pushed = true;
          let buf = '';
          try {
            for await (const chunk of res.body) {
              buf += (chunk as Buffer).toString();
              let nl;
              while ((nl = buf.indexOf('\n')) !== -1) {
                const line = buf.slice(0, nl);
                buf = buf.slice(nl + 1);
                const e = JSON.parse(line) as { type: string; object: Meta & { code?: number; message?: string } };
                if (e.type === 'ERROR') {
                  if (e.object.code === 410) {
                    seg.end = 'gone';
                    this.#rv = undefined;
                  } else {
                    seg.end = `error: ${e.object.code} ${e.object.message ?? ''}`;
                  }
                  return `ERROR ${e.object.code}`;
                }
                const d: Delivered = {
                  type: e.type as Delivered['type'],
                  key: e.type === 'BOOKMARK' ? '' : `${e.object.metadata.namespace}/${e.object.metadata.name}`,
                  rv: Number(e.object.metadata.resourceVersion),
                };
                seg.items.push(d);
                this.#rv = Math.max(this.#rv ?? 0, d.rv);
              }
            }
            seg.end = 'eof';
            return '200 eof';
          } catch (err) {
            seg.end = abort.signal.aborted ? 'stopped' : `error: ${String(err).slice(0, 100)}`;
            throw err;
          }
        },
        (v) => v,
      );
      if (outcome === undefined || !outcome.startsWith('200')) await sleep(300);
    }
  }
}

// ---------------------------------------------------------------- informers

/** What a client holds: namespace/name@resourceVersion, sorted. */
export type View = string[];

export interface ViewingClient {
  name: string;
  view(): Promise<View>;
  stop(): Promise<void>;
}

/** testenv/cmd/informer: a client-go shared informer on the namespace's configmaps. */
export async function clientGoInformer(env: TestEnv, origin: string, ns: string): Promise<ViewingClient> {
  const child: ChildProcessWithoutNullStreams = spawn(env.informer, ['-server', origin, '-token', env.tokens.admin, '-ca', env.caFile, '-namespace', ns]);
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-4000)));
  const lines = createInterface({ input: child.stdout });
  const waiting: Array<(l: string) => void> = [];
  lines.on('line', (l) => waiting.shift()?.(l));
  const next = (ms: number): Promise<string> =>
    new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`client-go informer: no line in ${ms} ms; stderr: ${stderr}`)), ms);
      waiting.push((l) => {
        clearTimeout(t);
        resolve(l);
      });
    });
  const synced = await next(60_000);
  if (synced !== 'synced') throw new Error(`client-go informer: ${synced} ${stderr}`);
  return {
    name: 'client-go informer',
    view: async () => {
      const line = next(10_000);
      child.stdin.write('\n');
      return (await line).split(' ').filter(Boolean).map((s) => `${ns}/${s}`).sort();
    },
    stop: () => {
      child.stdin.end();
      child.kill('SIGKILL');
      return Promise.resolve();
    },
  };
}

/** An @kubernetes/client-node informer; started again after an error, as its README advises. */
export async function clientNodeInformer(env: TestEnv, origin: string, ns: string): Promise<ViewingClient & { errors: () => number }> {
  const kc = new KubeConfig();
  kc.loadFromFile(writeKubeconfig(origin, env.caFile, env.tokens.admin));
  const core = kc.makeApiClient(CoreV1Api);
  const informer = makeInformer<V1ConfigMap>(kc, `/api/v1/namespaces/${ns}/configmaps`, () => core.listNamespacedConfigMap({ namespace: ns }));
  let stopped = false;
  let errors = 0;
  informer.on('error', () => {
    errors++;
    if (!stopped) setTimeout(() => void (stopped ? undefined : informer.start().catch(() => undefined)), 1000);
  });
  await informer.start();
  return {
    name: '@kubernetes/client-node informer',
    errors: () => errors,
    view: () => Promise.resolve(informer.list().map((o) => `${ns}/${o.metadata!.name}@${o.metadata!.resourceVersion}`).sort()),
    stop: async () => {
      stopped = true;
      await informer.stop();
    },
  };
}

/** Splits concatenated JSON values (kubectl -o json in watch mode prints them one after another). */
function jsonValues(onValue: (text: string) => void): (chunk: string) => void {
  let buf = '';
  let depth = 0;
  let inString = false;
  let escaped = false;
  let start = -1;
  return (chunk) => {
    const base = buf.length;
    buf += chunk;
    for (let i = base; i < buf.length; i++) {
      const c = buf[i];
      if (inString) {
        if (escaped) escaped = false;
        else if (c === '\\') escaped = true;
        else if (c === '"') inString = false;
        continue;
      }
      if (c === '"') inString = true;
      else if (c === '{') {
        if (depth++ === 0) start = i;
      } else if (c === '}' && --depth === 0) {
        onValue(buf.slice(start, i + 1));
        buf = buf.slice(i + 1);
        i = -1;
        start = -1;
      }
    }
  };
}

/**
 * `kubectl get configmaps --watch -o json --output-watch-events` through Levee, started again
 * whenever it exits (it does when its watch breaks: it has no resume of its own), each run beginning
 * with the list as ADDED events.
 */
export function kubectlWatch(env: TestEnv, origin: string, ns: string): ViewingClient & { runs: () => number } {
  const kubeconfig = writeKubeconfig(origin, env.caFile, env.tokens.admin);
  let state = new Map<string, string>();
  let runs = 0;
  let stopped = false;
  let child: ChildProcessWithoutNullStreams | undefined;
  const loop = async (): Promise<void> => {
    while (!stopped) {
      runs++;
      const mine = new Map<string, string>();
      let listed = false;
      const c = spawn(env.kubectl, ['--kubeconfig', kubeconfig, 'get', 'configmaps', '-n', ns, '--watch', '-o', 'json', '--output-watch-events', '--request-timeout=0']);
      child = c;
      const feed = jsonValues((text) => {
        const e = JSON.parse(text) as { type: string; object: Meta };
        const key = `${ns}/${e.object.metadata.name}`;
        if (e.type === 'DELETED') mine.delete(key);
        else mine.set(key, e.object.metadata.resourceVersion);
        // The run's view replaces the last one's once it has the list (the first event after it).
        if (!listed) listed = true;
        state = mine;
      });
      c.stdout.setEncoding('utf8').on('data', feed);
      c.stderr.resume();
      await new Promise((r) => c.once('exit', r));
      if (!stopped) await sleep(500);
    }
  };
  const done = loop();
  return {
    name: 'kubectl get --watch',
    runs: () => runs,
    view: () => Promise.resolve([...state].map(([k, v]) => `${k}@${v}`).sort()),
    stop: async () => {
      stopped = true;
      child?.kill('SIGKILL');
      await done;
    },
  };
}

// ---------------------------------------------------------------- requests with deadlines

/**
 * Reads and writes through Levee, one after another, each with `?timeout=5s`: each must end (an
 * answer or an error Status, or a refused connection while Levee is down) within 5 s and a grace.
 */
export interface Prober {
  stop(): Promise<void>;
  /** Resolves once no request is under way, and makes none until resume(). */
  pause(): Promise<void>;
  resume(): void;
}

export function probe(origin: () => string, ns: string, token: string, dispatcher: Dispatcher, log: RequestLog): Prober {
  const base = `/api/v1/namespaces/${ns}`;
  const reads = [
    `${base}/configmaps/cm-0`,
    `${base}/configmaps/cm-1?resourceVersion=0`,
    `${base}/configmaps`,
    `${base}/configmaps?resourceVersion=0`,
    `${base}/configmaps?limit=3`,
    `${base}/pods?resourceVersion=0`,
    `${base}/pods`,
  ];
  let stopped = false;
  let paused: { resolve: () => void; resumed: Promise<void>; resume: () => void } | undefined;
  const LIMIT_MS = 8_000; // the 5 s asked for, and 3 s for the answer to arrive
  const loop = async (): Promise<void> => {
    for (let i = 0; !stopped; i++) {
      if (paused) {
        paused.resolve();
        await paused.resumed;
        continue;
      }
      const write = i % 5 === 4;
      const path = write ? `${base}/configmaps/probe?fieldManager=faults&force=true` : reads[i % reads.length]!;
      await log.timed(
        `${write ? 'PATCH' : 'GET'} ${path}`,
        LIMIT_MS,
        async (signal) => {
          const sep = path.includes('?') ? '&' : '?';
          const r = await request(`${origin()}${path}${sep}timeout=5s`, {
            method: write ? 'PATCH' : 'GET',
            dispatcher,
            signal,
            headers: {
              authorization: `Bearer ${token}`,
              accept: 'application/json',
              ...(write ? { 'content-type': 'application/apply-patch+yaml' } : {}),
            },
            ...(write ? { body: JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'probe' }, data: { at: String(Date.now()) } }) } : {}),
          });
          await r.body.text();
          return r.statusCode;
        },
        String,
      );
      await sleep(100);
    }
  };
  const done = loop();
  return {
    stop: async () => {
      stopped = true;
      paused?.resume();
      await done;
    },
    pause: async () => {
      let resolve!: () => void;
      const idle = new Promise<void>((r) => (resolve = r));
      let resume!: () => void;
      const resumed = new Promise<void>((r) => (resume = r));
      paused = { resolve, resumed, resume };
      await idle;
    },
    resume: () => {
      const p = paused;
      paused = undefined;
      p?.resume();
    },
  };
}

// ---------------------------------------------------------------- churn

export interface ChurnOptions {
  server: string;
  ns: string;
  token: string;
  dispatcher: Dispatcher;
  kwokLabel: { key: string; value: string };
}

/**
 * The cluster at work while faults happen, written straight to the apiserver: configmaps created,
 * changed and deleted in a loop; a Deployment scaled and rolled (the deployment and replicaset
 * controllers, the scheduler and KWOK then make, bind, run and delete its pods, all through the
 * control plane's Levee); bare pods created and deleted. Failures (the apiserver or etcd down)
 * are counted, not fatal.
 */
export class Churn {
  writes = 0;
  failures = 0;
  #stopped = true;
  #loops: Array<Promise<void>> = [];
  /** Bytes of each configmap's data; large values make a watch that is not read fill up fast. */
  valueBytes = 64;
  readonly #o: ChurnOptions;

  constructor(o: ChurnOptions) {
    this.#o = o;
  }

  async #send(method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<number> {
    try {
      const r = await request(`${this.#o.server}${path}`, {
        method: method as 'GET',
        dispatcher: this.#o.dispatcher,
        headers: { authorization: `Bearer ${this.#o.token}`, 'content-type': contentType, accept: 'application/json' },
        body: body === undefined ? null : JSON.stringify(body),
        signal: AbortSignal.timeout(10_000),
      });
      await r.body.dump();
      if (r.statusCode < 300) this.writes++;
      else if (r.statusCode >= 500 || r.statusCode === 429) this.failures++;
      return r.statusCode;
    } catch {
      this.failures++;
      return 0;
    }
  }

  /** Creates the Deployment the loop scales and rolls. */
  async setUp(): Promise<void> {
    const { ns, kwokLabel } = this.#o;
    const status = await this.#send('POST', `/apis/apps/v1/namespaces/${ns}/deployments`, {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'churn' },
      spec: {
        replicas: 2,
        selector: { matchLabels: { app: 'churn' } },
        template: {
          metadata: { labels: { app: 'churn' }, annotations: { roll: '0' } },
          spec: { nodeSelector: { [kwokLabel.key]: kwokLabel.value }, containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10' }], terminationGracePeriodSeconds: 0 },
        },
      },
    });
    if (status !== 201 && status !== 409) throw new Error(`creating the churn Deployment: ${status}`);
  }

  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    const { ns, kwokLabel } = this.#o;
    const cm = `/api/v1/namespaces/${ns}/configmaps`;
    const configmaps = async (seed: number): Promise<void> => {
      for (let i = seed; !this.#stopped; i++) {
        const name = `cm-${Math.floor(Math.random() * 12)}`;
        const data = { v: `${i}`, pad: 'x'.repeat(this.valueBytes) };
        const r = Math.random();
        if (r < 0.2) await this.#send('DELETE', `${cm}/${name}`);
        else if ((await this.#send('PATCH', `${cm}/${name}`, { data }, 'application/merge-patch+json')) === 404) await this.#send('POST', cm, { metadata: { name }, data });
        await sleep(60);
      }
    };
    const deployment = async (): Promise<void> => {
      for (let i = 0; !this.#stopped; i++) {
        const path = `/apis/apps/v1/namespaces/${ns}/deployments/churn`;
        if (i % 2 === 0) await this.#send('PATCH', path, { spec: { replicas: 1 + Math.floor(Math.random() * 4) } }, 'application/merge-patch+json');
        else await this.#send('PATCH', path, { spec: { template: { metadata: { annotations: { roll: String(i) } } } } }, 'application/merge-patch+json');
        await sleep(1500);
      }
    };
    const pods = async (): Promise<void> => {
      for (let i = 0; !this.#stopped; i++) {
        await this.#send('POST', `/api/v1/namespaces/${ns}/pods`, {
          metadata: { name: `bare-${i}` },
          spec: { nodeSelector: { [kwokLabel.key]: kwokLabel.value }, containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10' }], terminationGracePeriodSeconds: 0 },
        });
        if (i >= 2) await this.#send('DELETE', `/api/v1/namespaces/${ns}/pods/bare-${i - 2}`);
        await sleep(700);
      }
    };
    this.#loops = [configmaps(0), configmaps(1_000_000), deployment(), pods()];
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await Promise.all(this.#loops);
  }
}
