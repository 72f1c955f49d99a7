// A port of k8s.io/apiserver/pkg/endpoints/request/requestinfo.go: the one place that turns a
// request line into the attributes the apiserver itself uses (verb, group, version, resource,
// namespace, name, subresource, and the selectors authorization sees). Authorization, metrics and
// the cache-or-upstream decision all read this, so they agree with the apiserver on what a request
// is.
import { goQuery } from './query.ts';
import { parseFieldSelector } from '../selectors/fields.ts';

export interface RequestInfo {
  isResourceRequest: boolean;
  /** URL path, without the query. */
  path: string;
  /** Kubernetes verb: get, list, watch, create, update, patch, delete, deletecollection, proxy; or the lower-cased method for non-resource requests. */
  verb: string;
  apiPrefix: string;
  apiGroup: string;
  apiVersion: string;
  namespace: string;
  resource: string;
  subresource: string;
  name: string;
  parts: string[];
  /**
   * The fieldSelector and labelSelector parameters as sent (their first values), for list, watch
   * and deletecollection only: what the apiserver's authorization filter hands its authorizers
   * (the Node authorizer lets a kubelet list its own pods only with spec.nodeName=NODE).
   */
  fieldSelector: string;
  labelSelector: string;
}

const API_PREFIXES = new Set(['api', 'apis']);
const GROUPLESS_API_PREFIXES = new Set(['api']);
// Verbs that may appear as the first path segment after the version (deprecated /watch/ and /proxy/ forms).
const SPECIAL_VERBS = new Set(['proxy', 'watch']);
// proxy/{resource}/{name}/{path...}: what follows the name is a proxied path, not a subresource.
const SPECIAL_VERBS_NO_SUBRESOURCES = new Set(['proxy']);
// /namespaces/{name}/status and /namespaces/{name}/finalize are subresources of the namespace itself.
const NAMESPACE_SUBRESOURCES = new Set(['status', 'finalize']);
// The verbs whose selectors reach authorization (verbsWithSelectors).
const VERBS_WITH_SELECTORS = new Set(['list', 'watch', 'deletecollection']);

/** strings.Split(strings.Trim(path, "/"), "/"); by hand, as a regular expression costs a GET a few µs. */
function splitPath(path: string): string[] {
  let start = 0;
  let end = path.length;
  while (start < end && path.charCodeAt(start) === 0x2f) start++;
  while (end > start && path.charCodeAt(end - 1) === 0x2f) end--;
  return start === end ? [] : path.slice(start, end).split('/');
}

/**
 * apimachinery's string-to-bool query conversion (runtime.Convert_Slice_string_To_bool): only "0"
 * and "false" in any case (strings.EqualFold, for which "ſ" is an "s") are false; "f", "no" and
 * the empty string are true.
 */
export function queryBool(value: string | null): boolean {
  if (value === null) return false;
  return !(value === '0' || value.replace(/ſ/g, 's').toLowerCase() === 'false');
}

/**
 * opts.FieldSelector.RequiresExactMatch("metadata.name") after the apiserver parsed the list
 * options: the value of the first `metadata.name=x` (or `==`) term in the parser's (sorted) order.
 * A selector that does not parse names nothing (the apiserver drops the options it could not read).
 */
function fieldSelectorName(selector: string | null): string | undefined {
  if (!selector) return undefined;
  try {
    return parseFieldSelector(selector).exact('metadata.name');
  } catch {
    return undefined;
  }
}

/** path.IsValidPathSegmentName: a name may not be "." or ".." nor contain "/" or "%". */

function verbForMethod(method: string): string {
  switch (method) {
    case 'POST':
      return 'create';
    case 'GET':
    case 'HEAD':
      return 'get';
    case 'PUT':
      return 'update';
    case 'PATCH':
      return 'patch';
    case 'DELETE':
      return 'delete';
    default:
      return '';
  }
}

export class RequestInfoError extends Error {}

/**
 * url.PathUnescape, as Go leaves req.URL.Path: %XX decoded, "+" as it is. Undefined for a malformed
 * escape (Go's HTTP server refuses the request) or bytes that are no UTF-8 (Go keeps the bytes): the
 * path is then read as sent, and such a name never reaches the cache (it holds a "%").
 */
function unescapePath(raw: string): string | undefined {
  if (!raw.includes('%')) return raw;
  const bytes: number[] = [];
  for (let i = 0; i < raw.length; i++) {
    const c = raw.charCodeAt(i);
    if (c === 0x25) {
      const hex = raw.slice(i + 1, i + 3);
      if (!/^[0-9A-Fa-f]{2}$/.test(hex)) return undefined;
      bytes.push(parseInt(hex, 16));
      i += 2;
    } else if (c < 0x80) bytes.push(c);
    else return undefined;
  }
  const buf = Buffer.from(bytes);
  const text = buf.toString('utf8');
  return Buffer.from(text, 'utf8').equals(buf) ? text : undefined;
}

