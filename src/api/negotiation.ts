// What the apiserver reads from a request to choose how to write its answer
// (k8s.io/apiserver/pkg/endpoints/handlers/negotiation).
import type { StatusEncoding } from './status.ts';
import { ParseMemo } from '../selectors/memo.ts';

/**
 * negotiation.isPrettyPrint: a non-empty `pretty` parameter decides (strconv.ParseBool, anything it
 * cannot read is false); otherwise browsers and command-line HTTP tools, by the start of their
 * User-Agent, get indented JSON.
 */
export function isPrettyPrint(query: URLSearchParams, userAgent: string | undefined): boolean {
  const pretty = query.get('pretty');
  if (pretty !== null && pretty !== '') return PARSE_BOOL_TRUE.has(pretty);
  return prettyPrintingAgent(userAgent);
}

/** A browser or command-line HTTP tool, to which the apiserver writes indented JSON unasked. */
export function prettyPrintingAgent(userAgent: string | undefined): boolean {
  return userAgent !== undefined && (userAgent.startsWith('curl') || userAgent.startsWith('Wget') || userAgent.startsWith('Mozilla/5.0'));
}

// strconv.ParseBool's true spellings.
const PARSE_BOOL_TRUE = new Set(['1', 't', 'T', 'TRUE', 'true', 'True']);

/** The media types the apiserver serves built-in resources in, in its order of preference. */
export type MediaType = 'json' | 'yaml' | 'protobuf' | 'cbor';

const MEDIA_TYPES: readonly { media: MediaType; type: string; subType: string; stream: boolean }[] = [
  { media: 'json', type: 'application', subType: 'json', stream: true },
  { media: 'yaml', type: 'application', subType: 'yaml', stream: false },
  { media: 'protobuf', type: 'application', subType: 'vnd.kubernetes.protobuf', stream: true },
];

/** A conversion named in the Accept header (`as=`, `v=`, `g=`): Table, PartialObjectMetadata(List). */
export interface TransformTarget {
  group: string;
  version: string;
  kind: string;
}

/** What negotiation chose: the serializer, the transform if any, and `;pretty=1`. */
export interface MediaTypeOptions {
  media: MediaType;
  target: TransformTarget | undefined;
  pretty: boolean;
}

/** Where a resource is served: a custom resource has no protobuf of its own (only its meta transforms). */
export interface EndpointKind {
  customResource: boolean;
}

interface AcceptClause {
  type: string;
  subType: string;
  q: number;
  params: Map<string, string>;
}

// goautoneg's nextSplitElement: everything before the first `sep`, and the rest after it.
function splitOnce(s: string, sep: string): [string, string] {
  const i = s.indexOf(sep);
  return i === -1 ? [s, ''] : [s.slice(0, i), s.slice(i + 1)];
}

const trimSpaces = (s: string): string => s.replace(/^ +| +$/g, '');

/**
 * goautoneg.ParseAccept, the parser the apiserver uses: clauses split on `,` and `;`, only spaces
 * trimmed, type and parameters compared as written (no case folding), malformed clauses dropped,
 * then sorted by q and by wildcards. Undefined past 12 clauses: Go's sort.Sort is an insertion sort
 * (stable) only up to 12 elements, and beyond that its order is the apiserver's to find.
 */
export function parseAccept(header: string): readonly AcceptClause[] | undefined {
  return parsedAccept.get(header);
}

const parsedAccept = new ParseMemo(parseAcceptClauses, { max: 256, maxKeyLength: 1024 });

function parseAcceptClauses(header: string): AcceptClause[] | undefined {
  const clauses: AcceptClause[] = [];
  let remaining = header;
  while (remaining.length > 0) {
    let part: string;
    [part, remaining] = splitOnce(remaining, ',');
    part = trimSpaces(part);
    const [sp, paramText] = splitOnce(part, ';');
    const [t, rest] = splitOnce(sp, '/');
    const clause: AcceptClause = { type: trimSpaces(t), subType: '', q: 1, params: new Map() };
    if (rest.length === 0) {
      if (clause.type !== '*') continue;
      clause.subType = '*';
    } else {
      const [sub, more] = splitOnce(rest, '/');
      if (more.length > 0) continue;
      clause.subType = trimSpaces(sub);
    }
    let params = paramText;
    while (params.length > 0) {
      let p: string;
      [p, params] = splitOnce(params, ';');
      const [k, v0] = splitOnce(p, '=');
      if (v0.length === 0) continue;
      const [v, extra] = splitOnce(v0, '=');
      if (extra.length !== 0) continue;
      const key = trimSpaces(k);
      if (key === 'q') clause.q = parseFloat32(v);
      else clause.params.set(key, trimSpaces(v));
    }
    clauses.push(clause);
  }
  if (clauses.length > 12) return undefined;
  // sort.Sort's insertion sort with goautoneg's Less.
  const less = (a: AcceptClause, b: AcceptClause): boolean =>
    a.q > b.q || (a.type !== '*' && b.type === '*') || (a.subType !== '*' && b.subType === '*');
  for (let i = 1; i < clauses.length; i++) {
    for (let j = i; j > 0 && less(clauses[j]!, clauses[j - 1]!); j--) [clauses[j], clauses[j - 1]] = [clauses[j - 1]!, clauses[j]!];
  }
  return clauses;
}

