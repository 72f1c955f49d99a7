// The ordered map behind the store: sorted-btree is a B+ tree whose clone() is O(1) and
// copy-on-write, which is what point-in-time snapshots for pagination need.
import * as sortedBtree from 'sorted-btree';
import type { CachedObject } from './object.ts';

/** The part of sorted-btree's BTree the store uses. */
export interface Tree {
  readonly size: number;
  get(key: string): CachedObject | undefined;
  set(key: string, value: CachedObject): boolean;
  delete(key: string): boolean;
  clear(): void;
  /** O(1); both trees copy nodes on their next write. */
  clone(): Tree;
  values(firstKey?: string): IterableIterator<CachedObject>;
}

type TreeCtor = new (entries: undefined, compare: (a: string, b: string) => number) => Tree;

// The package is CommonJS with the class on `exports.default`; Node's ESM interop nests it once more.
const mod = sortedBtree as unknown as { default: TreeCtor | { default: TreeCtor } };
const BTree: TreeCtor = 'default' in mod.default ? mod.default.default : mod.default;

export function newObjectTree(): Tree {
  // Keys are ASCII ("/namespace/name"), so < and > order them as etcd orders its byte keys.
  return new BTree(undefined, (a, b) => (a < b ? -1 : a > b ? 1 : 0));
}