/** path.IsValidPathSegmentName: what the apiserver accepts as an object's name in a path (else its 400). */
export function isValidPathSegmentName(name: string): boolean {
  return name !== '.' && name !== '..' && !name.includes('/') && !name.includes('%');
}

/**
 * Parses a request. Throws RequestInfoError where the apiserver's factory returns an error
 * (a /watch/ or /proxy/ path with nothing after the verb).
 */
export function parseRequestInfo(method: string, url: string): RequestInfo {
  const q = url.indexOf('?');
  const raw = q === -1 ? url : url.slice(0, q);
  // The apiserver reads req.URL.Path, which Go has unescaped: configmaps/a%2Fb is object "a" and
  // subresource "b", configmaps/%2e%2e the name "..".
  const path = unescapePath(raw) ?? raw;
  const query = goQuery(q === -1 ? '' : url.slice(q + 1));
  const info: RequestInfo = {
    isResourceRequest: false,
    path,
    verb: method.toLowerCase(),
    apiPrefix: '',
    apiGroup: '',
    apiVersion: '',
    namespace: '',
    resource: '',
    subresource: '',
    name: '',
    parts: [],
    fieldSelector: '',
    labelSelector: '',
  };

  let parts = splitPath(path);
  if (parts.length < 3 || !API_PREFIXES.has(parts[0]!)) return info;
  const apiPrefix = parts[0]!;
  parts = parts.slice(1);
  let apiGroup = '';
  if (!GROUPLESS_API_PREFIXES.has(apiPrefix)) {
    // One part (the prefix) is consumed already: a group request needs group, version and resource.
    if (parts.length < 3) return info;
    apiGroup = parts[0]!;
    parts = parts.slice(1);
  }
  info.isResourceRequest = true;
  info.apiPrefix = apiPrefix;
  info.apiGroup = apiGroup;
  info.apiVersion = parts[0]!;
  parts = parts.slice(1);

  let verbViaPathPrefix = false;
  if (SPECIAL_VERBS.has(parts[0]!)) {
    if (parts.length < 2) throw new RequestInfoError(`unable to determine kind and namespace from url, ${url}`);
    info.verb = parts[0]!;
    parts = parts.slice(1);
    verbViaPathPrefix = true;
  } else {
    info.verb = verbForMethod(method);
  }

  if (parts[0] === 'namespaces') {
    if (parts.length > 1) {
      info.namespace = parts[1]!;
      if (parts.length > 2 && !NAMESPACE_SUBRESOURCES.has(parts[2]!)) parts = parts.slice(2);
    }
  }
  info.parts = parts;

  if (parts.length >= 3 && !SPECIAL_VERBS_NO_SUBRESOURCES.has(info.verb)) info.subresource = parts[2]!;
  if (parts.length >= 2) info.name = parts[1]!;
  if (parts.length >= 1) info.resource = parts[0]!;

  // No name and a GET: a collection read, list or watch.
  if (info.name === '' && info.verb === 'get') {
    info.verb = queryBool(query.get('watch')) ? 'watch' : 'list';
    const name = fieldSelectorName(query.get('fieldSelector'));
    if (name !== undefined && isValidPathSegmentName(name)) info.name = name;
  }
  if (info.name === '' && info.verb === 'delete') info.verb = 'deletecollection';
  // The deprecated /watch/ paths do not honour selectors consistently, so the apiserver never
  // authorizes them with one: a kubelet's /api/v1/watch/pods?fieldSelector=spec.nodeName=NODE is
  // refused where /api/v1/pods?watch=true&fieldSelector=... is allowed. The raw first value, as the
  // apiserver reads it even when other list options fail to parse.
  if (!verbViaPathPrefix && VERBS_WITH_SELECTORS.has(info.verb)) {
    info.fieldSelector = query.get('fieldSelector') ?? '';
    info.labelSelector = query.get('labelSelector') ?? '';
  }
  return info;
}

const LONG_RUNNING_VERBS = new Set(['watch', 'proxy']);
const LONG_RUNNING_SUBRESOURCES = new Set(['attach', 'exec', 'proxy', 'log', 'portforward']);

/** The apiserver's BasicLongRunningRequestCheck: these requests get no request timeout. */
export function isLongRunning(info: RequestInfo): boolean {
  return LONG_RUNNING_VERBS.has(info.verb) || LONG_RUNNING_SUBRESOURCES.has(info.subresource);
}
