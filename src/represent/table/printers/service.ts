// printService, printEndpoints and printEndpointSlice (pkg/printers/internalversion): where a
// service is reached and what backs it.
import { compareGo } from '../../../selectors/gostrings.ts';
import { ageOf, type PrintedRow } from '../row.ts';
import { formatLabels } from '../format.ts';
import { timeOf } from './time.ts';

interface Meta {
  metadata?: { name?: string; creationTimestamp?: string | null };
}

interface ServiceJson extends Meta {
  spec?: {
    type?: string;
    clusterIPs?: string[] | null;
    externalIPs?: string[] | null;
    externalName?: string;
    ports?: Array<{ port?: number; nodePort?: number; protocol?: string }> | null;
    selector?: Record<string, string> | null;
  };
  status?: { loadBalancer?: { ingress?: Array<{ ip?: string; hostname?: string }> | null } };
}

// loadBalancerStatusStringer, as the server's wide table writes it (not clipped): each ingress'
// IP or else hostname, sorted, once each.
function loadBalancerIngress(s: ServiceJson['status']): string {
  const found = new Set<string>();
  for (const i of s?.loadBalancer?.ingress ?? []) {
    if (i.ip) found.add(i.ip);
    else if (i.hostname) found.add(i.hostname);
  }
  return [...found].sort(compareGo).join(',');
}

function externalIP(svc: ServiceJson): string {
  const external = svc.spec?.externalIPs ?? [];
  switch (svc.spec?.type) {
    case 'ClusterIP':
    case 'NodePort':
      return external.length > 0 ? external.join(',') : '<none>';
    case 'LoadBalancer': {
      const lb = loadBalancerIngress(svc.status);
      if (external.length > 0) return [...(lb.length > 0 ? lb.split(',') : []), ...external].join(',');
      return lb.length > 0 ? lb : '<pending>';
    }
    case 'ExternalName':
      return svc.spec.externalName ?? '';
    default:
      return '<unknown>';
  }
}

export function printService(svc: ServiceJson): PrintedRow {
  const ports = (svc.spec?.ports ?? [])
    .map((p) => ((p.nodePort ?? 0) > 0 ? `${p.port ?? 0}:${p.nodePort}/${p.protocol ?? ''}` : `${p.port ?? 0}/${p.protocol ?? ''}`))
    .join(',');
  return {
    cells: [
      svc.metadata?.name ?? '',
      svc.spec?.type ?? '',
      svc.spec?.clusterIPs?.[0] ?? '<none>',
      externalIP(svc),
      ports || '<none>',
      ageOf(timeOf(svc.metadata?.creationTimestamp)),
      formatLabels(svc.spec?.selector),
    ],
  };
}

interface EndpointsJson extends Meta {
  subsets?: Array<{ addresses?: Array<{ ip?: string }> | null; ports?: Array<{ port?: number }> | null }> | null;
}

// net.JoinHostPort: an IPv6 address in brackets.
const hostPort = (ip: string, port: number): string => (ip.includes(':') ? `[${ip}]:${port}` : `${ip}:${port}`);

/** formatEndpoints with every port: at most three addresses, then how many more. */
function formatEndpoints(e: EndpointsJson): string {
  const subsets = e.subsets ?? [];
  if (subsets.length === 0) return '<none>';
  const list: string[] = [];
  const max = 3;
  let more = false;
  let count = 0;
  for (const ss of subsets) {
    const addresses = ss.addresses ?? [];
    const ports = ss.ports ?? [];
    if (ports.length === 0) {
      // Headless services with no ports.
      count += addresses.length;
      for (const a of addresses) {
        if (list.length === max) {
          more = true;
          break;
        }
        list.push(a.ip ?? '');
      }
      continue;
    }
    for (const port of ports) {
      count += addresses.length;
      for (const a of addresses) {
        if (list.length === max) {
          more = true;
          break;
        }
        list.push(hostPort(a.ip ?? '', port.port ?? 0));
      }
    }
  }
  const s = list.join(',');
  return more ? `${s} + ${count - max} more...` : s;
}

export function printEndpoints(e: EndpointsJson): PrintedRow {
  return { cells: [e.metadata?.name ?? '', formatEndpoints(e), ageOf(timeOf(e.metadata?.creationTimestamp))] };
}

interface EndpointSliceJson extends Meta {
  addressType?: string;
  ports?: Array<{ port?: number | null; name?: string | null }> | null;
  endpoints?: Array<{ addresses?: string[] | null }> | null;
}

function listWithMore(list: string[], more: boolean, count: number, max: number): string {
  const s = list.join(',');
  if (more) return `${s} + ${count - max} more...`;
  return s === '' ? '<unset>' : s;
}

export function printEndpointSlice(s: EndpointSliceJson): PrintedRow {
  const max = 3;
  const ports: string[] = [];
  let portsMore = false;
  let portCount = 0;
  for (const p of s.ports ?? []) {
    if (ports.length < max) ports.push(p.port !== undefined && p.port !== null ? String(p.port) : p.name !== undefined && p.name !== null ? p.name : '*');
    else portsMore = true;
    portCount++;
  }
  const addresses: string[] = [];
  let addressesMore = false;
  let addressCount = 0;
  for (const e of s.endpoints ?? []) {
    for (const a of e.addresses ?? []) {
      if (addresses.length < max) addresses.push(a);
      else addressesMore = true;
      addressCount++;
    }
  }
  return {
    cells: [
      s.metadata?.name ?? '',
      s.addressType ?? '',
      listWithMore(ports, portsMore, portCount, max),
      listWithMore(addresses, addressesMore, addressCount, max),
      ageOf(timeOf(s.metadata?.creationTimestamp)),
    ],
  };
}
