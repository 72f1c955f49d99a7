// Joins buffers that may hold objects' stored bytes into one, for one write.
//
// With worker threads every object's bytes live in a SharedArrayBuffer (docs/design.md,
// "Workers"), and V8 copies out of shared memory with a relaxed-atomic word loop instead of
// memcpy, as its memory model asks of a buffer another thread may write: Buffer.concat,
// TypedArray.prototype.set and Buffer.prototype.copy all take that path. Buffer.prototype.fill
// with a buffer as its value copies with Node's own memcpy instead. Measured joining 53 objects of
// 11.5 KB (one node's pods, 610 KB): 127 µs with concat and 68 µs with fill out of shared memory,
// 66 and 70 µs out of ordinary buffers; picked cold out of 50,000 objects, 260 against 186 µs.
// The objects' bytes are never written once stored, so the relaxed copy guards nothing here.

/** The parts in one new buffer; `size`, when given, is their total length. */
export function joinBytes(parts: readonly Buffer[], size?: number): Buffer {
  let total = size;
  if (total === undefined) {
    total = 0;
    for (const p of parts) total += p.length;
  }
  const out = Buffer.allocUnsafe(total);
  let at = 0;
  for (const p of parts) {
    // fill() with an empty value would fill with zeros; an empty part has nothing to copy.
    if (p.length === 0) continue;
    out.fill(p, at, at + p.length);
    at += p.length;
  }
  return out;
}
