// The steady write load of the watch benchmark: PATCHes of one annotation at a fixed rate, open
// loop (a slow answer does not delay the next update, as with real controllers and kubelets), to
// pods spread evenly over the watched nodes. Each patch carries its send time and a sequence
// number, so a watcher knows when the change it receives was made and the run can count which
// watchers got it. Writes always go to the apiserver directly: they are the cluster's changes, the
// same whichever way the watchers are connected.
import { setTimeout as sleep } from 'node:timers/promises';
import { request, type Dispatcher } from 'undici';
import { SENT_ANNOTATION, SEQ_ANNOTATION, wallMs } from './watchclient.ts';

export interface UpdatePod {
  namespace: string;
  name: string;
  /** Index of its node among the watched nodes. */
  node: number;
}

export interface LoadOptions {
  server: string;
  dispatcher: Dispatcher;
  token: string;
  /** Pods per watched node; nodes without pods are skipped. */
  podsByNode: UpdatePod[][];
  rate: number;
  seconds: number;
  /** Sequence number of the first update; numbers stay unique across the runs of one benchmark. */
  firstSeq: number;
  /** Past this many PATCHes in flight an update is skipped rather than sent late. */
  maxInFlight: number;
  onSent: (seq: number, node: number, sentMs: number) => void;
}

export interface LoadResult {
  /** Sequence numbers used: [firstSeq, nextSeq). */
  firstSeq: number;
  nextSeq: number;
  sent: number;
  failed: number;
  /** Updates reported to onSent whose PATCH failed: no watcher can receive them. */
  failedSeqs: number[];
  skipped: number;
  firstErrors: string[];
  seconds: number;
  achievedRate: number;
  /** PATCH round trips, ms. */
  patchMs: number[];
}

export async function runLoad(o: LoadOptions): Promise<LoadResult> {
  const nodes = o.podsByNode.map((pods, i) => ({ i, pods })).filter((n) => n.pods.length > 0);
  if (nodes.length === 0) throw new Error('no pods on the watched nodes to update');
  const nextPod = new Array<number>(o.podsByNode.length).fill(0);
  const result: LoadResult = { firstSeq: o.firstSeq, nextSeq: o.firstSeq, sent: 0, failed: 0, failedSeqs: [], skipped: 0, firstErrors: [], seconds: 0, achievedRate: 0, patchMs: [] };
  const inFlight = new Set<Promise<void>>();
  const started = performance.now();
  const total = Math.round(o.rate * o.seconds);

  for (let k = 0; k < total; k++) {
    const due = started + (k * 1000) / o.rate;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    if (inFlight.size >= o.maxInFlight) {
      result.skipped++;
      continue;
    }
    // Round-robin over nodes, and over the pods of each node, so every watcher sees the same rate.
    const node = nodes[k % nodes.length]!;
    const pod = node.pods[nextPod[node.i]!++ % node.pods.length]!;
    const seq = result.nextSeq++;
    const p = patch(o, pod, seq, result).finally(() => inFlight.delete(p));
    inFlight.add(p);
  }
  await Promise.all(inFlight);
  result.seconds = (performance.now() - started) / 1000;
  result.achievedRate = result.sent / result.seconds;
  return result;
}

async function patch(o: LoadOptions, pod: UpdatePod, seq: number, result: LoadResult): Promise<void> {
  const t0 = performance.now();
  const sentMs = wallMs();
  const body = JSON.stringify({ metadata: { annotations: { [SENT_ANNOTATION]: sentMs.toFixed(3), [SEQ_ANNOTATION]: String(seq) } } });
  // Reported before the answer: a watcher may well see the change before the writer hears back.
  o.onSent(seq, pod.node, sentMs);
  try {
    const res = await request(`${o.server}/api/v1/namespaces/${pod.namespace}/pods/${pod.name}?fieldManager=levee-bench`, {
      method: 'PATCH',
      dispatcher: o.dispatcher,
      headers: { authorization: `Bearer ${o.token}`, 'content-type': 'application/merge-patch+json', accept: 'application/json' },
      body,
    });
    const text = await res.body.text();
    if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode}: ${text.slice(0, 200)}`);
    result.sent++;
    result.patchMs.push(performance.now() - t0);
  } catch (err) {
    // Not retried: a retry would carry the first attempt's timestamp and count as slow delivery.
    result.failed++;
    result.failedSeqs.push(seq);
    if (result.firstErrors.length < 5) result.firstErrors.push(`${pod.namespace}/${pod.name}: ${String(err).split('\n')[0]}`);
  }
}
