// The guarantees etcd's robustness tests check of a watch (etcd.io/docs/v3.6/learning/api_guarantees,
// "Watch APIs"), checked of watches through Levee against etcd's own history of the same keys.
//
// Why not etcd's checker (go.etcd.io/etcd/tests/v3/robustness/validate, v3.7.0): its watch checks
// (validateWatch: ordered, unique, atomic, bookmarkable, reliable, resumable) are unexported, and
// the one entry point, ValidateAndReturnVisualize, first linearizes every client's key-value
// operations with porcupine from an empty database (ErrNotEmptyDatabase otherwise) and then builds
// its expected events (model.NewReplay) from every request etcd persisted since revision 1, with
// their values: this cluster's etcd is written by kube-apiserver (transactions we do not record,
// leases, its own compactions), and a Kubernetes watch carries JSON objects, not the protobuf bytes
// etcd stores, so its events could never DeepEqual the replay's. Its definitions are kept below,
// restated for Kubernetes watches: a watch resumes *after* a resourceVersion (etcd's from one), a
// LIST starts one, 410 Gone is an allowed answer to a resume, and a BOOKMARK is a progress notify.
import type { EtcdEvent } from './etcd.ts';

export type DeliveredType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK';

/** One event as a client received it: `key` is namespace/name ('' for a bookmark). */
export interface Delivered {
  type: DeliveredType;
  key: string;
  rv: number;
}

/** One watch request's stream. */
export interface Segment {
  /** The resourceVersion the watch was started from. */
  from: number;
  /** Started from a LIST (first, or after 410 Gone): `state` is what the list held, key@rv. */
  listed: boolean;
  state?: string[];
  items: Delivered[];
  /** How it ended: eof, gone (410), error: ..., stopped. */
  end: string;
}

export interface History {
  name: string;
  segments: Segment[];
}

/** The state of the keys after every event at or below `rv`, as key@rv, sorted. */
export function stateAt(ref: readonly EtcdEvent[], keyOf: (etcdKey: string) => string, rv: number): string[] {
  const state = new Map<string, number>();
  for (const e of ref) {
    if (e.revision > rv) break;
    if (e.type === 'DELETED') state.delete(keyOf(e.key));
    else state.set(keyOf(e.key), e.revision);
  }
  return [...state].map(([k, v]) => `${k}@${v}`).sort();
}

const show = (d: { type: string; key: string; rv: number } | undefined): string => (d ? `${d.type} ${d.key}@${d.rv}` : 'nothing');

/**
 * Every guarantee `h` breaks, one line each, named as etcd names them. `ref` is etcd's history of
 * the watched range (every event, in order, from before the first LIST); `keyOf` turns an etcd key
 * into namespace/name. `relists` are the resourceVersions at which Levee relisted (its upstream
 * watch lost its window): Levee's one documented difference from the apiserver (README, "a relist
 * of the upstream") is that a live watch that takes bookmarks is not ended there but sent the
 * differences between the old and new state, then a BOOKMARK at the list's resourceVersion. Such a
 * run of events is judged by what it must achieve (the client's state equals etcd's at the list's
 * resourceVersion, and a bookmark says so before anything newer), not event by event; everything
 * else must be etcd's history exactly.
 */
