// A Status answered in the representation the client negotiated: the apiserver writes its errors
// with the same serializer as its objects, so a protobuf client gets a protobuf Status. A request
// for a conversion (Table, PartialObjectMetadata) gets its error as the first Accept clause that
// asks for none would, or indented JSON when no clause does (responsewriters.ErrorNegotiated,
// WriteRawJSON).
import type { Representation, StatusMedia } from '../api/negotiation.ts';
import type { StatusEncoding } from '../api/status.ts';
import type { Status } from '../api/types.ts';
import type { DownstreamResponse } from '../http/downstream.ts';
import { writeStatus } from '../http/respond.ts';

function statusMedia(rep: Representation): StatusMedia {
  if (rep.as === 'object') return rep.media;
  return rep.status ?? (rep.as === 'Table' ? 'json' : rep.media);
}

const ENCODINGS: Record<StatusMedia, StatusEncoding | undefined> = {
  json: undefined,
  protobuf: { media: 'protobuf', pretty: false },
  'indented-json': { media: 'json', pretty: true },
};

export function writeStatusAs(res: DownstreamResponse, status: Status, rep: Representation): void {
  writeStatus(res, status, ENCODINGS[statusMedia(rep)]);
}
