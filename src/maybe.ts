// A value now, or a promise of it later. The stages a cached read passes (flow control, authorization,
// the freshness proof) nearly always know their answer at once: a free seat, a cached decision, a
// store already there. An `await` on such an answer still gives up the turn, and with it the
// response's place ahead of everything else queued (the previous response's bookkeeping, Node's
// own nextTicks for the socket), so a stage returns a promise only when it must wait, and its
// caller awaits only then. Measured on cached GETs through Levee (bench/list.ts' client, one CPU
// each for client and server): 30–35 µs less per GET, about a tenth of its time.
export type Maybe<T> = T | Promise<T>;

/** `f` applied to `v`: at once when `v` is a value, once it settles when it is a promise. */
export function then<T, U>(v: Maybe<T>, f: (value: T) => Maybe<U>): Maybe<U> {
  return v instanceof Promise ? v.then(f) : f(v);
}
