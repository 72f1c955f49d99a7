// printDeployment, printReplicaSet, printDaemonSet, printStatefulSet, printReplicationController,
// printJob and printCronJob (pkg/printers/internalversion): desired against actual replicas, the
// pod template's containers and the selector.
import { ZERO_TIME as ZERO } from '../../gotime.ts';
import { humanDuration } from '../duration.ts';
import { formatLabels, formatLabelSelector, labelSelectorString, layoutContainerCells, type ContainerJson, type LabelSelectorJson } from '../format.ts';
import { ageOf, type Cell, type PrintedRow } from '../row.ts';
import { timeOf } from './time.ts';

interface Meta {
  metadata?: { name?: string; creationTimestamp?: string | null; deletionTimestamp?: string | null };
}

interface Template {
  spec?: { containers?: ContainerJson[] | null; nodeSelector?: Record<string, string> | null };
}

const name = (o: Meta): string => o.metadata?.name ?? '';
const age = (o: Meta): Cell => ageOf(timeOf(o.metadata?.creationTimestamp));

export function printDeployment(
  d: Meta & {
    spec?: { replicas?: number | null; selector?: LabelSelectorJson | null; template?: Template };
    status?: { updatedReplicas?: number; readyReplicas?: number; availableReplicas?: number };
  },
): PrintedRow {
  const [containers, images] = layoutContainerCells(d.spec?.template?.spec?.containers);
  return {
    cells: [
      name(d),
      `${d.status?.readyReplicas ?? 0}/${d.spec?.replicas ?? 0}`,
      d.status?.updatedReplicas ?? 0,
      d.status?.availableReplicas ?? 0,
      age(d),
      containers,
      images,
      // LabelSelectorAsSelector(…).String(), not FormatLabelSelector: an empty selector is "".
      labelSelectorString(d.spec?.selector) ?? '<invalid>',
    ],
  };
}

export function printReplicaSet(
  rs: Meta & { spec?: { replicas?: number | null; selector?: LabelSelectorJson | null; template?: Template }; status?: { replicas?: number; readyReplicas?: number } },
): PrintedRow {
  const [containers, images] = layoutContainerCells(rs.spec?.template?.spec?.containers);
  return {
    cells: [name(rs), rs.spec?.replicas ?? 0, rs.status?.replicas ?? 0, rs.status?.readyReplicas ?? 0, age(rs), containers, images, formatLabelSelector(rs.spec?.selector)],
  };
}

export function printReplicationController(
  rc: Meta & { spec?: { replicas?: number | null; selector?: Record<string, string> | null; template?: Template | null }; status?: { replicas?: number; readyReplicas?: number } },
): PrintedRow {
  const [containers, images] = layoutContainerCells(rc.spec?.template?.spec?.containers);
  return {
    cells: [name(rc), rc.spec?.replicas ?? 0, rc.status?.replicas ?? 0, rc.status?.readyReplicas ?? 0, age(rc), containers, images, formatLabels(rc.spec?.selector)],
  };
}

export function printDaemonSet(
  ds: Meta & {
    spec?: { selector?: LabelSelectorJson | null; template?: Template };
    status?: { desiredNumberScheduled?: number; currentNumberScheduled?: number; numberReady?: number; updatedNumberScheduled?: number; numberAvailable?: number };
  },
): PrintedRow {
  const s = ds.status ?? {};
  const [containers, images] = layoutContainerCells(ds.spec?.template?.spec?.containers);
  return {
    cells: [
      name(ds),
      s.desiredNumberScheduled ?? 0,
      s.currentNumberScheduled ?? 0,
      s.numberReady ?? 0,
      s.updatedNumberScheduled ?? 0,
      s.numberAvailable ?? 0,
      formatLabels(ds.spec?.template?.spec?.nodeSelector),
      age(ds),
      containers,
      images,
      formatLabelSelector(ds.spec?.selector),
    ],
  };
}

export function printStatefulSet(ss: Meta & { spec?: { replicas?: number | null; template?: Template }; status?: { readyReplicas?: number } }): PrintedRow {
  const [containers, images] = layoutContainerCells(ss.spec?.template?.spec?.containers);
  return { cells: [name(ss), `${ss.status?.readyReplicas ?? 0}/${ss.spec?.replicas ?? 0}`, age(ss), containers, images] };
}

type Conditions = Array<{ type?: string; status?: string }> | null | undefined;

// hasJobCondition: the first condition of the type decides.
const hasCondition = (conditions: Conditions, type: string): boolean => (conditions ?? []).find((c) => c.type === type)?.status === 'True';

export function printJob(
  job: Meta & {
    spec?: { completions?: number | null; parallelism?: number | null; selector?: LabelSelectorJson | null; template?: Template };
    status?: { succeeded?: number; startTime?: string | null; completionTime?: string | null; conditions?: Conditions };
  },
): PrintedRow {
  const spec = job.spec ?? {};
  const status = job.status ?? {};
  const succeeded = status.succeeded ?? 0;
  let completions: string;
  if (spec.completions !== undefined && spec.completions !== null) completions = `${succeeded}/${spec.completions}`;
  else {
    const parallelism = spec.parallelism ?? 0;
    completions = parallelism > 1 ? `${succeeded}/1 of ${parallelism}` : `${succeeded}/1`;
  }
  const start = timeOf(status.startTime);
  const completion = timeOf(status.completionTime);
  let duration: Cell = '';
  // A set pointer holding an unreadable time is the zero time: nil-ness is what the printer asks.
  if (status.startTime !== undefined && status.startTime !== null) {
    const startAt = start ?? ZERO;
    if (status.completionTime === undefined || status.completionTime === null) duration = { at: startAt };
    else duration = humanDuration((completion ?? ZERO) - startAt);
  }
  let state: string;
  if (hasCondition(status.conditions, 'Complete')) state = 'Complete';
  else if (hasCondition(status.conditions, 'Failed')) state = 'Failed';
  else if (typeof job.metadata?.deletionTimestamp === 'string') state = 'Terminating';
  else if (hasCondition(status.conditions, 'Suspended')) state = 'Suspended';
  else if (hasCondition(status.conditions, 'FailureTarget')) state = 'FailureTarget';
  else if (hasCondition(status.conditions, 'SuccessCriteriaMet')) state = 'SuccessCriteriaMet';
  else state = 'Running';
  const [containers, images] = layoutContainerCells(spec.template?.spec?.containers);
  return { cells: [name(job), state, completions, duration, age(job), containers, images, formatLabelSelector(spec.selector)] };
}

export function printCronJob(
  cj: Meta & {
    spec?: {
      schedule?: string;
      timeZone?: string | null;
      suspend?: boolean | null;
      jobTemplate?: { spec?: { selector?: LabelSelectorJson | null; template?: Template } };
    };
    status?: { active?: unknown[] | null; lastScheduleTime?: string | null };
  },
): PrintedRow {
  const spec = cj.spec ?? {};
  const last = cj.status?.lastScheduleTime;
  const lastSchedule: Cell = last === undefined || last === null ? '<none>' : ageOf(timeOf(last));
  const suspend = spec.suspend === undefined || spec.suspend === null ? '<unset>' : spec.suspend ? 'True' : 'False';
  const [containers, images] = layoutContainerCells(spec.jobTemplate?.spec?.template?.spec?.containers);
  return {
    cells: [name(cj), spec.schedule ?? '', spec.timeZone ?? '<none>', suspend, (cj.status?.active ?? []).length, lastSchedule, age(cj), containers, images, formatLabelSelector(spec.jobTemplate?.spec?.selector)],
  };
}