// strconv.ParseFloat(s, 32) as goautoneg reads q: what it cannot read is 0.
function parseFloat32(s: string): number {
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(s) && !/^[+-]?(inf|infinity|nan)$/i.test(s)) return 0;
  const n = Number(/^[+-]?inf/i.test(s) ? (s.startsWith('-') ? '-Infinity' : 'Infinity') : s);
  return Math.fround(n);
}

const META_GROUP = 'meta.k8s.io';

/** RequestScope.AllowsMediaTypeTransform: which conversions a resource endpoint serves, in which media. */
function allowsTransform(media: MediaType, target: TransformTarget | undefined, endpoint: EndpointKind): boolean {
  if (target === undefined) return !endpoint.customResource || media === 'json' || media === 'yaml';
  if (target.group !== META_GROUP || (target.version !== 'v1' && target.version !== 'v1beta1')) return false;
  if (target.kind === 'Table') return media === 'json' || media === 'yaml';
  return target.kind === 'PartialObjectMetadata' || target.kind === 'PartialObjectMetadataList';
}

// NegotiateMediaTypeOptions' match of a clause to a serializer: exact, `type/*`, or `*/*`.
function clauseMatches(clause: AcceptClause, m: (typeof MEDIA_TYPES)[number]): boolean {
  return (clause.type === m.type && (clause.subType === m.subType || clause.subType === '*')) || (clause.type === '*' && clause.subType === '*');
}

/**
 * negotiation.NegotiateMediaTypeOptions for a resource endpoint: the first Accept clause, in
 * goautoneg's order, that names a serializer the endpoint has and whose parameters it allows. An
 * empty header is JSON. Undefined: nothing acceptable (the apiserver's 406), or a header too
 * unusual to order as the apiserver would.
 */
export function negotiateMediaType(accept: string | undefined, endpoint: EndpointKind, stream: boolean): MediaTypeOptions | undefined {
  if (accept === undefined || accept.length === 0) return { media: 'json', target: undefined, pretty: false };
  const clauses = parseAccept(accept);
  if (!clauses) return undefined;
  for (const clause of clauses) {
    for (const m of MEDIA_TYPES) {
      if (!clauseMatches(clause, m)) continue;
      const options = acceptOptions(clause.params, m, endpoint);
      if (!options) continue;
      // A watch takes the first acceptable clause; if its serializer cannot stream, the answer is 406.
      if (stream && !m.stream) return undefined;
      return options;
    }
  }
  return undefined;
}

// acceptMediaTypeOptions: as/g/v name a conversion; stream must be `watch` on a streaming
// serializer; sv (a server version) is never allowed on a resource; pretty=1 indents.
function acceptOptions(params: Map<string, string>, m: (typeof MEDIA_TYPES)[number], endpoint: EndpointKind): MediaTypeOptions | undefined {
  let target: TransformTarget | undefined;
  let pretty = false;
  for (const [k, v] of params) {
    switch (k) {
      case 'as':
        target = { group: target?.group ?? '', version: target?.version ?? '', kind: v };
        break;
      case 'g':
        target = { group: v, version: target?.version ?? '', kind: target?.kind ?? '' };
        break;
      case 'v':
        target = { group: target?.group ?? '', version: v, kind: target?.kind ?? '' };
        break;
      case 'stream':
        if (v.length > 0 && (!m.stream || v !== 'watch')) return undefined;
        break;
      case 'sv':
        if (v.length > 0) return undefined;
        break;
      case 'pretty':
        pretty = v === '1';
        break;
      default:
    }
  }
  if (!allowsTransform(m.media, target, endpoint)) return undefined;
  return { media: m.media, target, pretty };
}

/**
 * How an answer is written, as far as the cache can write it: the object itself (JSON or
 * protobuf), kubectl's Table, or metadata only (PartialObjectMetadata for an object or a watch
 * event, PartialObjectMetadataList for a list).
 */
export type Representation =
  | { as: 'object'; media: 'json' | 'protobuf' }
  | { as: 'Table'; version: 'v1' | 'v1beta1'; includeObject?: IncludeObject; status?: StatusMedia }
  | { as: 'PartialObjectMetadata' | 'PartialObjectMetadataList'; media: 'json' | 'protobuf'; version: 'v1' | 'v1beta1'; status?: StatusMedia };

/** metav1.TableOptions' includeObject: what each row of a Table carries of its object. */
export type IncludeObject = 'None' | 'Metadata' | 'Object';

