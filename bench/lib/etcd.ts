// Keeps a large generation from filling etcd. etcd refuses every write once its database reaches
// its quota (2 GiB by default) and stays read-only until compacted, defragmented and disarmed by
// hand, which would break the shared test cluster for everyone. Generating 50,000 pods writes
// each one twice (create, then status), about 1 GB, and only a compaction (the apiserver's, every
// 5 minutes) frees the superseded revisions. So writes pause while the space in use is above 80%
// of the quota and resume below 70%.
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { metric, parseMetrics } from './prom.ts';

export interface EtcdSize {
  dbBytes: number | null;
  dbInUseBytes: number | null;
  quotaBytes: number | null;
  keys: number | null;
}

export async function etcdSize(url: string): Promise<EtcdSize> {
  try {
    const res = await request(`${url}/metrics`);
    const m = parseMetrics(await res.body.text());
    return {
      dbBytes: metric(m, 'etcd_mvcc_db_total_size_in_bytes') ?? null,
      dbInUseBytes: metric(m, 'etcd_mvcc_db_total_size_in_use_in_bytes') ?? null,
      quotaBytes: metric(m, 'etcd_server_quota_backend_bytes') ?? null,
      keys: metric(m, 'etcd_debugging_mvcc_keys_total') ?? null,
    };
  } catch {
    return { dbBytes: null, dbInUseBytes: null, quotaBytes: null, keys: null };
  }
}

const PAUSE_ABOVE = 0.8;
const RESUME_BELOW = 0.7;
const GIVE_UP_MS = 15 * 60_000;

export class EtcdGuard {
  readonly #url: string;
  readonly #log: (line: string) => void;
  #gate: Promise<void> | null = null;
  #release: (() => void) | null = null;
  #fail: ((err: Error) => void) | null = null;
  #pausedAt = 0;
  #stopped = false;
  readonly #loop: Promise<void>;

  constructor(url: string, log: (line: string) => void) {
    this.#url = url;
    this.#log = log;
    this.#loop = this.#watch();
  }

  /** Resolves at once, or when writing may go on again. */
  ready(): Promise<void> {
    return this.#gate ?? Promise.resolve();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#release?.();
    await this.#loop;
  }

  async #watch(): Promise<void> {
    while (!this.#stopped) {
      const s = await etcdSize(this.#url);
      if (s.dbInUseBytes !== null && s.quotaBytes) {
        const used = s.dbInUseBytes / s.quotaBytes;
        if (!this.#gate && used > PAUSE_ABOVE) {
          this.#pausedAt = Date.now();
          this.#gate = new Promise<void>((resolve, reject) => {
            this.#release = resolve;
            this.#fail = reject;
          });
          // Nobody may be waiting at the moment this fails; the rejection still reaches the next
          // writer through ready().
          this.#gate.catch(() => undefined);
          this.#log(`etcd holds ${mib(s.dbInUseBytes)} of its ${mib(s.quotaBytes)} quota: pausing writes until a compaction frees space`);
        } else if (this.#gate && used < RESUME_BELOW) {
          this.#log(`etcd down to ${mib(s.dbInUseBytes)} in use: resuming`);
          this.#release!();
          this.#gate = null;
        } else if (this.#gate && Date.now() - this.#pausedAt > GIVE_UP_MS) {
          this.#fail!(new Error(`etcd stayed above ${RESUME_BELOW * 100}% of its quota for ${GIVE_UP_MS / 60_000} minutes`));
          return;
        }
      }
      await sleep(2000);
    }
  }
}

const mib = (b: number): string => `${(b / 2 ** 20).toFixed(0)} MiB`;
