// printNode (pkg/printers/internalversion): readiness and scheduling, roles from labels, versions.
import { compareGo } from '../../../selectors/gostrings.ts';
import { ageOf, type PrintedRow } from '../row.ts';
import { timeOf } from './time.ts';

interface NodeJson {
  metadata?: { name?: string; creationTimestamp?: string | null; labels?: Record<string, string> | null };
  spec?: { unschedulable?: boolean };
  status?: {
    conditions?: Array<{ type?: string; status?: string }> | null;
    addresses?: Array<{ type?: string; address?: string }> | null;
    nodeInfo?: { kubeletVersion?: string; osImage?: string; kernelVersion?: string; containerRuntimeVersion?: string; architecture?: string };
  };
}

const ROLE_PREFIX = 'node-role.kubernetes.io/';
const ROLE_LABEL = 'kubernetes.io/role';

/** findNodeRoles: node-role.kubernetes.io/<role> labels and kubernetes.io/role=<role>, sorted, once each. */
function roles(labels: Readonly<Record<string, string>>): string[] {
  const found = new Set<string>();
  for (const [k, v] of Object.entries(labels)) {
    if (k.startsWith(ROLE_PREFIX)) {
      const role = k.slice(ROLE_PREFIX.length);
      if (role.length > 0) found.add(role);
    } else if (k === ROLE_LABEL && v !== '') found.add(v);
  }
  return [...found].sort(compareGo);
}

export function printNode(node: NodeJson): PrintedRow {
  const status = node.status ?? {};
  // The last condition of a type is the one that counts (a map keyed by type).
  const ready = (status.conditions ?? []).findLast((c) => c.type === 'Ready');
  const states: string[] = [];
  if (ready) states.push(ready.status === 'True' ? 'Ready' : 'NotReady');
  if (states.length === 0) states.push('Unknown');
  if (node.spec?.unschedulable === true) states.push('SchedulingDisabled');
  const info = status.nodeInfo ?? {};
  let kernel = info.kernelVersion || '<unknown>';
  if (info.architecture) kernel += ` (${info.architecture})`;
  const address = (type: string): string => (status.addresses ?? []).find((a) => a.type === type)?.address ?? '<none>';
  return {
    cells: [
      node.metadata?.name ?? '',
      states.join(','),
      roles(node.metadata?.labels ?? {}).join(',') || '<none>',
      ageOf(timeOf(node.metadata?.creationTimestamp)),
      info.kubeletVersion ?? '',
      address('InternalIP'),
      address('ExternalIP'),
      info.osImage || '<unknown>',
      kernel,
      info.containerRuntimeVersion || '<unknown>',
    ],
  };
}
