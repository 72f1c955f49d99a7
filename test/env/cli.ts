// npm run testenv -- up [--nodes N] [--bare] | down | status
import { parseArgs } from 'node:util';
import { COMPONENTS, down, status, up, type UpOptions } from './testenv.ts';

const usage = `usage: npm run testenv -- up [--nodes N] [--bare] | down | status
  up         build what is missing and start the environment, or bring a running one up to date
  --nodes N  simulated (KWOK) nodes (default: as many as run now, else 3)
  --bare     only etcd and kube-apiserver: no Levee, controller manager, scheduler or nodes`;

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { nodes: { type: 'string' }, bare: { type: 'boolean' } },
  });
  const [cmd, ...extra] = positionals;
  if (extra.length > 0 || (cmd !== 'up' && (values.nodes !== undefined || values.bare !== undefined))) {
    console.error(usage);
    return 2;
  }
  switch (cmd) {
    case 'up': {
      const options: UpOptions = {};
      if (values.bare !== undefined) options.bare = values.bare;
      if (values.nodes !== undefined) {
        if (!/^\d+$/.test(values.nodes)) {
          console.error(`--nodes: "${values.nodes}" is not a whole number\n${usage}`);
          return 2;
        }
        options.nodes = Number(values.nodes);
      }
      const env = await up(options);
      console.log(`kube-apiserver ${env.version} at ${env.server}, etcd at ${env.etcd}`);
      if (env.controlPlane) {
        console.log(`control plane through Levee at ${env.controlPlane.levee}; ${env.nodes.length} simulated nodes`);
      } else {
        console.log('bare: no control plane, no nodes');
      }
      console.log(`environment: ${env.logs.replace(/logs$/, 'env.json')}, logs in ${env.logs}`);
      console.log(`try: ${env.kubectl} --kubeconfig ${env.kubeconfig} get nodes,ns`);
      return 0;
    }
    case 'down':
      await down();
      console.log('down');
      return 0;
    case 'status': {
      const s = await status();
      const pid = (p: number | null): string => (p ? ` (pid ${p})` : '');
      const line = (name: string, text: string): void => console.log(`${`${name}:`.padEnd(25)}${text}`);
      line('etcd', `${s.etcd.running ? 'running' : 'not running'}${pid(s.etcd.pid)}`);
      line('kube-apiserver', `${s.apiserver.running ? 'running' : 'not running'}${pid(s.apiserver.pid)}`);
      line('/readyz', `${s.apiserver.ready ? 'ok' : 'not ready'}${s.server ? ` (${s.server})` : ''}`);
      let healthy = s.etcd.running && s.apiserver.ready;
      if (s.server && s.bare) line('mode', 'bare (etcd and kube-apiserver only)');
      if (s.server && !s.bare) {
        for (const name of COMPONENTS) {
          const c = s.components[name];
          if (!c) {
            line(name, 'not set up');
            healthy = false;
            continue;
          }
          const restarts = c.restarts ? `, restarted ${c.restarts} time${c.restarts === 1 ? '' : 's'}` : '';
          line(name, `${c.running ? (c.healthy ? 'running, healthy' : 'running, not healthy') : 'not running'}${pid(c.pid)}${restarts}`);
          healthy &&= c.running && c.healthy;
        }
        line('nodes', s.nodes ? `${s.nodes.ready} Ready of ${s.nodes.total}` : 'unknown');
        healthy &&= s.nodes !== null && s.nodes.ready === s.nodes.total;
      }
      // Non-zero unless fully up, so scripts can branch on it.
      return healthy ? 0 : 1;
    }
    default:
      console.error(usage);
      return 2;
  }
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (err) {
  console.error(`testenv: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
}
