// What tests need from a cluster whose controllers, scheduler and nodes run (test/env/testenv.ts):
// namespaces the controllers are done with, pods no scheduler touches, and Node objects for pods
// bound to nodes nothing runs. Each works on a bare environment too.
import type { Dispatcher } from 'undici';
import type { TestEnv } from '../env/testenv.ts';
import { get, send } from './http.ts';
import { waitFor } from './wait.ts';

/**
 * A scheduler nobody runs: a pod that names it stays Pending and unbound. kube-scheduler binds
 * only pods of its own ("default-scheduler", the default), so every other pod a test creates
 * without a node lands on a node and, on a simulated one, changes as it starts.
 */
export const NO_SCHEDULER = 'levee-test-unscheduled';

/**
 * Creates a namespace and resolves once the controllers are done with it (namespaceReady), so
 * nothing more appears in it behind the test's back.
 */
export async function createNamespace(env: TestEnv, dispatcher: Dispatcher, name: string, labels?: Record<string, string>): Promise<void> {
  const res = await send('POST', `${env.server}/api/v1/namespaces`, dispatcher, env.tokens.admin, { metadata: { name, ...(labels ? { labels } : {}) } });
  if (res.status !== 201) throw new Error(`creating namespace ${name}: ${res.status} ${res.body}`);
  await namespaceReady(env, dispatcher, name);
}

/**
 * Resolves once the controllers have set up a new namespace: its "default" ServiceAccount (without
 * which no pod is admitted) and its "kube-root-ca.crt" ConfigMap exist. Bare, nothing to wait for.
 */
export async function namespaceReady(env: TestEnv, dispatcher: Dispatcher, name: string): Promise<void> {
  if (env.bare) return;
  await waitFor(
    `the controllers to set up namespace ${name}`,
    async () => {
      const [sa, cm] = await Promise.all([
        get(`${env.server}/api/v1/namespaces/${name}/serviceaccounts/default`, dispatcher, env.tokens.admin),
        get(`${env.server}/api/v1/namespaces/${name}/configmaps/kube-root-ca.crt`, dispatcher, env.tokens.admin),
      ]);
      return sa.status === 200 && cm.status === 200;
    },
    60_000,
  );
}

/**
 * Node objects for pods that tests bind to nodes nothing runs: the pod garbage collector deletes a
 * pod whose node does not exist (within about a minute). Unschedulable, so the scheduler puts no
 * other pod there, and without KWOK's annotation, so no fake kubelet takes them over. A name that
 * exists already is kept. Resolves with the names created here, for the test to delete.
 */
export async function createNodes(env: TestEnv, dispatcher: Dispatcher, names: readonly string[]): Promise<string[]> {
  const created: string[] = [];
  for (const name of names) {
    const res = await send('POST', `${env.server}/api/v1/nodes`, dispatcher, env.tokens.admin, { metadata: { name }, spec: { unschedulable: true } });
    if (res.status === 201) created.push(name);
    else if (res.status !== 409) throw new Error(`creating node ${name}: ${res.status} ${res.body}`);
  }
  return created;
}

/** Deletes Node objects (createNodes' answer); the pods bound to them are then garbage-collected. */
export async function deleteNodes(env: TestEnv, dispatcher: Dispatcher, names: readonly string[]): Promise<void> {
  for (const name of names) await send('DELETE', `${env.server}/api/v1/nodes/${name}`, dispatcher, env.tokens.admin);
}
