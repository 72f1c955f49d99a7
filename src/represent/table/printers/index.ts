// The printers ported from the apiserver (pkg/printers/internalversion), by the group and kind of
// the objects they print. The apiserver prints internal objects; each printer reads the v1 JSON
// the cache holds, which converts field for field into what the printer reads: where a v1 field
// is a pointer the internal one is not, the printer reads an absent value as the conversion does.
import type { PrintedRow } from '../row.ts';
import { printConfigMap, printLease, printNamespace, printSecret, printServiceAccount } from './core.ts';
import { printEvent } from './event.ts';
import { printNode } from './node.ts';
import { printPod } from './pod.ts';
import { printEndpoints, printEndpointSlice, printService } from './service.ts';
import { printCronJob, printDaemonSet, printDeployment, printJob, printReplicaSet, printReplicationController, printStatefulSet } from './workloads.ts';

// The v1 JSON of one object, as each printer declares the fields it reads.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Printer = (object: any) => PrintedRow;

/** Printers by `Kind` (core) or `Kind.group`, as columns.json names the columns they fill. */
const PRINTERS: ReadonlyMap<string, Printer> = new Map<string, Printer>([
  ['Pod', printPod],
  ['Node', printNode],
  ['Namespace', printNamespace],
  ['Service', printService],
  ['Endpoints', printEndpoints],
  ['ConfigMap', printConfigMap],
  ['Secret', printSecret],
  ['ServiceAccount', printServiceAccount],
  // Core v1 events only: events.k8s.io names its fields differently.
  ['Event', printEvent],
  ['ReplicationController', printReplicationController],
  ['EndpointSlice.discovery.k8s.io', printEndpointSlice],
  ['Deployment.apps', printDeployment],
  ['ReplicaSet.apps', printReplicaSet],
  ['DaemonSet.apps', printDaemonSet],
  ['StatefulSet.apps', printStatefulSet],
  ['Job.batch', printJob],
  ['CronJob.batch', printCronJob],
  ['Lease.coordination.k8s.io', printLease],
]);

export function kindKey(group: string, kind: string): string {
  return group === '' ? kind : `${kind}.${group}`;
}

/** The printer of a built-in kind, if ported. */
export function printerOf(group: string, kind: string): Printer | undefined {
  return PRINTERS.get(kindKey(group, kind));
}
