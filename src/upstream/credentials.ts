// Where the upstream apiserver is and how Levee proves its own identity to it. Parsing kubeconfig
// files, exec credential plugins, token files and the in-cluster service account are delegated to
// @kubernetes/client-node, which implements them as client-go does.
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { RequestOptions } from 'node:https';
import { KubeConfig } from '@kubernetes/client-node';

export interface TlsMaterial {
  ca?: Buffer | string | undefined;
  cert?: Buffer | string | undefined;
  key?: Buffer | string | undefined;
  servername?: string | undefined;
  rejectUnauthorized: boolean;
}

export interface OwnCredentials {
  tls: TlsMaterial;
  /** The Authorization header value for Levee's own identity, if it uses one. */
  authorization?: string | undefined;
}

export interface Upstream {
  /** Origin and optional path prefix, e.g. https://10.0.0.1:6443 or https://rancher/k8s/clusters/c-1. */
  server: URL;
  /**
   * Every endpoint of the same apiserver cluster, `server` first (more from --upstream-server):
   * requests are balanced across the healthy ones and fail over when one stops answering.
   */
  servers: URL[];
  /** The path prefix of `server` without a trailing slash ('' for most clusters). */
  pathPrefix: string;
  /** Where the configuration came from, for logs. Never contains credentials. */
  source: string;
  /** Levee's own TLS material and Authorization, refreshed so rotated tokens and exec plugins work. */
  ownCredentials(): Promise<OwnCredentials>;
}

export type UpstreamSource = { kind: 'kubeconfig'; path: string; context?: string | undefined } | { kind: 'in-cluster' };

/**
 * The order controller-runtime uses: an explicit --kubeconfig, then $KUBECONFIG, then the in-cluster
 * service account, then ~/.kube/config. Undefined when none exists.
 */
export function resolveUpstreamSource(
  flag: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
  context?: string,
): UpstreamSource | undefined {
  if (flag) return { kind: 'kubeconfig', path: flag, context };
  const fromEnv = env.KUBECONFIG?.split(':').find((p) => p !== '');
  if (fromEnv) return { kind: 'kubeconfig', path: fromEnv, context };
  if (env.KUBERNETES_SERVICE_HOST && env.KUBERNETES_SERVICE_PORT) return { kind: 'in-cluster' };
  const home = join(homedir(), '.kube', 'config');
  if (existsSync(home)) return { kind: 'kubeconfig', path: home, context };
  return undefined;
}

// Exec plugins and token files are cheap to ask again but not free; client-go re-reads a token file
// every minute. A few seconds keeps rotation prompt without a plugin call per request.
const CREDENTIALS_TTL_MS = 5_000;

export function loadUpstream(source: UpstreamSource, extraServers: readonly string[] = []): Upstream {
  const kc = new KubeConfig();
  if (source.kind === 'in-cluster') {
    kc.loadFromCluster();
  } else {
    kc.loadFromFile(source.path);
    if (source.context) kc.setCurrentContext(source.context);
  }
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error(`no current cluster in ${describe(source)}`);
  const server = new URL(cluster.server);
  if (server.protocol !== 'https:' && server.protocol !== 'http:') {
    throw new Error(`cluster server ${cluster.server} in ${describe(source)} is not an http(s) URL`);
  }
  if (server.protocol === 'http:') {
    // client-node refuses plain-HTTP clusters unless TLS verification is off, which means nothing
    // without TLS. A plain upstream is legitimate on loopback (a tiered Levee, kubectl proxy).
    (cluster as { skipTLSVerify: boolean }).skipTLSVerify = true;
  }

  let cached: { at: number; value: Promise<OwnCredentials> } | undefined;
  const ownCredentials = (): Promise<OwnCredentials> => {
    const now = Date.now();
    if (!cached || now - cached.at > CREDENTIALS_TTL_MS) {
      const value = readOwnCredentials(kc);
      cached = { at: now, value };
      // A failed plugin call must not stick for the whole TTL.
      value.catch(() => {
        if (cached?.value === value) cached = undefined;
      });
    }
    return cached.value;
  };

  const pathPrefix = server.pathname.replace(/\/+$/, '');
  const servers = [server];
  for (const extra of extraServers) {
    const u = new URL(extra);
    if (u.protocol !== server.protocol || u.pathname.replace(/\/+$/, '') !== pathPrefix) {
      throw new Error(`upstream server ${extra}: must have the scheme and path of ${cluster.server}`);
    }
    if (!servers.some((s) => s.origin === u.origin)) servers.push(u);
  }
  return { server, servers, pathPrefix, source: describe(source), ownCredentials };
}

async function readOwnCredentials(kc: KubeConfig): Promise<OwnCredentials> {
  const opts: RequestOptions = {};
  await kc.applyToHTTPSOptions(opts);
  const headers = (opts.headers ?? {}) as Record<string, string | undefined>;
  let authorization = headers.Authorization ?? headers.authorization;
  if (!authorization && typeof opts.auth === 'string' && opts.auth !== 'undefined:undefined') {
    authorization = `Basic ${Buffer.from(opts.auth).toString('base64')}`;
  }
  return {
    tls: {
      ca: opts.ca as Buffer | string | undefined,
      cert: opts.cert as Buffer | string | undefined,
      key: opts.key as Buffer | string | undefined,
      servername: opts.servername ?? undefined,
      rejectUnauthorized: opts.rejectUnauthorized !== false,
    },
    authorization,
  };
}

function describe(source: UpstreamSource): string {
  return source.kind === 'in-cluster'
    ? 'in-cluster service account'
    : `kubeconfig ${source.path}${source.context ? ` (context ${source.context})` : ''}`;
}
