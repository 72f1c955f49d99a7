// Label selectors as the apiserver parses (labels.Parse) and matches (internalSelector.Matches)
// them for the labelSelector parameter of LIST and WATCH.
import { compareGo } from './gostrings.ts';
import { parseRequirements } from './labelparser.ts';
import { ParseMemo } from './memo.ts';
import {
  matchRequirement, requirementString, type CompiledRequirement, type LabelOperator, type LabelRequirement,
} from './requirement.ts';

export { SelectorParseError } from './errors.ts';
export type { LabelOperator, LabelRequirement };

export class LabelSelector {
  // Sorted by key as labels.Parse leaves them; requirements on the same key keep input order.
  readonly requirements: readonly LabelRequirement[];
  readonly empty: boolean;
  readonly #compiled: readonly CompiledRequirement[];

  constructor(requirements: readonly CompiledRequirement[]) {
    this.#compiled = requirements;
    this.requirements = requirements.map(({ key, operator, values }) => ({ key, operator, values }));
    this.empty = requirements.length === 0;
  }

  // Every requirement must hold (an AND). A missing labels map is an object with no labels.
  matches(labels: Readonly<Record<string, string>> | null | undefined): boolean {
    for (const r of this.#compiled) if (!matchRequirement(r, labels)) return false;
    return true;
  }

  // Requirements that pin a key to one value, for index lookups: "=", "==", and "in" with a single
  // value. Any of them alone narrows the candidates; matches() still decides.
  equalities(): Array<[string, string]> {
    const out: Array<[string, string]> = [];
    const seen = new Set<string>();
    for (const r of this.requirements) {
      if (!pins(r.operator) || r.values.length !== 1) continue;
      const value = r.values[0] ?? '';
      const id = JSON.stringify([r.key, value]);
      if (seen.has(id)) continue;
      seen.add(id);
      out.push([r.key, value]);
    }
    return out;
  }

  // Keys an object must carry to match: exists, "=", "==", "in", and the integer comparisons
  // (which fail on a missing label).
  exists(): string[] {
    const keys = new Set<string>();
    for (const r of this.requirements) {
      if (pins(r.operator) || r.operator === 'exists' || r.operator === 'gt' || r.operator === 'lt') keys.add(r.key);
    }
    return [...keys];
  }

  // internalSelector.RequiresExactMatch: decided by the first requirement on that key only.
  requiresExactMatch(key: string): string | undefined {
    const r = this.requirements.find((req) => req.key === key);
    if (r === undefined || !pins(r.operator) || r.values.length !== 1) return undefined;
    return r.values[0];
  }

  // internalSelector.String(): the canonical form ("x in (a,b),y!=c").
  toString(): string {
    return this.requirements.map(requirementString).join(',');
  }
}

// Selectors are immutable, and most watches and lists have none: they share one.
const EVERYTHING = new LabelSelector([]);

function pins(op: LabelOperator): boolean {
  return op === '=' || op === '==' || op === 'in';
}

// labels.Parse. Throws SelectorParseError with apimachinery's message. The empty string (or only
// whitespace) is the empty selector, which matches everything.
export function parseLabelSelector(selector: string): LabelSelector {
  if (selector === '') return EVERYTHING;
  return parsedLabels.get(selector);
}

const parsedLabels = new ParseMemo(parseLabels, { max: 1024, maxKeyLength: 1024 });

function parseLabels(selector: string): LabelSelector {
  const requirements = parseRequirements(selector);
  // sort.Sort(ByKey) is an insertion sort, hence stable, up to 12 elements; a stable sort gives the
  // same order there and differs only for more than 12 requirements with repeated keys.
  requirements.sort((a, b) => compareGo(a.key, b.key));
  return new LabelSelector(requirements);
}
