// Where a read is answered: from the cache, or by the apiserver. One pure function over the request,
// tested case by case (test/unit/decide.test.ts). Anything Levee cannot answer exactly as the
// apiserver would (transforms, protobuf-only clients, pretty printing, parameters it does not know,
// invalid input whose error text is the apiserver's to give) goes upstream.
import { parseGoDuration } from '../api/deadline.ts';
import { includeObjectOf, isPrettyPrint, negotiateMediaType, representationFor, routeAccepts, statusMediaFor, type Representation } from '../api/negotiation.ts';
import type { ConsistentReads } from '../api/consistency.ts';
import { parseFieldSelector, type FieldSelector } from '../selectors/fields.ts';
import { parseLabelSelector, type LabelSelector } from '../selectors/labels.ts';
import { builtinFields, convertFieldSelector, type SelectableFields } from '../selectors/selectable.ts';
import { parseResourceVersion } from '../store/object.ts';
import { decodeContinue, type ContinueToken } from './continuetoken.ts';
import { isValidPathSegmentName, queryBool, type RequestInfo } from '../api/requestinfo.ts';
import { withinSelection, type Selection } from '../cache/selection.ts';

export type Freshness =
  | { mode: 'any' }
  // resourceVersion unset: as fresh as the apiserver is now, proven before serving
  // (docs/design.md, "Consistent reads").
  | { mode: 'consistent' }
  | { mode: 'notOlderThan'; resourceVersion: number }
  | { mode: 'exact'; resourceVersion: number };

export interface ReadPlan {
  verb: 'get' | 'list';
  namespace: string;
  name: string;
  labels: LabelSelector;
  fields: FieldSelector;
  limit: number;
  freshness: Freshness;
  continueToken?: ContinueToken | undefined;
  /** The cache holds part of the resource: a GET of an object it lacks must ask the apiserver. */
  partial?: boolean;
  /** The client asked for a consistent read (no resourceVersion). */
  consistentRead?: boolean;
  /** How the answer is written (negotiated from Accept as the apiserver does). */
  representation: Representation;
}

export interface WatchPlan {
  namespace: string;
  labels: LabelSelector;
  fields: FieldSelector;
  /** Events after this resourceVersion; with `initial`, the start is the state's own. */
  resourceVersion: number;
  /**
   * Begin with the current state as ADDED events: as of any time (`any`, resourceVersion 0), as
   * new as the apiserver (`consistent`, unset), or not older than resourceVersion.
   */
  initial?: 'any' | 'consistent' | 'notOlderThan' | undefined;
  /** After the initial state, a BOOKMARK annotated k8s.io/initial-events-end (watch-list). */
  initialEventsEnd: boolean;
  /** Begins as of any time because the `cache` policy answers the client's consistent read. */
  consistentRead?: boolean;
  allowBookmarks: boolean;
  timeoutSeconds: number | undefined;
  /** How each event's object is written. */
  representation: Representation;
}

export type Decision = { source: 'cache'; plan: ReadPlan } | { source: 'upstream'; reason: ForwardReason };

/** Why a read of a cached resource went to the apiserver: each one is counted by its reason. */
export type ForwardReason =
  | 'not-a-read'
  | 'not-cached'
  | 'not-synced'
  | 'media-type'
  | 'pretty'
  | 'parameter'
  | 'invalid'
  | 'consistent-read'
  | 'impersonation'
  | 'outside-selection'
  | 'watch-initial-state'
  // A version of the resource other than the one cached: the apiserver converts, Levee does not.
  | 'version'
  // A consistent GET or small LIST: the apiserver answers it for less than a proof costs.
  | 'consistency-cost'
  // Found by the handlers, once decided for the cache:
  // the authorization review failed or could not decide: the apiserver authorizes it itself;
  | 'undecided'
  // the apiserver's current resourceVersion could not be learned, or the cache did not reach it in time;
  | 'consistency-probe-failed'
  | 'consistency-unproven'
  // the cache did not reach the resourceVersion asked for in time;
  | 'resource-version-ahead'
  // an Exact read or continue token older than the snapshots kept;
  | 'snapshot-expired'
  // a watch from a resourceVersion older than the event window;
  | 'window-expired'
  // a representation negotiated that the handler cannot write after all (an object the protobuf
  // layout does not describe).
  | 'representation';

export interface ReadRequest {
  /** The HTTP method; GET when absent. */
  method?: string | undefined;
  info: RequestInfo;
  query: URLSearchParams;
  accept: string | undefined;
  userAgent: string | undefined;
  impersonating: boolean;
}

