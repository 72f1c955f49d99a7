// Which resources Levee caches and what the apiserver says about them. A resource is named as
// kubectl names it: "pods", "endpointslices.discovery.k8s.io", or with a version
// "apps/v1/deployments". Discovery supplies the version (the group's preferred one), the kind and
// the scope, for built-in resources and CRDs alike.
import { getJson, UpstreamStatusError } from '../upstream/client.ts';
import type { UpstreamPools } from '../upstream/pools.ts';

export interface ResourceSpec {
  group: string;
  /** Empty: the group's preferred version. */
  version: string;
  resource: string;
}

export interface ResourceInfo {
  group: string;
  version: string;
  resource: string;
  kind: string;
  namespaced: boolean;
  /** "/api/v1" or "/apis/apps/v1". */
  prefix: string;
}

export const DEFAULT_RESOURCES = ['pods', 'nodes', 'namespaces', 'services', 'endpointslices.discovery.k8s.io', 'configmaps'];

export function parseResourceSpec(spec: string): ResourceSpec {
  const s = spec.trim();
  if (s.includes('/')) {
    const parts = s.split('/');
    if (parts.length === 2) return { group: '', version: parts[0]!, resource: parts[1]! };
    if (parts.length === 3) return { group: parts[0]!, version: parts[1]!, resource: parts[2]! };
    throw new Error(`resource "${spec}": want resource[.group] or [group/]version/resource`);
  }
  const dot = s.indexOf('.');
  if (dot === -1) return { group: '', version: '', resource: s };
  return { group: s.slice(dot + 1), version: '', resource: s.slice(0, dot) };
}

export function resourceName(r: { group: string; resource: string }): string {
  return r.group === '' ? r.resource : `${r.resource}.${r.group}`;
}

interface APIResourceList {
  resources: Array<{ name: string; kind: string; namespaced: boolean; verbs: string[] }>;
}

/** The apiserver does not serve this resource, or not with list and watch: retrying will not help. */
export class UnknownResourceError extends Error {}

export async function discover(pools: UpstreamPools, spec: ResourceSpec): Promise<ResourceInfo> {
  let version = spec.version;
  if (version === '') {
    if (spec.group === '') version = 'v1';
    else {
      let group: { preferredVersion?: { version: string } };
      try {
        group = await getJson<{ preferredVersion?: { version: string } }>(pools, `/apis/${spec.group}`);
      } catch (err) {
        if (err instanceof UpstreamStatusError && err.code === 404) throw new UnknownResourceError(`${resourceName(spec)}: no API group ${spec.group}`);
        throw err;
      }
      if (!group.preferredVersion) throw new Error(`group ${spec.group} has no preferred version`);
      version = group.preferredVersion.version;
    }
  }
  const prefix = spec.group === '' ? `/api/${version}` : `/apis/${spec.group}/${version}`;
  let list: APIResourceList;
  try {
    list = await getJson<APIResourceList>(pools, prefix);
  } catch (err) {
    if (err instanceof UpstreamStatusError && err.code === 404) throw new UnknownResourceError(`${resourceName(spec)}: no API ${prefix}`);
    throw err;
  }
  const r = list.resources.find((x) => x.name === spec.resource);
  if (!r) throw new UnknownResourceError(`${resourceName(spec)}: no such resource in ${prefix}`);
  for (const verb of ['list', 'watch', 'get']) {
    if (!r.verbs.includes(verb)) throw new UnknownResourceError(`${resourceName(spec)}: the apiserver does not allow ${verb}, so it cannot be cached`);
  }
  return { group: spec.group, version, resource: spec.resource, kind: r.kind, namespaced: r.namespaced, prefix };
}
