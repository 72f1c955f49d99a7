// printPod (pkg/printers/internalversion): the Ready, Status and Restarts a pod shows, from its
// containers' states, its init containers' progress, its conditions and its deletion.
import { ageOf, type Cell, type PrintedRow, type RowCondition } from '../row.ts';
import { timeOf } from './time.ts';

interface ContainerStateJson {
  waiting?: { reason?: string } | null;
  running?: object | null;
  terminated?: { exitCode?: number; signal?: number; reason?: string; finishedAt?: string | null } | null;
}

interface ContainerStatusJson {
  name?: string;
  state?: ContainerStateJson;
  lastState?: ContainerStateJson;
  ready?: boolean;
  restartCount?: number;
  started?: boolean | null;
}

interface PodJson {
  metadata?: { name?: string; creationTimestamp?: string | null; deletionTimestamp?: string | null };
  spec?: {
    containers?: unknown[] | null;
    initContainers?: Array<{ name?: string; restartPolicy?: string | null }> | null;
    nodeName?: string;
    readinessGates?: Array<{ conditionType?: string }> | null;
  };
  status?: {
    phase?: string;
    reason?: string;
    conditions?: Array<{ type?: string; status?: string; reason?: string }> | null;
    initContainerStatuses?: ContainerStatusJson[] | null;
    containerStatuses?: ContainerStatusJson[] | null;
    podIPs?: Array<{ ip?: string }> | null;
    nominatedNodeName?: string;
  };
}

const SUCCEEDED: readonly RowCondition[] = [{ type: 'Completed', status: 'True', reason: 'Succeeded', message: 'The pod has completed successfully.' }];
const FAILED: readonly RowCondition[] = [{ type: 'Completed', status: 'True', reason: 'Failed', message: 'The pod failed.' }];

// node.NodeUnreachablePodReason: the node controller's reason for pods of a lost node.
const NODE_LOST = 'NodeLost';

// metav1.Time.Before: the zero time (undefined) is before every set time.
const before = (a: number | undefined, b: number | undefined): boolean => b !== undefined && (a === undefined || a < b);

