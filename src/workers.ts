// Worker threads that serve beside the main thread (docs/design.md, "Workers"). Each runs a whole
// gateway (TLS, HTTP, authentication, authorization, flow control, the read path) on the main
// thread's port, shared through SO_REUSEPORT: the kernel deals new connections among the threads.
// The main thread owns the cache (reflectors, upstream watches) and feeds each worker's replica of
// it over a MessagePort; objects' bytes are in shared memory, held once.
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MessageChannel, Worker } from 'node:worker_threads';
import type { CacheFeed } from './cache/feed.ts';
import type { ShutdownResult } from './http/listener.ts';
import type { Logger } from './log/logger.ts';
import type { Options } from './config/options.ts';
import type { Upstream } from './upstream/credentials.ts';
import { describeUpstream, lendCredentials, type UpstreamDescription } from './upstream/borrowed.ts';

/** What a worker is started with. */
export interface WorkerData {
  index: number;
  /** The options the main thread parsed: a worker does not read the configuration itself. */
  options: Options;
  /** The port the main thread listens on (it may have been 0 in --listen). */
  port: number;
  /** Its end of the cache feed. */
  feed: unknown;
  /** The upstream's endpoints; the credentials are lent over `credentials`. */
  upstream: UpstreamDescription;
  credentials: unknown;
}

/** What the main thread tells a worker. */
export type WorkerControl = { t: 'reconfigure'; options: Options } | { t: 'shutdown'; graceMs: number; delayMs: number };

/** What a worker tells the main thread. */
export type WorkerReport = { t: 'listening' } | { t: 'failed'; message: string } | { t: 'stopped'; result: ShutdownResult };

export interface WorkerThreads {
  /** Every worker takes the flow control and rules of newly parsed options. */
  reconfigure(options: Options): void;
  /** Every worker drains as the main thread does; resolves when all have stopped. */
  shutdown(graceMs: number, delayMs: number): Promise<ShutdownResult>;
  /** Stops every worker at once. */
  close(): Promise<void>;
}

// A worker that dies is started again after this long, so a fault that kills it at once does not spin.
const RESTART_DELAY_MS = 1_000;

// The entry point beside this module, as .ts when run from source and .js once built.
const ENTRY = new URL(`./worker${extname(fileURLToPath(import.meta.url))}`, import.meta.url);

/** Starts `count` workers and resolves once each is listening; rejects if one could not start. */
export async function startWorkers(opts: {
  count: number;
  options: Options;
  port: number;
  feed: CacheFeed | undefined;
  upstream: Upstream;
  logger: Logger;
}): Promise<WorkerThreads> {
  const threads = new Map<number, Worker>();
  let stopping = false;

  const spawn = (index: number): Promise<Worker> => {
    const { port1, port2 } = new MessageChannel();
    const lent = new MessageChannel();
    lendCredentials(opts.upstream, lent.port1);
    const data: WorkerData = { index, options: opts.options, port: opts.port, feed: port2, upstream: describeUpstream(opts.upstream), credentials: lent.port2 };
    const worker = new Worker(ENTRY, { workerData: data, transferList: [port2, lent.port2] });
    // Nothing cached (--cache ''): the worker serves without a cache, and its end of the feed stays silent.
    opts.feed?.attach(port1);
    threads.set(index, worker);
    worker.on('error', (err: Error) => opts.logger.error({ worker: index, err: err.message, stack: err.stack }, 'worker thread failed'));
    worker.once('exit', (code) => {
      port1.close();
      lent.port1.close();
      if (threads.get(index) !== worker) return;
      threads.delete(index);
      if (stopping) return;
      opts.logger.error({ worker: index, code }, 'worker thread exited; starting it again');
      setTimeout(() => {
        if (!stopping) spawn(index).catch((err: unknown) => opts.logger.error({ worker: index, err: (err as Error).message }, 'worker thread could not start'));
      }, RESTART_DELAY_MS).unref();
    });
    return new Promise((resolve, reject) => {
      const onExit = (code: number): void => reject(new Error(`worker ${index} exited with code ${code} before listening`));
      worker.once('exit', onExit);
      worker.on('message', function started(r: WorkerReport) {
        if (r.t === 'listening') {
          worker.off('exit', onExit);
          worker.off('message', started);
          resolve(worker);
        } else if (r.t === 'failed') {
          worker.off('exit', onExit);
          worker.off('message', started);
          reject(new Error(`worker ${index}: ${r.message}`));
        }
      });
    });
  };

  const closeAll = async (): Promise<void> => {
    stopping = true;
    await Promise.all([...threads.values()].map((w) => w.terminate()));
    threads.clear();
  };

  try {
    await Promise.all(Array.from({ length: opts.count }, (_, i) => spawn(i + 1)));
  } catch (err) {
    await closeAll();
    throw err;
  }

  return {
    reconfigure: (options) => {
      for (const w of threads.values()) w.postMessage({ t: 'reconfigure', options } satisfies WorkerControl);
    },
    shutdown: async (graceMs, delayMs) => {
      stopping = true;
      const results = await Promise.all(
        [...threads.values()].map(
          (w) =>
            new Promise<ShutdownResult>((resolve) => {
              const onExit = (): void => resolve({ drained: false, closed: 0 });
              w.once('exit', onExit);
              w.on('message', (r: WorkerReport) => {
                if (r.t !== 'stopped') return;
                w.off('exit', onExit);
                resolve(r.result);
                void w.terminate();
              });
              w.postMessage({ t: 'shutdown', graceMs, delayMs } satisfies WorkerControl);
            }),
        ),
      );
      threads.clear();
      return { drained: results.every((r) => r.drained), closed: results.reduce((n, r) => n + r.closed, 0) };
    },
    close: closeAll,
  };
}