/**
 * The includeObject a Table request asks for (the query's first value; empty is Metadata), or
 * undefined for a value the apiserver refuses (its 400: ValidateTableOptions).
 */
export function includeObjectOf(query: URLSearchParams): IncludeObject | undefined {
  const v = query.get('includeObject') ?? '';
  if (v === '') return 'Metadata';
  return v === 'None' || v === 'Metadata' || v === 'Object' ? v : undefined;
}

/**
 * How the apiserver writes an error Status (responsewriters.ErrorNegotiated): in the first Accept
 * clause that asks for no conversion, JSON or protobuf; when none does, JSON indented by two
 * spaces without a final newline (WriteRawJSON). Undefined: YAML, CBOR or `pretty=1`, which the
 * cache does not write.
 */
export type StatusMedia = 'json' | 'protobuf' | 'indented-json';

export function statusMediaFor(accept: string | undefined): StatusMedia | undefined {
  if (accept === undefined || accept.length === 0) return 'json';
  const clauses = parseAccept(accept);
  if (!clauses) return undefined;
  for (const clause of clauses) {
    for (const m of MEDIA_TYPES) {
      if (!clauseMatches(clause, m)) continue;
      const options = acceptOptions(clause.params, m, { customResource: false });
      // DefaultEndpointRestrictions: no conversion at all.
      if (!options || options.target !== undefined) continue;
      if (options.media === 'json') return options.pretty ? undefined : 'json';
      return options.media === 'protobuf' ? 'protobuf' : undefined;
    }
  }
  return 'indented-json';
}

export const JSON_OBJECT: Representation = { as: 'object', media: 'json' };

/**
 * The representation the apiserver would write for this request, if it is one the cache writes;
 * undefined when the apiserver must answer (YAML, CBOR, Table in YAML, a conversion that does not
 * fit the verb, which the apiserver refuses with 406, or nothing acceptable at all).
 */
export function representationFor(options: MediaTypeOptions | undefined, verb: 'get' | 'list' | 'watch'): Representation | undefined {
  if (!options) return undefined;
  const { media, target } = options;
  if (media !== 'json' && media !== 'protobuf') return undefined;
  // `;pretty=1` indents JSON; protobuf has no indented form and ignores it.
  if (options.pretty && media === 'json') return undefined;
  if (target === undefined) return media === 'json' ? JSON_OBJECT : { as: 'object', media };
  const version = target.version as 'v1' | 'v1beta1';
  if (target.kind === 'Table') return media === 'json' ? { as: 'Table', version } : undefined;
  const list = verb === 'list';
  if (target.kind === (list ? 'PartialObjectMetadataList' : 'PartialObjectMetadata')) return { as: target.kind, media, version };
  return undefined;
}

/**
 * How the apiserver writes an error (responsewriters.ErrorNegotiated): the first Accept clause
 * that names a serializer, with the default endpoint restrictions (no conversion, no server
 * version, stream only "watch"), pretty by `;pretty=1`, the `pretty` parameter or the client;
 * `not-acceptable` when no clause fits (the error is then indented JSON). Undefined for a header
 * too unusual to order as the apiserver would.
 */
export function negotiateErrorMediaType(accept: string | undefined, query: URLSearchParams, userAgent: string | undefined): StatusEncoding | undefined {
  const pretty = (p: boolean, media: Exclude<MediaType, 'cbor'>) => ({ media, pretty: media !== 'protobuf' && (p || isPrettyPrint(query, userAgent)) });
  if (accept === undefined || accept.length === 0) return pretty(false, 'json');
  const clauses = parseAccept(accept);
  if (!clauses) return undefined;
  for (const clause of clauses) {
    for (const m of MEDIA_TYPES) {
      const matches = (clause.type === m.type && (clause.subType === m.subType || clause.subType === '*')) || (clause.type === '*' && clause.subType === '*');
      if (!matches || m.media === 'cbor') continue;
      const options = acceptOptions(clause.params, m, { customResource: false });
      if (!options || options.target !== undefined) continue;
      return pretty(options.pretty, m.media);
    }
  }
  return 'not-acceptable';
}

/**
 * go-restful's route match (Route.matchesAccept), which a built-in resource's request passes before
 * the apiserver negotiates anything: some clause of Accept, its parameters and q dropped and spaces
 * trimmed, must be exactly a type the route produces, or *\/*. Otherwise the answer is go-restful's
 * 406, even where negotiation would have found JSON (`application/*`, `APPLICATION/JSON`).
 */
export function routeAccepts(accept: string | undefined): boolean {
  if (accept === undefined || accept.length === 0) return true;
  return accept.split(',').some((clause) => {
    const type = trimSpaces(clause.split(';')[0]!);
    return type === '*/*' || ROUTE_PRODUCES.has(type);
  });
}

// What the routes of a built-in resource produce, besides the stream forms (never equal to a
// clause without its parameters).
const ROUTE_PRODUCES = new Set(['application/json', 'application/yaml', 'application/vnd.kubernetes.protobuf']);