export function printPod(pod: PodJson): PrintedRow {
  const spec = pod.spec ?? {};
  const status = pod.status ?? {};
  const conditions = status.conditions ?? [];
  let restarts = 0;
  let restartableInitContainerRestarts = 0;
  let totalContainers = (spec.containers ?? []).length;
  let readyContainers = 0;
  let lastRestartDate: number | undefined;
  let lastRestartableInitContainerRestartDate: number | undefined;

  const podPhase = status.phase ?? '';
  let reason = status.reason ? status.reason : podPhase;
  for (const c of conditions) if (c.type === 'PodScheduled' && c.reason === 'SchedulingGated') reason = 'SchedulingGated';

  let rowConditions: readonly RowCondition[] | undefined;
  if (podPhase === 'Succeeded') rowConditions = SUCCEEDED;
  else if (podPhase === 'Failed') rowConditions = FAILED;

  const initContainers = new Map<string, { restartPolicy?: string | null }>();
  for (const c of spec.initContainers ?? []) {
    initContainers.set(c.name ?? '', c);
    if (c.restartPolicy === 'Always') totalContainers++;
  }
  const restartable = (name: string | undefined): boolean => initContainers.get(name ?? '')?.restartPolicy === 'Always';

  let initializing = false;
  const initStatuses = status.initContainerStatuses ?? [];
  for (let i = 0; i < initStatuses.length; i++) {
    const container = initStatuses[i]!;
    restarts += container.restartCount ?? 0;
    const lastTerminated = container.lastState?.terminated;
    if (lastTerminated) {
      const at = timeOf(lastTerminated.finishedAt);
      if (before(lastRestartDate, at)) lastRestartDate = at;
    }
    if (restartable(container.name)) {
      restartableInitContainerRestarts += container.restartCount ?? 0;
      if (lastTerminated) {
        const at = timeOf(lastTerminated.finishedAt);
        if (before(lastRestartableInitContainerRestartDate, at)) lastRestartableInitContainerRestartDate = at;
      }
    }
    const terminated = container.state?.terminated;
    const waiting = container.state?.waiting;
    if (terminated && (terminated.exitCode ?? 0) === 0) continue;
    if (restartable(container.name) && container.started === true) {
      if (container.ready === true) readyContainers++;
      continue;
    }
    if (terminated) {
      // Initialization failed.
      if (!terminated.reason) reason = terminated.signal ? `Init:Signal:${terminated.signal}` : `Init:ExitCode:${terminated.exitCode ?? 0}`;
      else reason = `Init:${terminated.reason}`;
    } else if (waiting?.reason && waiting.reason !== 'PodInitializing') {
      reason = `Init:${waiting.reason}`;
    } else {
      reason = `Init:${i}/${(spec.initContainers ?? []).length}`;
    }
    initializing = true;
    break;
  }

  if (!initializing || conditions.find((c) => c.type === 'Initialized')?.status === 'True') {
    restarts = restartableInitContainerRestarts;
    lastRestartDate = lastRestartableInitContainerRestartDate;
    let hasRunning = false;
    let errorReason = '';
    const statuses = status.containerStatuses ?? [];
    for (let i = statuses.length - 1; i >= 0; i--) {
      const container = statuses[i]!;
      restarts += container.restartCount ?? 0;
      const lastTerminated = container.lastState?.terminated;
      if (lastTerminated) {
        const at = timeOf(lastTerminated.finishedAt);
        if (before(lastRestartDate, at)) lastRestartDate = at;
      }
      const waiting = container.state?.waiting;
      const terminated = container.state?.terminated;
      if (waiting && waiting.reason) {
        reason = waiting.reason;
      } else if (terminated) {
        if (terminated.reason) reason = terminated.reason;
        else if (terminated.signal) reason = `Signal:${terminated.signal}`;
        else reason = `ExitCode:${terminated.exitCode ?? 0}`;
        if ((terminated.exitCode ?? 0) !== 0) errorReason = reason;
      } else if (container.ready === true && container.state?.running) {
        hasRunning = true;
        readyContainers++;
      }
    }
    // Back to Running while a container still runs.
    if (reason === 'Completed') {
      if (hasRunning && conditions.some((c) => c.type === 'Ready' && c.status === 'True')) reason = 'Running';
      else if (errorReason !== '') reason = errorReason;
      else if (hasRunning) reason = 'NotReady';
    }
  }

  const deleting = typeof pod.metadata?.deletionTimestamp === 'string';
  if (deleting && status.reason === NODE_LOST) reason = 'Unknown';
  else if (deleting && podPhase !== 'Failed' && podPhase !== 'Succeeded') reason = 'Terminating';

  const restartsCell: Cell = restarts !== 0 && lastRestartDate !== undefined ? { at: lastRestartDate, before: `${restarts} (`, after: ' ago)' } : String(restarts);

  let readinessGates = '<none>';
  const gates = spec.readinessGates ?? [];
  if (gates.length > 0) {
    let trueConditions = 0;
    for (const gate of gates) {
      // The first condition of the gate's type decides.
      if (conditions.find((c) => c.type === gate.conditionType)?.status === 'True') trueConditions++;
    }
    readinessGates = `${trueConditions}/${gates.length}`;
  }
  const podIP = status.podIPs?.[0]?.ip || '<none>';

  return {
    cells: [
      pod.metadata?.name ?? '',
      `${readyContainers}/${totalContainers}`,
      reason,
      restartsCell,
      ageOf(timeOf(pod.metadata?.creationTimestamp)),
      podIP,
      spec.nodeName || '<none>',
      status.nominatedNodeName || '<none>',
      readinessGates,
    ],
    conditions: rowConditions,
  };
}
