// RBAC evaluated locally, from Levee's own cache of Roles, ClusterRoles and their bindings: a port
// of the apiserver's RBAC authorizer (plugin/pkg/auth/authorizer/rbac and the rule matching of
// pkg/apis/rbac/v1/evaluation_helpers.go). It only ever says "allowed": when RBAC grants a request
// the apiserver allows it too (RBAC is one authorizer of a union), but when RBAC does not, another
// authorizer (Node, a webhook) still may, so that answer is left to a SubjectAccessReview. With it,
// thousands of agents with their own identities cost the apiserver no review per identity.
import type { Store } from '../store/store.ts';
import type { Attributes } from '../api/attributes.ts';
import type { UserInfo } from '../api/user.ts';

interface PolicyRule {
  verbs?: string[];
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
}

interface Subject {
  kind: string;
  name: string;
  namespace?: string;
}

interface Binding {
  namespace: string;
  subjects: Subject[];
  roleRef: { kind: string; name: string };
}

interface RbacObject {
  metadata: { name: string; namespace?: string };
  rules?: PolicyRule[] | null;
  subjects?: Subject[] | null;
  roleRef?: { kind: string; name: string };
}

export const RBAC_RESOURCES = [
  'roles.rbac.authorization.k8s.io',
  'rolebindings.rbac.authorization.k8s.io',
  'clusterroles.rbac.authorization.k8s.io',
  'clusterrolebindings.rbac.authorization.k8s.io',
];

interface RbacIndex {
  roles: Map<string, PolicyRule[]>;
  clusterRoles: Map<string, PolicyRule[]>;
  bindings: Map<string, Binding[]>;
  clusterBindings: Binding[];
}

export class LocalRbac {
  readonly #lookup: (resource: string) => Store | undefined;
  #index: RbacIndex | undefined;
  // The stores whose changes already invalidate the index (a store replaced by a relist is new).
  readonly #watched = new WeakSet<Store>();

  /** `lookup` finds the stores of the cached RBAC resources by name (roles, rolebindings, ...). */
  constructor(lookup: (resource: string) => Store | undefined) {
    this.#lookup = lookup;
  }

  /** True when RBAC grants the request; false when it does not, or the RBAC cache is not synced. */
  allows(user: UserInfo, attrs: Attributes): boolean {
    const index = this.#current();
    if (!index) return false;
    const namespace = 'resource' in attrs ? attrs.namespace : '';
    const grants = (rules: PolicyRule[] | undefined): boolean => (rules ?? []).some((r) => ruleAllows(r, attrs));
    for (const b of index.clusterBindings) {
      if (appliesTo(b, user) && grants(index.clusterRoles.get(b.roleRef.name))) return true;
    }
    if (namespace) {
      for (const b of index.bindings.get(namespace) ?? []) {
        if (!appliesTo(b, user)) continue;
        const rules = b.roleRef.kind === 'ClusterRole' ? index.clusterRoles.get(b.roleRef.name) : index.roles.get(`${namespace}/${b.roleRef.name}`);
        if (grants(rules)) return true;
      }
    }
    return false;
  }

  /** The parsed policy, rebuilt after any change to the four resources; undefined until all are synced. */
  #current(): RbacIndex | undefined {
    const [roles, roleBindings, clusterRoles, clusterBindings] = RBAC_RESOURCES.map((r) => this.#lookup(r));
    if (!roles?.synced || !roleBindings?.synced || !clusterRoles?.synced || !clusterBindings?.synced) return undefined;
    for (const store of [roles, roleBindings, clusterRoles, clusterBindings]) {
      if (this.#watched.has(store)) continue;
      this.#watched.add(store);
      const dirty = (): void => void (this.#index = undefined);
      store.listen({ event: dirty, replaced: dirty, progressed: () => undefined });
    }
    if (this.#index) return this.#index;
    const parse = (store: Store): RbacObject[] => [...store.tree.values()].map((o) => JSON.parse(o.item.toString()) as RbacObject);
    const index: RbacIndex = { roles: new Map(), clusterRoles: new Map(), bindings: new Map(), clusterBindings: [] };
    for (const o of parse(roles)) index.roles.set(`${o.metadata.namespace}/${o.metadata.name}`, o.rules ?? []);
    for (const o of parse(clusterRoles)) index.clusterRoles.set(o.metadata.name, o.rules ?? []);
    for (const o of parse(roleBindings)) {
      const ns = o.metadata.namespace ?? '';
      const list = index.bindings.get(ns) ?? [];
      list.push({ namespace: ns, subjects: o.subjects ?? [], roleRef: o.roleRef! });
      index.bindings.set(ns, list);
    }
    for (const o of parse(clusterBindings)) index.clusterBindings.push({ namespace: '', subjects: o.subjects ?? [], roleRef: o.roleRef! });
    this.#index = index;
    return index;
  }
}

/** appliesTo: a binding's subject names the user, one of its groups, or its service account. */
function appliesTo(b: Binding, user: UserInfo): boolean {
  return b.subjects.some((s) => {
    switch (s.kind) {
      case 'User':
        return s.name === user.username;
      case 'Group':
        return user.groups.includes(s.name);
      case 'ServiceAccount':
        return user.username === `system:serviceaccount:${s.namespace || b.namespace}:${s.name}`;
      default:
        return false;
    }
  });
}

export function ruleAllows(rule: PolicyRule, attrs: Attributes): boolean {
  if (!has(rule.verbs, attrs.verb)) return false;
  if (!('resource' in attrs)) return nonResourceURLMatches(rule.nonResourceURLs, attrs.path);
  if (!has(rule.apiGroups, attrs.group)) return false;
  const sub = attrs.subresource ?? '';
  const combined = sub ? `${attrs.resource}/${sub}` : attrs.resource;
  if (!(rule.resources ?? []).some((r) => r === '*' || r === combined || (sub !== '' && r === `*/${sub}`))) return false;
  return !rule.resourceNames?.length || rule.resourceNames.includes(attrs.name);
}

function has(values: string[] | undefined, v: string): boolean {
  return (values ?? []).some((x) => x === '*' || x === v);
}

function nonResourceURLMatches(urls: string[] | undefined, path: string): boolean {
  return (urls ?? []).some((u) => u === '*' || u === path || (u.endsWith('*') && path.startsWith(u.slice(0, -1))));
}