export interface CacheState {
  /** Is this group/resource cached, and for its whole scope (no upstream selector narrows it)? */
  cached: boolean;
  synced: boolean;
  namespaced: boolean;
  /**
   * How reads without a resourceVersion are answered: `verify` serves them from the cache only
   * once it is proven at least as new as the apiserver; `cache` serves them like resourceVersion=0
   * (what YurtHub does), only where configured; `forward` always asks the apiserver.
   */
  consistentReads: ConsistentReads;
  /** The policy a configured rule names for this client, which overrides the resource's. */
  ruleConsistentReads?: ConsistentReads | undefined;
  /**
   * The upstream does watch-list (KEP-3157, on by default from 1.34): it then defaults a watch
   * from resourceVersion 0 or unset to sendInitialEvents, ending its initial state with a bookmark.
   */
  watchList?: boolean;
  /** Set when the cache holds only the part of the resource an upstream selector picks. */
  selection?: Selection | undefined;
  /** The version the cache holds; a request for another one is the apiserver's. Unset: not checked. */
  version?: string | undefined;
  /**
   * Requests wait for the upstream bound: the apiserver is as busy as Levee lets it be, and every
   * consistent read it can spare is worth a wait for the proof.
   */
  upstreamBusy?: boolean | undefined;
  /** Consistent reads answering at least this many bytes wait for the proof (LARGE_ANSWER_BYTES). */
  proofBytes?: number | undefined;
  /** Whether a LIST of the cache would answer at least so many bytes (store/query.ts). */
  answersAtLeast?: ((q: { namespace: string; labels: LabelSelector; fields: FieldSelector; limit: number }, bytes: number) => boolean) | undefined;
  /**
   * The field selectors of the cached resource at that version: a custom resource's, from its CRD.
   * Unset: the built-in resource's (selectors/selectable.ts), or none, and the request is forwarded.
   */
  selectableFields?: SelectableFields | undefined;
  /** A custom resource: served in JSON only, except its metadata-only forms (as the apiserver). */
  customResource?: boolean | undefined;
  /** Whether the cache can write this representation of the resource. Unset: plain JSON only. */
  writes?: ((r: Representation) => boolean) | undefined;
}

/** A field selector as the apiserver's field label conversion leaves it; undefined when it refuses a label. */
function convertFields(info: RequestInfo, state: CacheState, selector: FieldSelector): FieldSelector | undefined {
  return convertFieldSelector(state.selectableFields ?? builtinFields(info.apiGroup, info.resource), selector);
}

/**
 * A consistent LIST answering at least this much waits for the proof that the cache is as new as
 * the apiserver (about a second: bench/freshness.ts) rather than cost the apiserver its encoding:
 * at this size the apiserver spends milliseconds of CPU and the client a good part of a second
 * reading it anyway.
 */
export const LARGE_ANSWER_BYTES = 1024 * 1024;

/** The consistent-read policy in force: a rule's for this client, else the resource's. */
function policyOf(state: CacheState): ConsistentReads {
  return state.ruleConsistentReads ?? state.consistentReads;
}

function consistent(policy: ConsistentReads): Freshness | undefined {
  if (policy === 'forward') return undefined;
  return policy === 'cache' ? { mode: 'any' } : { mode: 'consistent' };
}

// `pretty` is among them: once isPrettyPrint says no, the answer is the compact one Levee writes.
// includeObject shapes a Table's rows and is ignored by every other representation.
const GET_PARAMS = new Set(['resourceVersion', 'pretty', 'includeObject']);
const LIST_PARAMS = new Set([
  'pretty',
  'includeObject',
  'resourceVersion',
  'resourceVersionMatch',
  'limit',
  'continue',
  'labelSelector',
  'fieldSelector',
  'timeoutSeconds',
  'timeout',
  'watch',
  'allowWatchBookmarks',
]);

/**
 * The representation the apiserver would answer in, when the cache writes it too; otherwise the
 * reason to forward: a media type or conversion the cache does not write (`media-type`), or
 * indented JSON (`pretty`: the `pretty` parameter, browsers, curl, wget), the apiserver's to write.
 */
