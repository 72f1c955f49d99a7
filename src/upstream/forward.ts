// Forwards one request to the upstream apiserver and streams the answer back as it arrives:
// request and response bodies flow with backpressure, nothing is buffered whole, a watch stays open
// for as long as either side keeps it.
import { drained, type DownstreamRequest, type DownstreamResponse } from '../http/downstream.ts';
import type { Status } from '../api/types.ts';
import { newTimeout } from '../api/status.ts';
import { StreamRequest } from '../http/h2stream.ts';
import { credentialHeaders, droppedHeader, type UpstreamAuth } from './connector.ts';
import { downstreamResponseHeaders, upstreamRequestHeaders } from './headers.ts';
import { isClientAbort, isConnectFailure, upstreamFailureStatus } from './errors.ts';
import type { TrafficClass, UpstreamPools } from './pools.ts';
import { eventBoundaryFor } from './eventboundary.ts';
import type { Flight } from './coalesce.ts';

/** The upstream could not be asked or did not answer; nothing has been written to the client yet. */
export class UpstreamUnavailableError extends Error {
  readonly status: Status;
  constructor(status: Status, options?: ErrorOptions) {
    super(status.message, options);
    this.status = status;
  }
}

export interface ForwardOptions {
  auth: UpstreamAuth;
  traffic: TrafficClass;
  /**
   * For a watch: once aborted (Levee is shutting down), the response ends normally at the next
   * boundary between two events, so the client re-watches, elsewhere, from the last event it got.
   */
  ending?: AbortSignal | undefined;
  /** Identical reads wait for this one: its whole answer is handed to them when small enough. */
  share?: Flight | undefined;
  /** Told, once the response has ended, how many body bytes reached the client. */
  sent?: ((bytes: number) => void) | undefined;
}

function hasRequestBody(req: DownstreamRequest): req is Exclude<DownstreamRequest, StreamRequest> {
  // Served on the core stream API only when its headers ended the stream: there is no body, and
  // the stream itself is the response (handed to undici as a body, undici would end it).
  if (req instanceof StreamRequest) return false;
  if (req.method === 'GET' || req.method === 'HEAD') {
    const len = req.headers['content-length'];
    return (len !== undefined && len !== '0') || req.headers['transfer-encoding'] !== undefined;
  }
  return true;
}

/**
 * Sends the request upstream and pipes the response to the client. Resolves with the status code
 * sent. Rejects with UpstreamUnavailableError when nothing was written yet (the caller answers a
 * Status); a failure after the response started ends the client's stream abruptly, exactly as the
 * apiserver dying mid-response would.
 */
