// Service-account tokens from the real apiserver (TokenRequest), for tests that run Levee or a
// client under a shipped role.
import assert from 'node:assert/strict';
import type { Dispatcher } from 'undici';
import type { TestEnv } from '../env/testenv.ts';
import { send } from './http.ts';

export async function serviceAccountToken(env: TestEnv, dispatcher: Dispatcher, namespace: string, name: string): Promise<string> {
  const res = await send('POST', `${env.server}/api/v1/namespaces/${namespace}/serviceaccounts/${name}/token`, dispatcher, env.tokens.admin, {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: { expirationSeconds: 3600 },
  });
  assert.equal(res.status, 201, res.body);
  return (JSON.parse(res.body) as { status: { token: string } }).status.token;
}
