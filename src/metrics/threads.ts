// One /metrics for every thread of the process (docs/design.md, "Workers"): the thread a scrape
// lands on asks the others for theirs over a BroadcastChannel and adds them up with prom-client's
// aggregator (counters and histograms summed, gauges by each metric's own aggregator), so a scrape
// sees the process whichever connection it came on.
import { BroadcastChannel, threadId } from 'node:worker_threads';
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue, type Registry } from 'prom-client';

type Metrics = MetricObjectWithValues<MetricValue<string>>[];
type Message = { t: 'ask'; id: number; from: number } | { t: 'answer'; id: number; to: number; metrics: Metrics };

const CHANNEL = 'levee-metrics';
// A thread that does not answer in this time (busy, or stopping) is left out of that scrape.
const ANSWER_TIMEOUT_MS = 2_000;

export class ThreadMetrics {
  readonly #registry: Registry;
  readonly #others: number;
  readonly #channel: BroadcastChannel;
  readonly #asked = new Map<number, { answers: Metrics[]; done: () => void }>();
  #nextId = 1;

  /** `threads`: how many threads of this process keep metrics, this one included. */
  constructor(registry: Registry, threads: number) {
    this.#registry = registry;
    this.#others = threads - 1;
    this.#channel = new BroadcastChannel(CHANNEL);
    this.#channel.unref();
    this.#channel.onmessage = (event) => void this.#receive((event as { data: Message }).data);
  }

  async #receive(m: Message): Promise<void> {
    if (m.t === 'ask') {
      const metrics = await this.#registry.getMetricsAsJSON();
      this.#channel.postMessage({ t: 'answer', id: m.id, to: m.from, metrics } satisfies Message);
      return;
    }
    if (m.to !== threadId) return;
    const asked = this.#asked.get(m.id);
    if (!asked) return;
    asked.answers.push(m.metrics);
    if (asked.answers.length >= this.#others) asked.done();
  }

  /** Every thread's metrics, added up, in the text format. */
  async metrics(): Promise<string> {
    const own = await this.#registry.getMetricsAsJSON();
    const id = this.#nextId++;
    const answers: Metrics[] = [];
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, ANSWER_TIMEOUT_MS);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.#asked.set(id, { answers, done });
      this.#channel.postMessage({ t: 'ask', id, from: threadId } satisfies Message);
    });
    this.#asked.delete(id);
    // prom-client omits what one process of a cluster cannot speak for (its start time); here only
    // the main thread reports the process's own series, so its value is the process's.
    const kept = [own, ...answers].map((metrics) => metrics.map((m) => (m.aggregator === 'omit' ? { ...m, aggregator: 'first' as const } : m)));
    return AggregatorRegistry.aggregate(kept).metrics();
  }

  close(): void {
    this.#channel.close();
  }
}
