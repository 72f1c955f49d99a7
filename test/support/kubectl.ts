// Runs the kubectl built with the test environment.
import { execFile } from 'node:child_process';
import { tempDir } from './tempdir.ts';

// One discovery cache per test process, so runs never see each other's cached discovery.
const CACHE_DIR = tempDir('levee-kubectl-cache-');

export interface KubectlResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function kubectl(bin: string, kubeconfig: string, args: string[], stdin?: string): Promise<KubectlResult> {
  return new Promise((resolve) => {
    const child = execFile(
      bin,
      ['--kubeconfig', kubeconfig, ...args],
      { maxBuffer: 256 * 1024 * 1024, env: { ...process.env, KUBECACHEDIR: CACHE_DIR } },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
    if (stdin !== undefined) child.stdin!.end(stdin);
  });
}
