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
