// Waiting for what a real cluster does eventually (RBAC reaching the authorizer, a cache syncing).
import { request, type Dispatcher } from 'undici';
import type { LeveeProcess } from './levee.ts';

export async function waitFor(what: string, check: () => Promise<boolean> | boolean, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Until Levee's /readyz answers 200 (every cached resource synced). */
export async function waitReady(levee: LeveeProcess, dispatcher?: Dispatcher, ms = 30_000): Promise<void> {
  await waitFor(
    `levee ready at ${levee.url.origin}`,
    async () => {
      const res = await request(`${levee.url.origin}/readyz`, dispatcher ? { dispatcher } : {});
      await res.body.text();
      return res.statusCode === 200;
    },
    ms,
  );
}

/**
 * Runs `compare` (undefined when two answers agree, else what differs) up to `attempts` times,
 * half a second apart, until they agree. The cluster moves under a test (its controllers, the
 * simulated nodes, namespaces of earlier tests going away), so two answers to the same question a
 * moment apart can differ; a difference that persists is returned.
 */
export async function persistentDifference(compare: () => Promise<string | undefined>, attempts = 3): Promise<string | undefined> {
  let difference: string | undefined;
  for (let i = 0; i < attempts; i++) {
    if (i > 0) await new Promise((r) => setTimeout(r, 500));
    difference = await compare();
    if (difference === undefined) return undefined;
  }
  return difference;
}
