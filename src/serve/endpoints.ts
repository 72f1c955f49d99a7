// Levee's own endpoints: /livez, /readyz and /metrics answer without credentials, like the
// apiserver's health endpoints; /debug/levee/ (serve/debug.ts) after authentication.
import { newInternalError } from '../api/status.ts';
import type { DownstreamResponse } from '../http/downstream.ts';
import { writeStatus, writeText } from '../http/respond.ts';
import type { GatewayMetrics } from '../metrics/metrics.ts';
import type { Health } from './health.ts';

/** True when the request was one of Levee's own endpoints and has been answered. */
export function serveOwnEndpoint(health: Health, metrics: GatewayMetrics, method: string, path: string, query: string, res: DownstreamResponse): boolean {
  if (method !== 'GET' && method !== 'HEAD') return false;
  switch (path) {
    case '/livez':
    case '/readyz': {
      const verbose = new URLSearchParams(query).has('verbose');
      const r = path === '/livez' ? health.livez(verbose) : health.readyz(verbose);
      writeText(res, r.code, r.body);
      return true;
    }
    case '/metrics':
      metrics.render().then(
        (text) => writeText(res, 200, text, metrics.registry.contentType),
        (err: unknown) => writeStatus(res, newInternalError(String(err))),
      );
      return true;
    default:
      return false;
  }
}
