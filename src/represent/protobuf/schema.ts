// The protobuf layout of the built-in Kubernetes types, as their Go types write it: made by
// testenv/cmd/protoschema from the same k8s.io/api release the test environment builds, committed
// as schema.json, and checked against it by test/integration/protobuf.test.ts.
import schemaJson from './schema.json' with { type: 'json' };

/** How one value is written: a scalar, one of the types with a form of their own, or a message. */
export type ValueType =
  | 'string'
  | 'bool'
  | 'int32'
  | 'int64'
  | 'uint32'
  | 'uint64'
  | 'double'
  | 'bytes'
  | 'time'
  | 'microtime'
  | 'duration'
  | 'fieldsv1'
  | 'quantity'
  | 'intorstring'
  | 'rawextension'
  | 'stringlist'
  | 'map'
  // Any other name is a message of the schema.
  | (string & {});

export interface Field {
  /** The JSON name; absent for an inline (embedded) struct, whose fields are the enclosing object's. */
  json?: string;
  num: number;
  type: ValueType;
  repeated?: boolean;
  /** Written only when set: absent and null write nothing. Other fields are always written. */
  pointer?: boolean;
  inline?: boolean;
  mapValue?: ValueType;
  /** A map value that is written only when not null ([]byte values). */
  mapValueNullable?: boolean;
}

interface Schema {
  kinds: Record<string, string>;
  messages: Record<string, Field[]>;
}

const schema = schemaJson as Schema;

/** The message of an apiVersion's kind ("apps/v1", "Deployment"), if it has a protobuf form. */
export function messageOfKind(apiVersion: string, kind: string): string | undefined {
  return schema.kinds[`${apiVersion} ${kind}`];
}

export function fieldsOf(message: string): readonly Field[] | undefined {
  return schema.messages[message];
}

export const OBJECT_META = 'k8s.io/apimachinery/pkg/apis/meta/v1.ObjectMeta';
export const LIST_META = 'k8s.io/apimachinery/pkg/apis/meta/v1.ListMeta';