function representation(r: ReadRequest, state: CacheState, verb: 'get' | 'list' | 'watch'): Representation | ForwardReason {
  // A built-in resource's route refuses an Accept it produces nothing for (go-restful's 406).
  if (state.customResource !== true && !routeAccepts(r.accept)) return 'media-type';
  const options = negotiateMediaType(r.accept, { customResource: state.customResource === true }, verb === 'watch');
  let rep = representationFor(options, verb);
  if (!rep) return 'media-type';
  if (rep.as !== 'object') {
    // A conversion's errors are written as if none had been asked for (serve/status.ts).
    const status = statusMediaFor(r.accept);
    if (!status) return 'media-type';
    rep = { ...rep, status };
  }
  if (rep.as === 'Table') {
    const includeObject = includeObjectOf(r.query);
    if (!includeObject) return 'invalid';
    // A bookmark's row would carry the kind's empty object, whose JSON only the Go type knows.
    if (verb === 'watch' && includeObject === 'Object' && queryBool(r.query.get('allowWatchBookmarks'))) return 'media-type';
    rep = { ...rep, includeObject };
  }
  if (rep.as === 'object' && rep.media === 'json' ? false : !(state.writes?.(rep) ?? false)) return 'media-type';
  const indentable = rep.as === 'Table' || rep.media === 'json';
  if (indentable && isPrettyPrint(r.query, r.userAgent)) return 'pretty';
  return rep;
}

/**
 * A request deadline (`timeout`, a Go duration) shorter than Levee may wait for its cache to be
 * fresh enough (3 s: serve/freshness.ts): the apiserver keeps it, answering or giving its 504 as
 * its own speed decides. One that does not parse here (chain.ts refused those the apiserver
 * cannot read) goes there too.
 */
function shortDeadline(timeout: string | null): boolean {
  if (timeout === null || timeout === '') return false;
  const d = parseGoDuration(Buffer.from(timeout));
  return 'error' in d || (d.ns > 0n && d.ns < SHORTEST_DEADLINE_NS);
}

const SHORTEST_DEADLINE_NS = 3_000_000_000n;

function forward(reason: ForwardReason): { source: 'upstream'; reason: ForwardReason } {
  return { source: 'upstream', reason };
}

/**
 * Where a request is answered: the one place that chooses between the cache and the apiserver.
 * Handlers that find the cache cannot answer exactly after all return a reason of their own
 * (serve/read.ts, serve/watch.ts); nothing else chooses.
 */
export function decide(r: ReadRequest, state: CacheState): Decision | WatchDecision {
  // HEAD reaches the cache's verbs too, but the apiserver has no HEAD route for resources (it
  // answers 405): it is its to answer.
  if ((r.method ?? 'GET') !== 'GET') return forward('not-a-read');
  return r.info.verb === 'watch' ? decideWatch(r, state) : decideRead(r, state);
}

