// printNamespace, printConfigMap, printSecret, printServiceAccount and printLease
// (pkg/printers/internalversion): names, counts and phases.
import { ageOf, type PrintedRow } from '../row.ts';
import { timeOf } from './time.ts';

interface Meta {
  metadata?: { name?: string; creationTimestamp?: string | null };
}

const name = (o: Meta): string => o.metadata?.name ?? '';
const age = (o: Meta) => ageOf(timeOf(o.metadata?.creationTimestamp));
const size = (m: object | null | undefined): number => (m ? Object.keys(m).length : 0);

export function printNamespace(o: Meta & { status?: { phase?: string } }): PrintedRow {
  return { cells: [name(o), o.status?.phase ?? '', age(o)] };
}

export function printConfigMap(o: Meta & { data?: object | null; binaryData?: object | null }): PrintedRow {
  return { cells: [name(o), size(o.data) + size(o.binaryData), age(o)] };
}

export function printSecret(o: Meta & { type?: string; data?: object | null }): PrintedRow {
  return { cells: [name(o), o.type ?? '', size(o.data), age(o)] };
}

export function printServiceAccount(o: Meta): PrintedRow {
  return { cells: [name(o), age(o)] };
}

export function printLease(o: Meta & { spec?: { holderIdentity?: string | null } }): PrintedRow {
  return { cells: [name(o), o.spec?.holderIdentity ?? '', age(o)] };
}
