// A Status answered in the representation the client negotiated: the apiserver writes its errors
// with the same serializer as its objects, so a protobuf client gets a protobuf Status.
import type { Representation } from '../api/negotiation.ts';
import type { Status } from '../api/types.ts';
import type { DownstreamResponse } from '../http/downstream.ts';
import { writeStatus } from '../http/respond.ts';
import { PROTOBUF, statusBytes } from '../represent/protobuf/objects.ts';

export function writeStatusAs(res: DownstreamResponse, status: Status, rep: Representation): void {
  const media = rep.as === 'Table' ? 'json' : rep.media;
  if (media === 'json' || res.headersSent) {
    writeStatus(res, status);
    return;
  }
  const body = statusBytes(status);
  const headers: Record<string, string> = { 'content-type': PROTOBUF, 'content-length': String(body.length), 'cache-control': 'no-cache, private' };
  const retry = status.details?.retryAfterSeconds;
  if (retry) headers['retry-after'] = String(retry);
  res.writeHead(status.code, headers);
  res.end(body);
}
