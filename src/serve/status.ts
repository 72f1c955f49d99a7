// A Status answered in the representation the client negotiated: the apiserver writes its errors
// with the same serializer as its objects, so a protobuf client gets a protobuf Status. A request
// for a conversion (Table, PartialObjectMetadata) gets its error as the first Accept clause that
// asks for none would, or indented JSON when no clause does (responsewriters.ErrorNegotiated,
// WriteRawJSON).
import type { Representation, StatusMedia } from '../api/negotiation.ts';
import type { Status } from '../api/types.ts';
import type { DownstreamResponse } from '../http/downstream.ts';
import { writeStatus } from '../http/respond.ts';
import { PROTOBUF, statusBytes } from '../represent/protobuf/objects.ts';

function statusMedia(rep: Representation): StatusMedia {
  if (rep.as === 'object') return rep.media;
  return rep.status ?? (rep.as === 'Table' ? 'json' : rep.media);
}

export function writeStatusAs(res: DownstreamResponse, status: Status, rep: Representation): void {
  const media = statusMedia(rep);
  if (media === 'json' || res.headersSent) {
    writeStatus(res, status);
    return;
  }
  const body = media === 'protobuf' ? statusBytes(status) : Buffer.from(JSON.stringify(status, null, 2));
  const headers: Record<string, string> = { 'content-type': media === 'protobuf' ? PROTOBUF : 'application/json', 'content-length': String(body.length), 'cache-control': 'no-cache, private' };
  const retry = status.details?.retryAfterSeconds;
  if (retry) headers['retry-after'] = String(retry);
  res.writeHead(status.code, headers);
  res.end(body);
}
