// Benchmarks measure the apiserver and Levee side by side on a quiet cluster: the test environment
// bare, etcd and kube-apiserver only. With its control plane running, the controllers', the
// scheduler's and the simulated nodes' own requests would share the machine with the measurement,
// and the pod garbage collector would delete the generated pods, which are bound to nodes that do
// not exist. An environment up with its control plane is recreated bare (the log says so).
import { up, type TestEnv } from '../../test/env/testenv.ts';

export function quietEnv(): Promise<TestEnv> {
  return up({ bare: true });
}