export async function forward(
  req: DownstreamRequest,
  res: DownstreamResponse,
  pools: UpstreamPools,
  opts: ForwardOptions,
): Promise<number> {
  const abort = new AbortController();
  // Listened to only while the exchange is in progress (removed once the answer is written), so a
  // 'close' here is a client gone away: the upstream request ends too. Not `writableFinished`:
  // Node marks an HTTP/2 stream's writable side finished when the client resets it, which left a
  // reset watch open upstream until the apiserver's own timeout.
  let clientGone = false;
  const onClose = (): void => {
    clientGone = true;
    abort.abort();
  };
  res.once('close', onClose);
  // A watch whose end comes before the apiserver has even answered its headers (the connection
  // went silent, or Levee is shutting down): the apiserver would have ended it by then. The client
  // is told so now, rather than held for the headers' own timeout (two minutes).
  const endingBeforeHeaders = (): void => abort.abort();
  if (opts.ending?.aborted) abort.abort();
  else opts.ending?.addEventListener('abort', endingBeforeHeaders, { once: true });

  let upstreamRes;
  try {
    // A watch Levee may have to end between two events is asked for uncompressed: the apiserver
    // gzips watch-list streams, whose event boundaries cannot be seen in compressed bytes. The
    // client asked to accept gzip, not to get it.
    const drop = opts.ending ? (name: string) => droppedHeader(opts.auth, name) || name === 'accept-encoding' : (name: string) => droppedHeader(opts.auth, name);
    const headers = upstreamRequestHeaders(req.rawHeaders, drop);
    headers.push(...(await credentialHeaders(pools.upstream, opts.auth)));
    const dispatcher = pools.get(opts.auth.identity, opts.traffic);
    const request = () =>
      dispatcher.request({
        method: req.method as 'GET',
        path: pools.upstream.pathPrefix + (req.url ?? '/'),
        headers,
        body: hasRequestBody(req) ? req : null,
        signal: abort.signal,
      });
    // With several endpoints, a request without a body that could not even connect is safe to
    // send again: the balancer has lowered the failed endpoint's weight and picks another.
    const attempts = hasRequestBody(req) ? 1 : pools.upstream.servers.length;
    for (let attempt = 1; ; attempt++) {
      try {
        upstreamRes = await request();
        break;
      } catch (err) {
        if (attempt >= attempts || abort.signal.aborted || !isConnectFailure(err)) throw err;
      }
    }
  } catch (err) {
    res.off('close', onClose);
    opts.ending?.removeEventListener('abort', endingBeforeHeaders);
    if (!clientGone && opts.ending?.aborted) throw new UpstreamUnavailableError(newTimeout('the upstream apiserver did not answer the watch before its end'), { cause: err });
    if (abort.signal.aborted || isClientAbort(err)) return 499;
    throw new UpstreamUnavailableError(upstreamFailureStatus(err), { cause: err });
  }
  opts.ending?.removeEventListener('abort', endingBeforeHeaders);

  const { statusCode, body } = upstreamRes;
  const responseHeaders = downstreamResponseHeaders(upstreamRes.headers);
  res.writeHead(statusCode, responseHeaders);
  // The chunks kept for requests waiting on this one, until the body proves too large to hold.
  let kept: Buffer[] | undefined = opts.share ? [] : undefined;
  let keptBytes = 0;
  let complete = false;
  // A watch's first event may be minutes away; the client should see its headers now.
  res.flushHeaders?.();
  const ending = statusCode === 200 ? opts.ending : undefined;
  const boundary = ending ? eventBoundaryFor(upstreamRes.headers['content-type']) : undefined;
  let endedCleanly = false;
  let writing = false;
  let sentBytes = 0;
  const endCleanly = (): void => {
    endedCleanly = true;
    res.end();
    body.destroy();
  };
  // A quiet watch has no next chunk to wait for: it ends now if it stands between two events.
  const onEnding = (): void => {
    if (!writing && boundary!.atBoundary && !endedCleanly) endCleanly();
  };
  ending?.addEventListener('abort', onEnding, { once: true });
  try {
    if (ending?.aborted) onEnding();
    for await (const chunk of body as AsyncIterable<Buffer>) {
      if (boundary && ending!.aborted) {
        const end = boundary.firstEnd(chunk);
        if (end !== -1) {
          res.write(chunk.subarray(0, end));
          endCleanly();
          break;
        }
      }
      boundary?.advance(chunk);
      if (kept) {
        keptBytes += chunk.length;
        if (keptBytes > opts.share!.maxBytes) {
          kept = undefined;
          opts.share!.settle(undefined);
        } else {
          kept.push(chunk);
        }
      }
      writing = true;
      sentBytes += chunk.length;
      const more = res.write(chunk) || (await drained(res));
      writing = false;
      if (!more) break;
      if (boundary && ending!.aborted && boundary.atBoundary) {
        endCleanly();
        break;
      }
    }
    complete = !endedCleanly && body.readableEnded;
    if (!endedCleanly) res.end();
  } catch (err) {
    if (!endedCleanly && !isClientAbort(err)) res.destroy(err instanceof Error ? err : undefined);
  } finally {
    opts.share?.settle(complete && kept ? { statusCode, headers: responseHeaders, body: Buffer.concat(kept, keptBytes) } : undefined);
    opts.sent?.(sentBytes);
    ending?.removeEventListener('abort', onEnding);
    res.off('close', onClose);
    if (!body.destroyed) body.destroy();
  }
  return statusCode;
}
