// What the apiserver says about a cached resource: for a built-in one, discovery supplies the
// version (the group's preferred one unless the name pins it), the kind and the scope; a custom
// resource's come from its CustomResourceDefinition (cache/definitions.ts).
import { getJson, UpstreamStatusError } from '../upstream/client.ts';
import type { UpstreamPools } from '../upstream/pools.ts';
import type { ResourceInfo } from '../api/resource.ts';
import type { ResourceSpec } from './names.ts';

export const DEFAULT_RESOURCES = ['pods', 'nodes', 'namespaces', 'services', 'endpointslices.discovery.k8s.io', 'configmaps'];

interface APIResourceList {
  resources: Array<{ name: string; kind: string; namespaced: boolean; verbs: string[] }>;
}

/** The apiserver does not serve this resource (its group, version or name is unknown): it may later. */
export class NotServedError extends Error {}

/** The apiserver serves this resource, but not with list and watch: retrying will not help. */
export class NotCacheableError extends Error {}

export async function discover(pools: UpstreamPools, spec: ResourceSpec): Promise<ResourceInfo> {
  let version = spec.version;
  if (version === '') {
    if (spec.group === '') version = 'v1';
    else {
      let group: { preferredVersion?: { version: string } };
      try {
        group = await getJson<{ preferredVersion?: { version: string } }>(pools, `/apis/${spec.group}`);
      } catch (err) {
        if (err instanceof UpstreamStatusError && err.code === 404) throw new NotServedError(`no API group ${spec.group}`);
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
    if (err instanceof UpstreamStatusError && err.code === 404) throw new NotServedError(`no API ${prefix}`);
    throw err;
  }
  const r = list.resources.find((x) => x.name === spec.resource);
  if (!r) throw new NotServedError(`no such resource in ${prefix}`);
  for (const verb of ['list', 'watch', 'get']) {
    if (!r.verbs.includes(verb)) throw new NotCacheableError(`the apiserver does not allow ${verb}, so it cannot be cached`);
  }
  return { group: spec.group, version, resource: spec.resource, kind: r.kind, namespaced: r.namespaced, prefix };
}
