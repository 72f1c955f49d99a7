// The formatting helpers the apiserver's printers share (pkg/printers/internalversion and
// apimachinery): label sets and selectors as strings, containers on one line, Go's TrimSpace.
import { compareGo } from '../../selectors/gostrings.ts';
import { newRequirement, requirementString, type LabelOperator, type LabelRequirement } from '../../selectors/requirement.ts';

/** labels.FormatLabels: `k=v` pairs sorted, comma-separated; <none> for none. */
export function formatLabels(labels: Readonly<Record<string, string>> | null | undefined): string {
  const s = Object.entries(labels ?? {})
    .map(([k, v]) => `${k}=${v}`)
    .sort(compareGo)
    .join(',');
  return s === '' ? '<none>' : s;
}

/** metav1.LabelSelector as the v1 JSON carries it. */
export interface LabelSelectorJson {
  matchLabels?: Record<string, string> | null;
  matchExpressions?: Array<{ key?: string; operator?: string; values?: string[] | null }> | null;
}

const OPERATORS: Readonly<Record<string, LabelOperator>> = { In: 'in', NotIn: 'notin', Exists: 'exists', DoesNotExist: '!' };

/**
 * metav1.LabelSelectorAsSelector(s).String(): "" for no selector and for the empty one, undefined
 * when a requirement is invalid (the apiserver's error).
 */
export function labelSelectorString(s: LabelSelectorJson | null | undefined): string | undefined {
  if (!s) return '';
  const labels = Object.entries(s.matchLabels ?? {});
  const expressions = s.matchExpressions ?? [];
  if (labels.length + expressions.length === 0) return '';
  const requirements: LabelRequirement[] = [];
  try {
    for (const [k, v] of labels) requirements.push(newRequirement(k, '=', [v]));
    for (const e of expressions) {
      const op = OPERATORS[e.operator ?? ''];
      if (op === undefined) return undefined;
      requirements.push(newRequirement(e.key ?? '', op, [...(e.values ?? [])]));
    }
  } catch {
    return undefined;
  }
  // internalSelector.Add sorts by key (an insertion sort, stable, for the few requirements of a
  // selector); Requirement.String sorts the values it writes.
  const sorted = requirements.map((r, i) => ({ r, i })).sort((a, b) => compareGo(a.r.key, b.r.key) || a.i - b.i);
  return sorted.map(({ r }) => requirementString({ ...r, values: r.values.length > 1 ? [...r.values].sort(compareGo) : r.values })).join(',');
}

/** metav1.FormatLabelSelector: <none> for none, <error> for an invalid one. */
export function formatLabelSelector(s: LabelSelectorJson | null | undefined): string {
  const text = labelSelectorString(s);
  if (text === undefined) return '<error>';
  return text === '' ? '<none>' : text;
}

export interface ContainerJson {
  name?: string;
  image?: string;
}

/** layoutContainerCells: every container's name, and every image, each on one line. */
export function layoutContainerCells(containers: readonly ContainerJson[] | null | undefined): [string, string] {
  const list = containers ?? [];
  return [list.map((c) => c.name ?? '').join(','), list.map((c) => c.image ?? '').join(',')];
}

// unicode.IsSpace: Go's TrimSpace takes U+0085 and leaves U+FEFF, unlike String.prototype.trim.
const GO_SPACE = '[\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]';
const TRIM = new RegExp(`^${GO_SPACE}+|${GO_SPACE}+$`, 'g');

/** strings.TrimSpace. */
export function trimSpace(s: string): string {
  return s.replace(TRIM, '');
}
