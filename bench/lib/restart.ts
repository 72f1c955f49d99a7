// What the restart benchmarks (bench:massrestart, bench:restartab) share: their cluster, and the
// node agents' identities: a service account each, in one namespace whose accounts may read pods
// and nodes, with a token each from the TokenRequest API, as a DaemonSet's pods get theirs.
// bench:scale's agents read with the same grant.
import type { Dispatcher } from 'undici';
import { must, pool } from './client.ts';
import type { ClusterSize } from './pods.ts';

/** 5,000 realistic pods on 1,000 nodes (reused when present). */
export const RESTART_CLUSTER: ClusterSize = { pods: 5000, nodes: 1000, namespaces: 10, apps: 100 };

export const AGENTS_NS = 'levee-agents';

export interface Identities {
  /** The agents' tokens, one each. */
  tokens: string[];
  /** A token for any service account (Levee's own, for one). */
  tokenFor: (namespace: string, name: string) => Promise<string>;
}

/** The agents' namespace, and what its service accounts may read: pods and nodes. */
export async function grantAgents(server: string, admin: Dispatcher, token: string): Promise<void> {
  await must([201, 409], admin, token, 'POST', `${server}/api/v1/namespaces`, { metadata: { name: AGENTS_NS } });
  await must([201, 409], admin, token, 'POST', `${server}/apis/rbac.authorization.k8s.io/v1/clusterroles`, {
    metadata: { name: 'levee-bench-agent' },
    rules: [
      { apiGroups: [''], resources: ['pods'], verbs: ['list', 'watch'] },
      { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch'] },
    ],
  });
  await must([201, 409], admin, token, 'POST', `${server}/apis/rbac.authorization.k8s.io/v1/clusterrolebindings`, {
    metadata: { name: 'levee-bench-agent' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'levee-bench-agent' },
    subjects: [{ kind: 'Group', name: `system:serviceaccounts:${AGENTS_NS}`, apiGroup: 'rbac.authorization.k8s.io' }],
  });
}

export async function agentIdentities(server: string, admin: Dispatcher, token: string, count: number): Promise<Identities> {
  await grantAgents(server, admin, token);
  const tokenFor = async (namespace: string, name: string): Promise<string> => {
    const r = await must([201], admin, token, 'POST', `${server}/api/v1/namespaces/${namespace}/serviceaccounts/${name}/token`, {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: { expirationSeconds: 7200 },
    });
    return (JSON.parse(r.body) as { status: { token: string } }).status.token;
  };
  const tokens: string[] = [];
  await pool(count, 32, async (i) => {
    await must([201, 409], admin, token, 'POST', `${server}/api/v1/namespaces/${AGENTS_NS}/serviceaccounts`, { metadata: { name: `agent-${i}` } });
    tokens[i] = await tokenFor(AGENTS_NS, `agent-${i}`);
  });
  return { tokens, tokenFor };
}