export function checkHistory(h: History, ref: readonly EtcdEvent[], keyOf: (etcdKey: string) => string, relists: readonly number[] = []): string[] {
  const out: string[] = [];
  const say = (guarantee: string, msg: string): void => void (out.length < 20 && out.push(`${h.name}: ${guarantee}: ${msg}`));
  const refs: Delivered[] = ref.map((e) => ({ type: e.type, key: keyOf(e.key), rv: e.revision }));
  const seen = new Set<string>();
  // An epoch: a LIST and the watches that resumed from it, until 410 Gone makes the client list again.
  const epochs: Segment[][] = [];
  for (const s of h.segments) {
    if (s.listed || epochs.length === 0) epochs.push([s]);
    else epochs.at(-1)!.push(s);
  }
  for (const epoch of epochs) {
    const start = epoch[0]!.from;
    const state = new Map<string, number>();
    if (epoch[0]!.listed && epoch[0]!.state) {
      const want = stateAt(ref, keyOf, start);
      const have = [...epoch[0]!.state].sort();
      if (JSON.stringify(want) !== JSON.stringify(have)) {
        const missing = want.filter((x) => !have.includes(x));
        const extra = have.filter((x) => !want.includes(x));
        say('list', `the LIST at ${start} is not the state at ${start}: missing ${missing.slice(0, 5).join(' ')}, extra ${extra.slice(0, 5).join(' ')}`);
      }
      for (const item of have) {
        const at = item.lastIndexOf('@');
        state.set(item.slice(0, at), Number(item.slice(at + 1)));
      }
    }
    const apply = (d: Delivered): void => void (d.type === 'DELETED' ? state.delete(d.key) : state.set(d.key, d.rv));
    let last = start; // newest resourceVersion delivered: event or bookmark
    let lastEvent = start;
    let lastBookmark = 0;
    let pos = refs.findIndex((e) => e.rv > start); // the next event of etcd's history this client must get
    if (pos === -1) pos = refs.length;
    let broken = false;
    for (const s of epoch) {
      if (!s.listed && s.from !== last) say('resumable', `a watch resumed from ${s.from}, not the last resourceVersion delivered (${last}): the recorder is wrong`);
      // Resumable: the first event after resuming from `from` is the first event after it.
      const first = s.items.find((i) => i.type !== 'BOOKMARK');
      if (first && !relists.some((r) => r > s.from && first.rv <= r)) {
        const want = refs.find((e) => e.rv > s.from);
        if (!want || want.rv !== first.rv || want.key !== first.key || want.type !== first.type) {
          say('resumable', `the watch from ${s.from} began with ${show(first)}, the first event after ${s.from} is ${show(want)}`);
        }
      }
      for (let i = 0; i < s.items.length; i++) {
        const d = s.items[i]!;
        if (d.type === 'BOOKMARK') {
          // Bookmarkable: a bookmark is not behind what was delivered, and promises every event up to it.
          if (d.rv < last) say('bookmarkable', `BOOKMARK@${d.rv} after resourceVersion ${last} was delivered (watch from ${s.from})`);
          if (!broken && pos < refs.length && refs[pos]!.rv <= d.rv) {
            say('reliable', `BOOKMARK@${d.rv} (watch from ${s.from}) before ${show(refs[pos])}, which was never delivered`);
            broken = true;
          }
          last = Math.max(last, d.rv);
          lastBookmark = Math.max(lastBookmark, d.rv);
          continue;
        }
        // Ordered: revisions never go back (events of one revision share it); nothing at or
        // below a bookmark comes after it.
        if (d.rv < lastEvent) say('ordered', `${show(d)} after an event at ${lastEvent} (watch from ${s.from})`);
        else if (d.rv <= lastBookmark) say('bookmarkable', `${show(d)} after BOOKMARK@${lastBookmark} (watch from ${s.from})`);
        // Unique: no event twice, across resumes and relists.
        const id = `${d.key}@${d.rv}`;
        if (seen.has(id)) say('unique', `${show(d)} delivered twice`);
        seen.add(id);
        last = Math.max(last, d.rv);
        lastEvent = d.rv;
        if (broken) continue;
        // Reliable: exactly etcd's history, no gap, nothing extra.
        const e = refs[pos];
        if (e && e.rv === d.rv && e.key === d.key && e.type === d.type) {
          apply(d);
          pos++;
          continue;
        }
        // Or the differences of one of Levee's relists, closed by a bookmark.
        const relist = relists.find((r) => r >= d.rv && r > lastBookmark && e !== undefined && e.rv <= r);
        if (relist !== undefined) {
          let j = i;
          for (; j < s.items.length && s.items[j]!.type !== 'BOOKMARK' && s.items[j]!.rv <= relist; j++) {
            const x = s.items[j]!;
            if (j > i) {
              if (x.rv < lastEvent) say('ordered', `${show(x)} after an event at ${lastEvent} (relist at ${relist}, watch from ${s.from})`);
              const xid = `${x.key}@${x.rv}`;
              if (seen.has(xid)) say('unique', `${show(x)} delivered twice`);
              seen.add(xid);
              lastEvent = x.rv;
              last = Math.max(last, x.rv);
            }
            apply(x);
          }
          const closing = s.items[j];
          if (closing?.type !== 'BOOKMARK' || closing.rv < relist) {
            say('reliable', `the differences of Levee's relist at ${relist} (watch from ${s.from}) were not followed by a BOOKMARK at ${relist} but by ${show(closing)}`);
            broken = true;
          }
          const have = [...state].map(([k, v]) => `${k}@${v}`).sort();
          const want = stateAt(ref, keyOf, relist);
          if (JSON.stringify(have) !== JSON.stringify(want)) {
            say('reliable', `after the differences of Levee's relist at ${relist} (watch from ${s.from}) the client holds ${have.filter((x) => !want.includes(x)).slice(0, 5).join(' ')} instead of ${want.filter((x) => !have.includes(x)).slice(0, 5).join(' ')}`);
            broken = true;
          }
          pos = refs.findIndex((r) => r.rv > relist);
          if (pos === -1) pos = refs.length;
          i = j - 1;
          continue;
        }
        const partial = e && d.rv === e.rv && d.key !== e.key;
        say(
          partial ? 'atomic' : 'reliable',
          `epoch from ${start}: got ${show(d)} where etcd's history has ${show(e)} (watch from ${s.from}); ` +
            `delivered around it: ${s.items.slice(Math.max(0, i - 2), i + 3).map(show).join(', ')}; etcd: ${refs.slice(Math.max(0, pos - 2), pos + 3).map(show).join(', ')}`,
        );
        broken = true;
      }
    }
    // Reliable, at the end: nothing up to the newest resourceVersion delivered is missing.
    if (!broken && pos < refs.length && refs[pos]!.rv <= last) say('reliable', `epoch from ${start} to ${last}: ${show(refs[pos])} was never delivered`);
  }
  return out;
}
