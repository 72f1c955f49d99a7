// What the apiserver reads from a request to choose how to write its answer
// (k8s.io/apiserver/pkg/endpoints/handlers/negotiation).

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