export function decideRead(r: ReadRequest, state: CacheState): Decision {
  const { info, query } = r;
  // RequestInfo reads /api/v1/namespaces/x as namespace x; the object itself is cluster-scoped.
  const namespace = info.apiGroup === '' && info.resource === 'namespaces' ? '' : info.namespace;
  if (!info.isResourceRequest || (info.verb !== 'get' && info.verb !== 'list') || info.subresource !== '') return forward('not-a-read');
  if (!state.cached) return forward('not-cached');
  if (state.version !== undefined && info.apiVersion !== state.version) return forward('version');
  if (!state.synced) return forward('not-synced');
  // A namespaced object read without its namespace, or a cluster-scoped one with one: the
  // apiserver's 404 is the answer.
  if ((state.namespaced && info.verb === 'get' && namespace === '') || (!state.namespaced && namespace !== '')) {
    return forward('invalid');
  }
  // ".", ".." or a name holding "%": the apiserver's 400 "Name parameter invalid".
  if (info.verb === 'get' && !isValidPathSegmentName(info.name)) return forward('invalid');
  if (r.impersonating) return forward('impersonation');
  const rep = representation(r, state, info.verb === 'get' ? 'get' : 'list');
  if (typeof rep === 'string') return forward(rep);
  const allowed = info.verb === 'get' ? GET_PARAMS : LIST_PARAMS;
  for (const key of query.keys()) if (!allowed.has(key)) return forward('parameter');

  let labels: LabelSelector;
  let fields: FieldSelector;
  try {
    labels = parseLabelSelector(query.get('labelSelector') ?? '');
    const parsed = parseFieldSelector(query.get('fieldSelector') ?? '');
    const normalized = convertFields(info, state, parsed);
    if (!normalized) return forward('invalid');
    fields = normalized;
  } catch {
    return forward('invalid');
  }

  const rvParam = query.get('resourceVersion') ?? '';
  const rv = rvParam === '' ? undefined : parseResourceVersion(rvParam);
  if (rvParam !== '' && rv === undefined) return forward('invalid');
  if (state.selection && info.verb === 'list' && !withinSelection(state.selection, labels, fields)) return forward('outside-selection');
  const base = { namespace, name: info.name, labels, fields, partial: state.selection !== undefined, representation: rep };

  if (info.verb === 'get') {
    let freshness: Freshness | undefined;
    if (rv === undefined) freshness = consistent(policyOf(state));
    else freshness = rv === 0 ? { mode: 'any' } : { mode: 'notOlderThan', resourceVersion: rv };
    if (!freshness) return forward('consistent-read');
    // One object: the apiserver reads it from etcd for less than a proof costs, unless it is busy.
    if (freshness.mode === 'consistent' && !state.upstreamBusy && (state.proofBytes ?? LARGE_ANSWER_BYTES) > 0) return forward('consistency-cost');
    return { source: 'cache', plan: { ...base, verb: 'get', limit: 0, freshness, consistentRead: rv === undefined } };
  }

  // The apiserver reads both as int64 and answers 400 for anything else, an empty value included;
  // it then also drops the name a metadata.name selector gave, which authorization would see.
  const limitParam = query.get('limit');
  let limit = 0;
  if (limitParam !== null) {
    if (!/^-?\d{1,18}$/.test(limitParam)) return forward('invalid');
    limit = Math.max(0, Number(limitParam));
  }
  const timeoutParam = query.get('timeoutSeconds');
  if (timeoutParam !== null && !/^-?\d{1,18}$/.test(timeoutParam)) return forward('invalid');
  if (shortDeadline(query.get('timeout'))) return forward('parameter');
  if (query.has('watch') && query.get('watch') !== 'false' && query.get('watch') !== '0') return forward('not-a-read');
  const match = query.get('resourceVersionMatch') ?? '';
  const cont = query.get('continue') ?? '';

  if (cont !== '') {
    // The apiserver answers 400 for a continue with a resourceVersion, or with a match.
    if ((rv !== undefined && rv !== 0) || match !== '') return forward('invalid');
    const token = decodeContinue(cont);
    if (!token) return forward('invalid');
    return {
      source: 'cache',
      plan: { ...base, verb: 'list', limit, freshness: { mode: 'exact', resourceVersion: token.resourceVersion }, continueToken: token },
    };
  }

  let freshness: Freshness | undefined;
  switch (match) {
    case '':
      if (rv === undefined) {
        freshness = consistent(policyOf(state));
        if (!freshness) return forward('consistent-read');
        // A small answer costs the apiserver less than a proof (and the client less than its
        // wait); a large one, or any while the apiserver is busy, waits for the proof.
        const proofBytes = state.proofBytes ?? LARGE_ANSWER_BYTES;
        const large = proofBytes === 0 || (state.answersAtLeast?.({ namespace, labels, fields, limit }, proofBytes) ?? false);
        if (freshness.mode === 'consistent' && !state.upstreamBusy && !large) return forward('consistency-cost');
      } else if (rv === 0) freshness = { mode: 'any' };
      // rv=N with a limit is the legacy Exact read; without one, NotOlderThan.
      else freshness = limit > 0 ? { mode: 'exact', resourceVersion: rv } : { mode: 'notOlderThan', resourceVersion: rv };
      break;
    case 'NotOlderThan':
      if (rv === undefined) return forward('invalid');
      freshness = rv === 0 ? { mode: 'any' } : { mode: 'notOlderThan', resourceVersion: rv };
      break;
    case 'Exact':
      if (rv === undefined || rv === 0) return forward('invalid');
      freshness = { mode: 'exact', resourceVersion: rv };
      break;
    default:
      return forward('invalid');
  }
  return { source: 'cache', plan: { ...base, verb: 'list', limit, freshness, consistentRead: rv === undefined } };
}

const WATCH_PARAMS = new Set([
  'pretty',
  'includeObject',
  'watch',
  'resourceVersion',
  'resourceVersionMatch',
  'sendInitialEvents',
  'labelSelector',
  'fieldSelector',
  'allowWatchBookmarks',
  'timeoutSeconds',
  'timeout',
]);

export type WatchDecision = { source: 'cache'; plan: WatchPlan } | { source: 'upstream'; reason: ForwardReason };

