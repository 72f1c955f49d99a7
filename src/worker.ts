// A worker thread: the same gateway as the main thread's, on the same port (SO_REUSEPORT), with a
// replica of the main thread's cache (cache/replica.ts) and the main thread's upstream credentials
// (upstream/borrowed.ts). Its options are the ones the main thread parsed, sent again when the
// configuration file changes; the main thread tells it when to drain and stop (workers.ts).
import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { createLogger } from './log/logger.ts';
import { gatewayConfig, threadLimits } from './config/gatewayconfig.ts';
import { borrowedUpstream } from './upstream/borrowed.ts';
import { startGateway } from './gateway.ts';
import { startHeapTrim } from './heaptrim.ts';
import type { WorkerControl, WorkerData, WorkerReport } from './workers.ts';

async function main(): Promise<void> {
  const data = workerData as WorkerData;
  const port = parentPort!;
  const report = (r: WorkerReport): void => port.postMessage(r);
  try {
    const options = data.options;
    const logger = createLogger(options.logLevel).child({ worker: data.index });
    const upstream = borrowedUpstream(data.upstream, data.credentials as MessagePort);
    const listen = options.listen.replace(/:\d+$/, `:${data.port}`);
    const gateway = await startGateway({ ...gatewayConfig(options, upstream, logger), listen, replicaOf: data.feed as MessagePort });
    const stopTrim = startHeapTrim(logger);
    port.on('message', (m: WorkerControl) => {
      switch (m.t) {
        case 'reconfigure':
          gateway.reconfigure({ flow: threadLimits(m.options), rules: m.options.rules });
          return;
        case 'shutdown':
          stopTrim();
          void gateway.shutdown({ graceMs: m.graceMs, delayMs: m.delayMs }).then((result) => {
            logger.flush();
            report({ t: 'stopped', result });
            port.close();
          });
          return;
      }
    });
    report({ t: 'listening' });
  } catch (err) {
    report({ t: 'failed', message: err instanceof Error ? err.message : String(err) });
    port.close();
  }
}

void main();
