import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ConfigError, loadConfigFile, parseConfig } from '../../src/config/file.ts';
import { printConfig } from '../../src/config/print.ts';
import { parseOptions, type Options } from '../../src/config/options.ts';
import { tempDir } from '../support/tempdir.ts';

const CONFIG_DIR = resolve(import.meta.dirname, '../../config');

function file(text: string): string {
  const path = join(tempDir('levee-config-'), 'levee.yaml');
  writeFileSync(path, text);
  return path;
}

function options(argv: string[], env: NodeJS.ProcessEnv = {}): Options {
  const o = parseOptions(argv, env);
  assert.ok(o !== 'help');
  return o;
}

test('every example in config/ is valid', () => {
  const examples = readdirSync(CONFIG_DIR).filter((f) => f.endsWith('.yaml'));
  assert.ok(examples.length >= 3, examples.join(','));
  for (const f of examples) {
    const o = options(['--config', join(CONFIG_DIR, f)]);
    assert.equal(o.configFile, join(CONFIG_DIR, f));
  }
  const central = options(['--config', join(CONFIG_DIR, 'central-gateway.yaml')]);
  assert.equal(central.localRbac, true);
  assert.equal(central.localServiceAccountTokens, true);
  assert.equal(options(['--config', join(CONFIG_DIR, 'sidecar.yaml')]).localServiceAccountTokens, false);
  assert.equal(central.consistentReads.byResource.nodes, 'cache');
  assert.deepEqual(central.rules.map((r) => r.name), ['agents-read-from-cache', 'pods-from-cache-under-load', 'admins-pass', 'no-secrets']);
});

test('configuration errors name the field and the problem', () => {
  const problems = (text: string): string => {
    try {
      parseConfig(text, 'levee.yaml');
    } catch (err) {
      assert.ok(err instanceof ConfigError);
      return err.message;
    }
    assert.fail('accepted');
  };
  assert.match(problems('listen: [1'), /levee\.yaml: not valid YAML/);
  assert.match(problems('lissten: 127.0.0.1:8443'), /\(top level\): Unrecognized key: "lissten"/);
  assert.match(problems('flowControl: { queueWait: soon }'), /flowControl\.queueWait: is not a duration/);
  assert.match(problems('flowControl: { maxRequestsInflight: -1 }'), /flowControl\.maxRequestsInflight: Too small/);
  assert.match(problems('authentication: { mode: trusting }'), /authentication\.mode: Invalid option/);
  assert.match(problems('cache: { resources: [{ name: pods, fieldSelector: "spec.nodeName" }] }'), /cache\.resources\[0\]\.fieldSelector: .*spec\.nodeName/);
  assert.match(problems('rules: [{ name: r, match: {} }]'), /rules\[0\]: a rule needs an action or consistentReads/);
  assert.match(problems('rules: [{ name: r, match: { serviceAccounts: [agent] }, action: deny }]'), /rules\[0\]\.match\.serviceAccounts\[0\]: is not NAMESPACE:NAME/);
  // Every problem at once, one a line.
  assert.equal(problems('listen: 1\nlogLevel: loud\nshutdown: { delay: x }').split('\n').length, 4);
  assert.throws(() => loadConfigFile('/nonexistent/levee.yaml'), /cannot read the configuration/);
});

test('flags override environment variables, which override the file', () => {
  const path = file('listen: 127.0.0.1:9000\nlogLevel: warn\nauthentication: { anonymous: true }\nflowControl: { maxRequestsInflight: 7, queueWait: 3s }\n');
  const fromFile = options(['--config', path]);
  assert.deepEqual([fromFile.listen, fromFile.logLevel, fromFile.anonymous, fromFile.flow.requests.read, fromFile.flow.queueWaitMs], ['127.0.0.1:9000', 'warn', true, 7, 3000]);
  const fromEnv = options([], { LEVEE_CONFIG: path, LEVEE_LISTEN: '127.0.0.1:9001' });
  assert.equal(fromEnv.listen, '127.0.0.1:9001');
  assert.equal(fromEnv.logLevel, 'warn');
  const fromFlag = options(['--config', path, '--listen', '127.0.0.1:9002', '--max-requests-inflight', '9'], { LEVEE_LISTEN: '127.0.0.1:9001' });
  assert.deepEqual([fromFlag.listen, fromFlag.flow.requests.read], ['127.0.0.1:9002', 9]);
});

test('--print-config prints the effective configuration, which reads back to the same options', () => {
  const path = file(
    [
      'cache:',
      '  resources: [{ name: pods, fieldSelector: spec.nodeName=n1, indexes: [status.phase], consistentReads: cache }, configmaps]',
      'rules: [{ name: no-secrets, match: { resources: [secrets] }, action: deny }]',
      'flowControl: { upstream: { maxRequestsInflight: 0 } }',
    ].join('\n'),
  );
  const o = options(['--config', path, '--consistent-reads-for', 'group:system:nodes=cache']);
  const printed = printConfig(o);
  assert.match(printed, /kind: Configuration/);
  const again = options(['--config', file(printed)]);
  const comparable = (x: Options) => ({ ...x, configFile: undefined, printConfig: undefined });
  assert.deepEqual(comparable(again), comparable(o));
  assert.equal(again.flow.upstream.read, 0, 'no limit stays no limit');
});