/**
 * Watches from a resourceVersion (an informer re-watching after its LIST) are served from the
 * cache. Watches that begin with the current state (resourceVersion 0 or unset, sendInitialEvents:
 * watch-list defaulting and its end bookmark) go to the apiserver for now.
 */
export function decideWatch(r: ReadRequest, state: CacheState): WatchDecision {
  const { info, query } = r;
  if (!info.isResourceRequest || info.verb !== 'watch' || info.subresource !== '') return forward('not-a-read');
  if (!state.cached) return forward('not-cached');
  if (state.version !== undefined && info.apiVersion !== state.version) return forward('version');
  if (!state.synced) return forward('not-synced');
  if (r.impersonating) return forward('impersonation');
  const rep = representation(r, state, 'watch');
  if (typeof rep === 'string') return forward(rep);
  for (const key of query.keys()) if (!WATCH_PARAMS.has(key)) return forward('parameter');
  const namespace = info.apiGroup === '' && info.resource === 'namespaces' ? '' : info.namespace;
  if (!state.namespaced && namespace !== '') return forward('invalid');
  let labels: LabelSelector;
  let fields: FieldSelector;
  try {
    labels = parseLabelSelector(query.get('labelSelector') ?? '');
    const normalized = convertFields(info, state, parseFieldSelector(query.get('fieldSelector') ?? ''));
    if (!normalized) return forward('invalid');
    fields = normalized;
  } catch {
    return forward('invalid');
  }
  // /watch/namespaces/x/pods/name: a single object is watched by its name.
  if (info.name !== '' && fields.exact('metadata.name') === undefined) {
    fields = parseFieldSelector([query.get('fieldSelector') ?? '', `metadata.name=${info.name}`].filter((x) => x !== '').join(','));
  }
  if (state.selection && !withinSelection(state.selection, labels, fields)) return forward('outside-selection');
  const rvParam = query.get('resourceVersion') ?? '';
  const rv = rvParam === '' ? undefined : parseResourceVersion(rvParam);
  if (rvParam !== '' && rv === undefined) return forward('invalid');
  const match = query.get('resourceVersionMatch');
  const sendInitial = query.get('sendInitialEvents');
  const allowBookmarks = queryBool(query.get('allowWatchBookmarks'));
  let initial: WatchPlan['initial'];
  let initialEventsEnd = false;
  if (sendInitial !== null || match !== null) {
    // The apiserver's validation: sendInitialEvents needs resourceVersionMatch=NotOlderThan and
    // the other way round; its 422 is the answer to anything else. A /watch/ path without
    // ?watch= is validated as a list, for which sendInitialEvents is forbidden.
    if (sendInitial === null || match !== 'NotOlderThan' || !queryBool(query.get('watch'))) return forward('invalid');
    if (!queryBool(sendInitial)) return forward('watch-initial-state');
    initial = rv === undefined ? 'consistent' : rv === 0 ? 'any' : 'notOlderThan';
    initialEventsEnd = allowBookmarks;
  } else if (rv === undefined || rv === 0) {
    // The apiserver defaults to a watch-list only a watch asked for with ?watch= (its
    // SetListOptionsDefaults reads ListOptions.Watch): a /watch/ path without it is the legacy watch.
    if (state.watchList && queryBool(query.get('watch'))) {
      // Defaulted to a consistent watch-list (rv unset) or one from any state (rv 0).
      initial = rv === undefined ? 'consistent' : 'any';
      initialEventsEnd = allowBookmarks;
    } else {
      // The legacy watch: the current state as ADDED events, then changes.
      initial = 'any';
    }
  }
  // A watch that begins as new as the apiserver follows the consistent-read policy.
  let consistentRead = false;
  const policy = policyOf(state);
  if (initial === 'consistent' && policy !== 'verify') {
    if (policy === 'forward') return forward('consistent-read');
    initial = 'any';
    consistentRead = true;
  }
  let timeoutSeconds: number | undefined;
  const t = query.get('timeoutSeconds');
  // Empty is no number either: the apiserver's 400.
  if (t !== null) {
    if (!/^\d{1,9}$/.test(t)) return forward('invalid');
    // 0 asks for no timeout: the apiserver then picks its own (30 to 60 min), as for none.
    timeoutSeconds = Number(t) || undefined;
  }
  return {
    source: 'cache',
    plan: { namespace, labels, fields, resourceVersion: rv ?? 0, initial, initialEventsEnd, allowBookmarks, timeoutSeconds, representation: rep, ...(consistentRead ? { consistentRead } : {}) },
  };
}
