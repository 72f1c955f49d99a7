// A cache that holds only part of a resource (a node-local cache of pods with
// spec.nodeName=$NODE_NAME) can answer only requests that ask for nothing outside that part: every
// term of its upstream selector must be among the request's own terms.
import type { FieldSelector } from '../selectors/fields.ts';
import type { LabelSelector } from '../selectors/labels.ts';
import { requirementString } from '../selectors/requirement.ts';

export interface Selection {
  labels: LabelSelector;
  fields: FieldSelector;
  /** As given, for the reflector's upstream requests. */
  labelSelector: string;
  fieldSelector: string;
}

/** True when every object the request can match lies inside the selection. */
export function withinSelection(selection: Selection, labels: LabelSelector, fields: FieldSelector): boolean {
  const have = new Set(labels.requirements.map(requirementString));
  for (const r of selection.labels.requirements) if (!have.has(requirementString(r))) return false;
  for (const t of selection.fields.terms) {
    if (!fields.terms.some((u) => u.field === t.field && u.op === t.op && u.value === t.value)) return false;
  }
  return true;
}
