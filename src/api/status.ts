// Every Status error Levee answers is built here, with the reasons and messages of
// k8s.io/apimachinery/pkg/api/errors, so handlers never hand-write Status JSON.
import type { Status, StatusDetails } from './types.ts';

export interface GroupResource {
  group: string;
  resource: string;
}

function status(code: number, reason: string, message: string, details?: StatusDetails): Status {
  // Field order as the apiserver's encoder writes metav1.Status: details before code.
  return details
    ? { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, details, code }
    : { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
}

// Field order and omitempty as the apiserver's encoder writes StatusDetails.
function details(gr: GroupResource, name?: string): StatusDetails {
  const d: StatusDetails = {};
  if (name) d.name = name;
  if (gr.group) d.group = gr.group;
  d.kind = gr.resource;
  return d;
}

/** "pods" or "deployments.apps", as errors.NewNotFound formats a GroupResource. */
export function qualifiedResource(gr: GroupResource): string {
  return gr.group === '' ? gr.resource : `${gr.resource}.${gr.group}`;
}

export function newNotFound(gr: GroupResource, name: string): Status {
  return status(404, 'NotFound', `${qualifiedResource(gr)} "${name}" not found`, details(gr, name));
}

/** The apiserver's answer to a request no authenticator accepted (responsewriters.Unauthorized). */
export function newUnauthorized(): Status {
  return status(401, 'Unauthorized', 'Unauthorized');
}

/** errors.NewForbidden: `pods "x" is forbidden: <why>`, without the name for collections, `forbidden: <why>` for paths. */
export function newForbidden(gr: GroupResource, name: string, why: string): Status {
  // A request for a path, not a resource: no group, no resource, empty details.
  if (gr.group === '' && gr.resource === '') return status(403, 'Forbidden', `forbidden: ${why}`, name ? { name } : {});
  const what = name === '' ? qualifiedResource(gr) : `${qualifiedResource(gr)} "${name}"`;
  return status(403, 'Forbidden', `${what} is forbidden: ${why}`, details(gr, name));
}

export function newBadRequest(message: string): Status {
  return status(400, 'BadRequest', message);
}

export function newMethodNotSupported(gr: GroupResource, action: string): Status {
  return status(
    405,
    'MethodNotAllowed',
    `${action} is not supported on resources of kind "${qualifiedResource(gr)}"`,
    details(gr),
  );
}

export function newInternalError(message: string): Status {
  return status(500, 'InternalError', `Internal error occurred: ${message}`, { causes: [{ message }] });
}

/** 503 with a Retry-After hint, as the apiserver answers when a backend is unavailable. */
export function newServiceUnavailable(message: string, retryAfterSeconds = 1): Status {
  return status(503, 'ServiceUnavailable', message, { retryAfterSeconds });
}

/** 504 Timeout, the apiserver's answer when it gave up waiting (errors.NewTimeoutError). */
export function newTimeout(message: string, retryAfterSeconds = 1): Status {
  return status(504, 'Timeout', message, { retryAfterSeconds });
}

/**
 * 502 for an upstream that answered something that is not HTTP. The apimachinery has no reason
 * for 502; InternalError is what the apiserver's own proxies report for a broken backend.
 */
export function newBadGateway(message: string): Status {
  return status(502, 'InternalError', message);
}

export function newTooManyRequests(message: string, retryAfterSeconds: number): Status {
  return status(429, 'TooManyRequests', message, { retryAfterSeconds });
}

/** The bytes of a Status as the apiserver writes them: JSON and a trailing newline. */
export function encodeStatus(s: Status): Buffer {
  return Buffer.from(JSON.stringify(s) + '\n');
}

/** API Priority and Fairness's rejection, word for word: what every 429 of Levee's says. */
export function tooManyRequests(retryAfterSeconds = 1): Status {
  return newTooManyRequests('Too many requests, please try again later.', retryAfterSeconds);
}
