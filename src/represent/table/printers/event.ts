// printEvent (pkg/printers/internalversion): when an event was first and last seen (from the
// core/v1 fields, or the newer eventTime and series), what it is about and who reported it.
import { ageOf, type Cell, type PrintedRow } from '../row.ts';
import { trimSpace } from '../format.ts';
import { timeOf } from './time.ts';

interface EventJson {
  metadata?: { name?: string };
  involvedObject?: { kind?: string; name?: string; fieldPath?: string };
  reason?: string;
  message?: string;
  source?: { component?: string; host?: string };
  firstTimestamp?: string | null;
  lastTimestamp?: string | null;
  count?: number;
  type?: string;
  eventTime?: string | null;
  series?: { count?: number; lastObservedTime?: string | null } | null;
  reportingComponent?: string;
  reportingInstance?: string;
}

export function printEvent(e: EventJson): PrintedRow {
  const firstAt = timeOf(e.firstTimestamp);
  const first: Cell = firstAt !== undefined ? { at: firstAt } : ageOf(timeOf(e.eventTime));
  const lastAt = timeOf(e.lastTimestamp);
  let last: Cell = lastAt !== undefined ? { at: lastAt } : first;
  let count = e.count ?? 0;
  if (e.series) {
    last = ageOf(timeOf(e.series.lastObservedTime));
    count = e.series.count ?? 0;
  } else if (count === 0) {
    // Singleton events of the newer API have no count.
    count = 1;
  }
  const kind = (e.involvedObject?.kind ?? '').toLowerCase();
  const target = e.involvedObject?.name ? `${kind}/${e.involvedObject.name}` : kind;
  const component = e.source?.component || e.reportingComponent || '';
  const instance = e.source?.host || e.reportingInstance || '';
  return {
    cells: [
      last,
      e.type ?? '',
      e.reason ?? '',
      target,
      e.involvedObject?.fieldPath ?? '',
      instance === '' ? component : `${component}, ${instance}`,
      trimSpace(e.message ?? ''),
      first,
      count,
      e.metadata?.name ?? '',
    ],
  };
}
