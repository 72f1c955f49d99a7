// Header filtering at the boundary between a client connection and an upstream connection.
// Hop-by-hop headers describe one connection and must not cross it (RFC 9110 §7.6.1); on an HTTP/2
// response they are not merely wrong but fatal: Node throws ERR_HTTP2_INVALID_CONNECTION_HEADERS.

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'http2-settings',
]);

/** Names listed in a Connection header are hop-by-hop for that message too. */
function connectionTokens(value: string | string[] | undefined): Set<string> {
  const tokens = new Set<string>();
  for (const v of Array.isArray(value) ? value : value ? [value] : []) {
    for (const t of v.split(',')) {
      const name = t.trim().toLowerCase();
      if (name) tokens.add(name);
    }
  }
  return tokens;
}

/**
 * The client's request headers as alternating name/value pairs for undici, duplicates kept apart:
 * the apiserver reads repeated headers such as Impersonate-Group as separate values, which a joined
 * "a, b" would turn into one. Drops hop-by-hop headers, HTTP/2 pseudo-headers, Host (the upstream's
 * own is sent) and Expect (undici answers 100-continue itself).
 */
export function upstreamRequestHeaders(rawHeaders: readonly string[], drop: (lowerName: string) => boolean = () => false): string[] {
  const connection: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.toLowerCase() === 'connection') connection.push(rawHeaders[i + 1]!);
  }
  const listed = connectionTokens(connection);
  const out: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    const lower = name.toLowerCase();
    if (lower.startsWith(':') || lower === 'host' || lower === 'expect') continue;
    if (HOP_BY_HOP.has(lower) || listed.has(lower) || drop(lower)) continue;
    out.push(name, rawHeaders[i + 1]!);
  }
  return out;
}

/** Upstream response headers with hop-by-hop headers removed, ready for writeHead on HTTP/1.1 or HTTP/2. */
export function downstreamResponseHeaders(
  headers: Record<string, string | string[] | undefined>,
): Record<string, string | string[]> {
  const listed = connectionTokens(headers.connection);
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || listed.has(lower)) continue;
    out[lower] = value;
  }
  return out;
}
