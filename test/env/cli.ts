// npm run testenv -- up|down|status
import { down, status, up } from './testenv.ts';

const usage = 'usage: npm run testenv -- up|down|status';

async function main(cmd: string | undefined): Promise<number> {
  switch (cmd) {
    case 'up': {
      const env = await up();
      console.log(`kube-apiserver ${env.version} at ${env.server}, etcd at ${env.etcd}`);
      console.log(`environment: ${env.logs.replace(/logs$/, 'env.json')}`);
      console.log(`try: ${env.kubectl} --kubeconfig ${env.kubeconfig} get ns`);
      return 0;
    }
    case 'down':
      await down();
      console.log('down');
      return 0;
    case 'status': {
      const s = await status();
      const pid = (p: number | null): string => (p ? ` (pid ${p})` : '');
      console.log(`etcd:           ${s.etcd.running ? 'running' : 'not running'}${pid(s.etcd.pid)}`);
      console.log(`kube-apiserver: ${s.apiserver.running ? 'running' : 'not running'}${pid(s.apiserver.pid)}`);
      console.log(`/readyz:        ${s.apiserver.ready ? 'ok' : 'not ready'}${s.server ? ` (${s.server})` : ''}`);
      // Non-zero unless fully up, so scripts can branch on it.
      return s.etcd.running && s.apiserver.ready ? 0 : 1;
    }
    default:
      console.error(usage);
      return 2;
  }
}

try {
  process.exitCode = await main(process.argv[2]);
} catch (err) {
  console.error(`testenv: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
}
