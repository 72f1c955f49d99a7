// The test environment's real etcd, through its own v3 JSON gateway (grpc-gateway: POST /v3/kv/*,
// keys and values base64, 64-bit numbers as strings). For tests that must change what the
// apiserver cannot: advance the revision, compact history, remove a key behind its back.
import { request } from 'undici';

const b64 = (s: string): string => Buffer.from(s, 'utf8').toString('base64');

interface Header {
  header?: { revision?: string };
}

async function call<T extends Header>(etcd: string, path: string, body: unknown): Promise<T & { revision: number }> {
  const res = await request(`${etcd}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`etcd ${path}: ${res.statusCode} ${text}`);
  const answer = JSON.parse(text) as T;
  const revision = Number(answer.header?.revision);
  if (!Number.isSafeInteger(revision) || revision <= 0) throw new Error(`etcd ${path}: no revision in ${text}`);
  return { ...answer, revision };
}

/** Writes key=value; resolves with etcd's revision after the write. */
export async function etcdPut(etcd: string, key: string, value: string): Promise<number> {
  return (await call(etcd, '/v3/kv/put', { key: b64(key), value: b64(value) })).revision;
}

/** Deletes one key; resolves with how many keys went (0 or 1) and the revision after. */
export async function etcdDelete(etcd: string, key: string): Promise<{ deleted: number; revision: number }> {
  const r = await call<Header & { deleted?: string }>(etcd, '/v3/kv/deleterange', { key: b64(key) });
  return { deleted: Number(r.deleted ?? 0), revision: r.revision };
}

/** Whether a key exists now. */
export async function etcdExists(etcd: string, key: string): Promise<boolean> {
  const r = await call<Header & { count?: string }>(etcd, '/v3/kv/range', { key: b64(key), count_only: true });
  return Number(r.count ?? 0) > 0;
}

/** Compacts history up to `revision` and waits until it is physically applied. */
export async function etcdCompact(etcd: string, revision: number): Promise<void> {
  await call(etcd, '/v3/kv/compaction', { revision: String(revision), physical: true });
}

/** One change of a key as etcd's history has it, named as a Kubernetes watch would name it. */
export interface EtcdEvent {
  revision: number;
  key: string;
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
}

export interface EtcdWatch {
  /** Every event under the prefix since the start revision, in revision order. */
  readonly events: EtcdEvent[];
  /**
   * Resolves once an event at `revision` or later has arrived: etcd sends a watch's events in
   * order, so every earlier one has too. Make a write in the range and pass its revision.
   */
  reached(revision: number, ms?: number): Promise<void>;
  stop(): void;
}

interface WatchMessage {
  result?: {
    events?: Array<{ type?: string; kv: { key: string; create_revision?: string; mod_revision?: string } }>;
    compact_revision?: string;
  };
  error?: unknown;
}

/**
 * The reference history of a key range: a watch on etcd itself (its v3 JSON gateway), from
 * `fromRevision` on, resumed after the last event it got whenever the stream breaks (etcd killed).
 * Events only, values not decoded: the Kubernetes objects are protobuf there, and a watch through
 * the apiserver names an event by key, revision and type, all of which etcd has.
 */
export function watchEtcd(etcd: string, prefix: string, fromRevision: number): EtcdWatch {
  const events: EtcdEvent[] = [];
  const end = prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1);
  let next = fromRevision;
  let stopped = false;
  let failure: Error | undefined;
  const abort = new AbortController();
  const run = async (): Promise<void> => {
    while (!stopped) {
      try {
        const res = await request(`${etcd}/v3/watch`, {
          method: 'POST',
          body: JSON.stringify({ create_request: { key: b64(prefix), range_end: b64(end), start_revision: String(next) } }),
          signal: abort.signal,
          bodyTimeout: 0,
        });
        let buf = '';
        for await (const chunk of res.body) {
          buf += (chunk as Buffer).toString();
          let nl;
          while ((nl = buf.indexOf('\n')) !== -1) {
            const line = buf.slice(0, nl).trim();
            buf = buf.slice(nl + 1);
            if (!line) continue;
            const m = JSON.parse(line) as WatchMessage;
            if (m.error || !m.result) throw new Error(`etcd watch: ${line}`);
            if (m.result.compact_revision && m.result.compact_revision !== '0') {
              failure = new Error(`the reference watch of ${prefix} from ${next} was compacted at ${m.result.compact_revision}`);
              return;
            }
            for (const e of m.result.events ?? []) {
              const revision = Number(e.kv.mod_revision);
              const type = e.type === 'DELETE' ? 'DELETED' : e.kv.create_revision === e.kv.mod_revision ? 'ADDED' : 'MODIFIED';
              events.push({ revision, key: Buffer.from(e.kv.key, 'base64').toString(), type });
              next = revision + 1;
            }
          }
        }
      } catch {
        if (stopped) return;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  };
  void run();
  return {
    events,
    reached: async (revision, ms = 30_000) => {
      const deadline = Date.now() + ms;
      while ((events.at(-1)?.revision ?? 0) < revision) {
        if (failure) throw failure;
        if (Date.now() > deadline) throw new Error(`the etcd watch of ${prefix} did not reach revision ${revision} in ${ms} ms`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    stop: () => {
      stopped = true;
      abort.abort();
    },
  };
}

/** etcd's current revision. */
export async function etcdRevision(etcd: string): Promise<number> {
  return (await call(etcd, '/v3/kv/range', { key: b64('/levee-test/revision'), count_only: true })).revision;
}
