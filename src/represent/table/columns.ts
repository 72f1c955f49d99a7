// The column definitions the apiserver's printers register for each built-in kind, and ObjectMeta's
// descriptions the custom resource tables use: generated from the Go sources of this Kubernetes
// release by testenv/cmd/tablecolumns (columns.json), checked against them by the tests.
import columnsJson from './columns.json' with { type: 'json' };
import { goString } from '../gojson.ts';

/** metav1.TableColumnDefinition. */
export interface ColumnDefinition {
  name: string;
  type: string;
  format: string;
  description: string;
  priority: number;
}

interface Generated {
  kinds: Record<string, ColumnDefinition[]>;
  metadata: { name: string; creationTimestamp: string };
}

const generated: Generated = columnsJson;

/** The columns of a built-in kind (`Kind` or `Kind.group`). */
export function builtinColumns(key: string): readonly ColumnDefinition[] | undefined {
  return generated.kinds[key];
}

/** metav1.ObjectMeta's documentation of a field, as column descriptions quote it. */
export function metadataDescription(field: 'name' | 'creationTimestamp'): string {
  return generated.metadata[field];
}

/** The `columnDefinitions` array as the apiserver writes it (every field, in the struct's order). */
export function encodeColumns(columns: readonly ColumnDefinition[]): string {
  return `[${columns
    .map((c) => `{"name":${goString(c.name)},"type":${goString(c.type)},"format":${goString(c.format)},"description":${goString(c.description)},"priority":${c.priority}}`)
    .join(',')}]`;
}
