// How --cache names resources: as kubectl does ("pods", "endpointslices.discovery.k8s.io",
// "apps/v1/deployments"), or as a pattern over custom resources:
//   *.example.com        every resource of the group example.com
//   *.*.example.com      every resource of every group below example.com (a.example.com, a.b.example.com)
//   widgets.*            the resource widgets of every group
//   *.*                  every custom resource
// `*` stands for a whole resource name, a whole group, or the leading part of a group before a
// domain; a pattern always has a group (core resources are built-in and named one by one) and no
// version (a matched resource is cached at its CRD's preferred version). Patterns match only
// resources that a CustomResourceDefinition defines.

export interface ResourceSpec {
  group: string;
  /** Empty: the preferred version. */
  version: string;
  resource: string;
}

export interface ResourcePattern {
  /** As written, for messages. */
  text: string;
  /** A resource name, or "*". */
  resource: string;
  /** A group, "*" for every group, or "*.DOMAIN" for every group below DOMAIN. */
  group: string;
}

export class ResourceNameError extends Error {}

const WILDCARD = '*';
// Resource names are DNS labels, groups DNS subdomains, versions DNS labels: lower-case
// alphanumerics and '-', dots between a group's labels.
const LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

function isSubdomain(s: string): boolean {
  return s.split('.').every((l) => LABEL.test(l));
}

/** True when the name is a pattern (has a `*`); parsePattern then tells whether it is a valid one. */
export function isPattern(spec: string): boolean {
  return spec.includes(WILDCARD);
}

/** A resource named exactly, in one of kubectl's forms; a ResourceNameError when malformed. */
export function parseResourceSpec(spec: string): ResourceSpec {
  const s = spec.trim();
  if (isPattern(s)) throw new ResourceNameError(`resource "${spec}": a pattern, not a resource`);
  let out: ResourceSpec;
  if (s.includes('/')) {
    const parts = s.split('/');
    if (parts.length === 2) out = { group: '', version: parts[0]!, resource: parts[1]! };
    else if (parts.length === 3) out = { group: parts[0]!, version: parts[1]!, resource: parts[2]! };
    else throw new ResourceNameError(`resource "${spec}": want resource[.group] or [group/]version/resource`);
    if (!LABEL.test(out.version)) throw new ResourceNameError(`resource "${spec}": "${out.version}" is not a version`);
  } else {
    const dot = s.indexOf('.');
    out = dot === -1 ? { group: '', version: '', resource: s } : { group: s.slice(dot + 1), version: '', resource: s.slice(0, dot) };
  }
  if (!LABEL.test(out.resource)) throw new ResourceNameError(`resource "${spec}": "${out.resource}" is not a resource name`);
  if (out.group !== '' && !isSubdomain(out.group)) throw new ResourceNameError(`resource "${spec}": "${out.group}" is not a group`);
  return out;
}

/** A pattern of resource.group with `*` parts; a ResourceNameError when it is not one of the forms above. */
export function parsePattern(spec: string): ResourcePattern {
  const s = spec.trim();
  const bad = (why: string): ResourceNameError => new ResourceNameError(`resource pattern "${spec}": ${why}`);
  if (s.includes('/')) throw bad('a pattern names no version (a matched resource is cached at its preferred version)');
  const dot = s.indexOf('.');
  if (dot === -1) throw bad('a pattern needs a group, as in *.example.com (core resources are named one by one)');
  const resource = s.slice(0, dot);
  const group = s.slice(dot + 1);
  if (resource !== WILDCARD && !LABEL.test(resource)) throw bad(`"${resource}" is neither a resource name nor *`);
  if (group !== WILDCARD) {
    const domain = group.startsWith(`${WILDCARD}.`) ? group.slice(2) : group;
    if (!isSubdomain(domain)) throw bad(`"${group}" is neither a group, *, nor *.DOMAIN (* stands for whole names only)`);
  }
  if (!isPattern(s)) throw bad('no *');
  return { text: s, resource, group };
}

/** Whether a pattern takes a resource of a group. */
export function matchesPattern(p: ResourcePattern, group: string, resource: string): boolean {
  if (p.resource !== WILDCARD && p.resource !== resource) return false;
  if (p.group === WILDCARD) return group !== '';
  if (p.group.startsWith(`${WILDCARD}.`)) return group.endsWith(p.group.slice(1));
  return group === p.group;
}

/** Checks a --cache entry; the error says what is wrong, or undefined when it is fine. */
export function resourceNameProblem(spec: string): string | undefined {
  try {
    if (isPattern(spec)) parsePattern(spec);
    else parseResourceSpec(spec);
    return undefined;
  } catch (err) {
    if (err instanceof ResourceNameError) return err.message;
    throw err;
  }
}

export function resourceName(r: { group: string; resource: string }): string {
  return r.group === '' ? r.resource : `${r.resource}.${r.group}`;
}

/**
 * apimachinery's version.CompareKubeAwareVersionStrings: positive when a goes before b in
 * discovery's order (v2, v1, v1beta2, v1beta1, v1alpha1, then other strings alphabetically).
 */
export function compareKubeAwareVersions(a: string, b: string): number {
  if (a === b) return 0;
  const x = parseKubeVersion(a);
  const y = parseKubeVersion(b);
  if (!x && !y) return b < a ? -1 : 1;
  if (!x) return -1;
  if (!y) return 1;
  if (x.type !== y.type) return x.type - y.type;
  if (x.major !== y.major) return x.major - y.major;
  return x.minor - y.minor;
}

const KUBE_VERSION = /^v(\d+)(?:(alpha|beta)(\d+))?$/;

function parseKubeVersion(v: string): { major: number; type: number; minor: number } | undefined {
  const m = KUBE_VERSION.exec(v);
  if (!m) return undefined;
  const type = m[2] === 'alpha' ? 0 : m[2] === 'beta' ? 1 : 2;
  return { major: Number(m[1]), type, minor: type === 2 ? 0 : Number(m[3]) };
}
