// Every Status error Levee answers is built here, with the reasons and messages of
// k8s.io/apimachinery/pkg/api/errors, so handlers never hand-write Status JSON.
import { goQuote } from '../selectors/gostrings.ts';
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
  return status(404, 'NotFound', `${qualifiedResource(gr)} ${goQuote(name)} not found`, details(gr, name));
}

/** The apiserver's answer to a request no authenticator accepted (responsewriters.Unauthorized). */
export function newUnauthorized(): Status {
  return status(401, 'Unauthorized', 'Unauthorized');
}

/** errors.NewForbidden: `pods "x" is forbidden: <why>`, without the name for collections, `forbidden: <why>` for paths. */
export function newForbidden(gr: GroupResource, name: string, why: string): Status {
  // A request for a path, not a resource: no group, no resource, empty details.
  if (gr.group === '' && gr.resource === '') return status(403, 'Forbidden', `forbidden: ${why}`, name ? { name } : {});
  const what = name === '' ? qualifiedResource(gr) : `${qualifiedResource(gr)} ${goQuote(name)}`;
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
 * 504 for a read the cache could not bring to a resourceVersion in time, as the apiserver's watch
 * cache answers (storage.NewTooLargeResourceVersionError); clients recognize it by its cause.
 */
export function newTooLargeResourceVersion(minimum: number, current: number, retryAfterSeconds = 1): Status {
  return status(504, 'Timeout', `Too large resource version: ${minimum}, current: ${current}`, {
    causes: [{ reason: 'ResourceVersionTooLarge', message: 'Too large resource version' }],
    retryAfterSeconds,
  });
}

/**
 * The apiserver's answer to a request that outlived its deadline (`?timeout=`, else its
 * --request-timeout): the timeout filter's errors.NewTimeoutError(..., 0), whose empty details
 * are still written.
 */
export function newRequestTimeout(): Status {
  return status(504, 'Timeout', 'Timeout: request did not complete within the allotted timeout', {});
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
  return Buffer.from(goJSON(JSON.stringify(s)) + '\n');
}

/**
 * encoding/json's escaping, which the apiserver's encoder keeps on: <, > and & (HTML-safe) and
 * U+2028, U+2029 as \u escapes. Outside strings JSON holds none of them, so the whole text is safe
 * to rewrite.
 */
function goJSON(json: string): string {
  return json.replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** How an error is written, as the apiserver negotiates it (api/negotiation.ts, negotiateErrorMediaType). */
export type StatusEncoding = { media: 'json' | 'yaml' | 'protobuf'; pretty: boolean } | 'not-acceptable';

/**
 * A Status in the encoding asked for, with its content type. json.MarshalIndent for pretty JSON
 * (no trailing newline), also when nothing acceptable was asked for (responsewriters: the original
 * error, never hidden behind a 406); YAML as sigs.k8s.io/yaml writes it (keys sorted); protobuf in
 * the runtime.Unknown envelope.
 */
export function encodeStatusAs(s: Status, how: StatusEncoding): { contentType: string; body: Buffer } {
  if (how === 'not-acceptable' || (how.media === 'json' && how.pretty)) return { contentType: 'application/json', body: Buffer.from(goJSON(JSON.stringify(s, null, 2))) };
  if (how.media === 'yaml') return { contentType: 'application/yaml', body: Buffer.from(statusYaml(s)) };
  if (how.media === 'protobuf') return { contentType: 'application/vnd.kubernetes.protobuf', body: statusProtobuf(s) };
  return { contentType: 'application/json', body: encodeStatus(s) };
}

// ---- YAML: go-yaml's output for the values a Status holds

function statusYaml(s: Status): string {
  const lines: string[] = [];
  const write = (key: string, value: unknown, indent: string): void => {
    if (typeof value === 'number') lines.push(`${indent}${key}: ${value}`);
    else if (typeof value === 'string') lines.push(fold(`${indent}${key}: `, yamlString(value), `${indent}  `));
    else if (Array.isArray(value)) {
      lines.push(`${indent}${key}:`);
      for (const item of value as Record<string, unknown>[]) {
        const entries = Object.keys(item).filter((k) => item[k] !== undefined).sort();
        entries.forEach((k, i) => {
          const sub: string[] = [];
          const before = lines.length;
          write(k, item[k], `${indent}  `);
          sub.push(...lines.splice(before));
          lines.push(i === 0 ? `${indent}- ${sub[0]!.slice(indent.length + 2)}` : sub[0]!, ...sub.slice(1));
        });
      }
    } else if (typeof value === 'object' && value !== null) {
      const o = value as Record<string, unknown>;
      const keys = Object.keys(o).filter((k) => o[k] !== undefined).sort();
      if (keys.length === 0) lines.push(`${indent}${key}: {}`);
      else {
        lines.push(`${indent}${key}:`);
        for (const k of keys) write(k, o[k], `${indent}  `);
      }
    }
  };
  const top = s as unknown as Record<string, unknown>;
  for (const k of Object.keys(top).sort()) write(k, top[k], '');
  return `${lines.join('\n')}\n`;
}

/**
 * go-yaml's line folding (best width 80) of a plain or single-quoted scalar: at the first space
 * past column 80 that is not followed by another, the line breaks and the space goes.
 */
function fold(prefix: string, scalar: string, indent: string): string {
  if (scalar.startsWith('"')) return prefix + scalar;
  let out = prefix;
  let column = prefix.length;
  for (let i = 0; i < scalar.length; i++) {
    const c = scalar[i]!;
    if (c === ' ' && column > 80 && scalar[i + 1] !== ' ') {
      out += `\n${indent}`;
      column = indent.length;
      continue;
    }
    out += c;
    column++;
  }
  return out;
}

/**
 * A string as go-yaml writes it: plain where YAML reads it back as that string, single-quoted where
 * only an indicator or ": " / " #" stands in the way, double-quoted for what resolves to another
 * type (true, 1, null), and for what single quotes cannot hold.
 */
function yamlString(v: string): string {
  const resolvesElsewhere = /^(?:|~|null|Null|NULL|true|True|TRUE|false|False|FALSE|y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0[0-7_]+|[-+]?0x[0-9a-fA-F_]+|[-+]?0b[01_]+|[-+]?(?:[0-9][0-9_]*)?\.[0-9_]*(?:[eE][-+]?[0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)|<<)$/.test(v);
  const special = /[^\x20-\x7e\u0085\u00a0-\ud7ff\ue000-\ufffd]|[\ud800-\udfff]/.test(v) || v.includes('\n');
  if (resolvesElsewhere || special) return JSON.stringify(v);
  const plain = !/^[-?:,[\]{}#&*!|>'"%@`]/.test(v) && !/^\s|\s$/.test(v) && !v.includes(': ') && !v.includes(' #') && !v.endsWith(':');
  return plain ? v : `'${v.replaceAll("'", "''")}'`;
}

// ---- protobuf: metav1.Status in the runtime.Unknown envelope, fields as gogo-protobuf writes them

function varint(n: number): number[] {
  const out: number[] = [];
  let v = BigInt.asUintN(64, BigInt(n));
  while (v >= 0x80n) {
    out.push(Number(v & 0x7fn) | 0x80);
    v >>= 7n;
  }
  out.push(Number(v));
  return out;
}

const field = (no: number, bytes: Buffer): Buffer => Buffer.concat([Buffer.from([(no << 3) | 2, ...varint(bytes.length)]), bytes]);
const str = (no: number, v: string): Buffer => field(no, Buffer.from(v));
const num = (no: number, v: number): Buffer => Buffer.from([no << 3, ...varint(v)]);

function statusProtobuf(s: Status): Buffer {
  const listMeta = Buffer.concat([str(1, ''), str(2, s.metadata.resourceVersion ?? ''), str(3, s.metadata.continue ?? '')]);
  const parts = [field(1, listMeta), str(2, s.status), str(3, s.message), str(4, s.reason)];
  const d = s.details;
  if (d) {
    const causes = (d.causes ?? []).map((c) => field(4, Buffer.concat([str(1, c.reason ?? ''), str(2, c.message ?? ''), str(3, c.field ?? '')])));
    parts.push(field(5, Buffer.concat([str(1, d.name ?? ''), str(2, d.group ?? ''), str(3, d.kind ?? ''), ...causes, num(5, d.retryAfterSeconds ?? 0), str(6, d.uid ?? '')])));
  }
  parts.push(num(6, s.code));
  const unknown = Buffer.concat([field(1, Buffer.concat([str(1, s.apiVersion), str(2, s.kind)])), field(2, Buffer.concat(parts)), str(3, ''), str(4, '')]);
  return Buffer.concat([Buffer.from([0x6b, 0x38, 0x73, 0x00]), unknown]);
}

/** API Priority and Fairness's rejection, word for word: what every 429 of Levee's says. */
export function tooManyRequests(retryAfterSeconds = 1): Status {
  return newTooManyRequests('Too many requests, please try again later.', retryAfterSeconds);
}
