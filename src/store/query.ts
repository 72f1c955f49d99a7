// LIST over the store: namespace range, selectors, a start key and a limit, in etcd key order.
// Against the live state the planner takes the smallest matching index (a label key=value, label
// existence, or an indexed field value) so a LIST costs O(result); against a snapshot it scans.
import type { FieldSelector } from '../selectors/fields.ts';
import type { LabelSelector } from '../selectors/labels.ts';
import type { Tree } from './btree.ts';
import type { CachedObject } from './object.ts';
import type { Store } from './store.ts';
import type { IndexEntries } from './index.ts';

export interface ListQuery {
  /** '' for all namespaces (and for cluster-scoped resources). */
  namespace: string;
  labels: LabelSelector;
  fields: FieldSelector;
  /** First key to return (inclusive); from a continue token. */
  startKey?: string | undefined;
  /** 0: no limit. */
  limit: number;
}

export interface ListResult {
  items: CachedObject[];
  /** Set when the limit cut the list: the last key returned, for the continue token. */
  lastKey?: string;
  /** Items left after this page; only known when no selector filters (as the apiserver). */
  remaining?: number;
}

function matches(o: CachedObject, q: ListQuery): boolean {
  return (q.labels.empty || q.labels.matches(o.labels)) && (q.fields.empty || q.fields.matches(o.fields));
}

function rangeStart(q: ListQuery): string {
  const prefix = q.namespace === '' ? '/' : `/${q.namespace}/`;
  return q.startKey !== undefined && q.startKey > prefix ? q.startKey : prefix;
}

/**
 * Scans a tree in key order from the range start. As the apiserver does, a full page gets a
 * continue token whenever any object of the range remains after it, matching or not (so a page may
 * be followed by an empty one), and counts what remains only when nothing filters.
 */
export function scan(tree: Tree, q: ListQuery): ListResult {
  const prefix = q.namespace === '' ? '/' : `/${q.namespace}/`;
  const filtered = !q.labels.empty || !q.fields.empty;
  const items: CachedObject[] = [];
  let remaining = 0;
  for (const o of tree.values(rangeStart(q))) {
    if (!o.key.startsWith(prefix)) break;
    if (q.limit > 0 && items.length === q.limit) {
      if (filtered) return { items, lastKey: items.at(-1)!.key };
      remaining++;
      continue;
    }
    if (matches(o, q)) items.push(o);
  }
  if (remaining === 0) return { items };
  return { items, lastKey: items.at(-1)!.key, remaining };
}

/** Whether any object of the query's range sorts after `key`. */
function moreInRange(tree: Tree, q: ListQuery, key: string): boolean {
  const prefix = q.namespace === '' ? '/' : `/${q.namespace}/`;
  for (const o of tree.values(`${key}\u0000`)) return o.key.startsWith(prefix);
  return false;
}

/**
 * The smallest candidate set an index offers for this query, if any; `exact` when every candidate
 * matches (the query is that one field term), so no object needs reading to decide.
 */
function candidates(store: Store, q: ListQuery): { set: IndexEntries; exact: boolean } | undefined {
  let best: IndexEntries | undefined;
  let exact = false;
  const consider = (set: IndexEntries, onlyTerm: boolean): void => {
    if (!best || set.size < best.size) {
      best = set;
      exact = onlyTerm;
    }
  };
  for (const field of store.indexedFields) {
    const value = q.fields.empty ? undefined : q.fields.exact(field);
    if (value !== undefined) consider(store.fieldIndex(field)!.get(value), q.labels.empty && q.fields.terms.length === 1);
  }
  if (!q.labels.empty) {
    const idx = store.labelIndex();
    for (const [k, v] of q.labels.equalities()) consider(idx.withValue(k, v), false);
    if (!best) for (const k of q.labels.exists()) consider(idx.withKey(k), false);
  }
  return best && { set: best, exact };
}

/** LIST from the live state, using an index when one narrows the query. */
export function listLive(store: Store, q: ListQuery): ListResult {
  const found = candidates(store, q);
  // An index only pays when it is much smaller than a scan of the range.
  if (!found || found.set.size * 4 > store.size) return scan(store.tree, q);
  const prefix = q.namespace === '' ? '/' : `/${q.namespace}/`;
  const start = rangeStart(q);
  // Every key starts with "/": across all namespaces, from the start, no key needs looking at.
  const wholeRange = start === '/';
  const items: CachedObject[] = [];
  for (const o of found.set.inKeyOrder()) {
    if (!wholeRange && (!o.key.startsWith(prefix) || o.key < start)) continue;
    if (!found.exact && !matches(o, q)) continue;
    // A full page with a match still to come: a continue token, without asking the tree.
    if (q.limit > 0 && items.length === q.limit) return { items, lastKey: items.at(-1)!.key };
    items.push(o);
  }
  // A page filled by the last match gets one whenever any object of the range, matching or not,
  // remains after it (as the apiserver's continue token says).
  if (q.limit > 0 && items.length === q.limit) {
    const lastKey = items.at(-1)!.key;
    if (moreInRange(store.tree, q, lastKey)) return { items, lastKey };
  }
  return { items };
}

/**
 * Whether a LIST of the live state would answer at least `bytes` of objects. Adds up matching
 * objects only until it gets there (or runs out), so asking costs at most what visiting that much
 * of the answer costs.
 */
export function answersAtLeast(store: Store, q: ListQuery, bytes: number): boolean {
  const prefix = q.namespace === '' ? '/' : `/${q.namespace}/`;
  const found = candidates(store, q);
  const objects: Iterable<CachedObject> = found ? found.set.values() : store.tree.values(prefix);
  let count = 0;
  let sum = 0;
  for (const o of objects) {
    if (!o.key.startsWith(prefix)) {
      if (found) continue;
      break;
    }
    if (!found?.exact && !matches(o, q)) continue;
    sum += o.item.length;
    if (sum >= bytes) return true;
    // A page is all one answer holds.
    if (q.limit > 0 && ++count >= q.limit) return false;
  }
  return false;
}
