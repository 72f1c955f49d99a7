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

/** The parts in one new buffer, for a write; `size`, when given, is their total length. */
export function joinBytes(parts: readonly Uint8Array[], size?: number): Buffer {
  return joinInto((n) => Buffer.allocUnsafe(n), parts, size);
}

// Bytes that are kept (a cached object, its other forms, an event's frame for the event window)
// must not be a slice of Node's shared Buffer pool. Buffer.allocUnsafe, Buffer.from and
// Buffer.concat take anything under half of Buffer.poolSize (64 KiB in Node 24, so under 32 KiB)
// out of one pool shared by all small buffers, and a slice that is kept keeps its whole pool
// alive. Under churn every change kept a 4–11 KB object in a pool otherwise full of garbage: in
// bench:watch (5,000 pods, 100 updates/s, one thread) 3,178 pools of 64 KiB, 208 MB, were held
// after 90 s by cached objects and the previous states in the event window (a heap snapshot), and
// RSS was 563 MB and still growing when the updates stopped at 150 s. Buffer.allocUnsafeSlow
// gives each its own memory, freed with it: 458 MB, level from 100 s on (the 75 s window full).

/** The parts in one new buffer of its own, for bytes that are kept. */
export function joinKept(parts: readonly Uint8Array[], size?: number): Buffer {
  return joinInto(allocKept, parts, size);
}

/** A new buffer of its own, for bytes that are kept. */
export function allocKept(size: number): Buffer {
  return Buffer.allocUnsafeSlow(size);
}

// A view may hold this much memory beyond its bytes and still be kept as it is: a watch event's
// object is a view of the event's own line, which has ~30 bytes more.
const KEPT_SLACK = 256;

/** `bytes`, or a copy of its own when they are a view of more memory (a pool's slice): bytes to keep. */
export function kept(bytes: Buffer): Buffer {
  if (bytes.buffer.byteLength - bytes.length <= KEPT_SLACK) return bytes;
  return joinKept([bytes], bytes.length);
}

// Out of ordinary memory a part is copied with TypedArray.prototype.set, which takes the source's
// address from the typed array itself; fill() first asks V8 for the view's ArrayBuffer, one more
// object in memory the CPU no longer caches for each object a LIST picks out of a large cache:
// 3 % of Levee's CPU on LIST by node at 50,000 pods (a perf profile). With set, three bench:ab
// runs, CPU per LIST 535 → 530, 473 → 457, 523 → 500 µs, p50 1–3 % lower. Out of shared memory
// set takes V8's relaxed-atomic loop (above), so a thread whose objects' bytes are shared copies
// with fill.
let sharedSources = false;

/** This thread's objects' bytes are in shared memory: joins copy them with memcpy (fill) from now on. */
export function copyFromSharedMemory(): void {
  sharedSources = true;
}

/** The parts copied into a buffer `alloc` makes; `size`, when given, is their total length. */
export function joinInto(alloc: (size: number) => Buffer, parts: readonly Uint8Array[], size?: number): Buffer {
  let total = size;
  if (total === undefined) {
    total = 0;
    for (const p of parts) total += p.length;
  }
  const out = alloc(total);
  let at = 0;
  for (const p of parts) {
    const n = p.length;
    // A separator (a LIST's comma) is stored, not copied: half a LIST's parts are one byte, and
    // each fill() is a call into Node that costs more than its byte (about 0.25 µs, a perf profile
    // of LIST by node). fill() with an empty value would fill with zeros; an empty part has
    // nothing to copy.
    if (n === 1) out[at] = p[0]!;
    else if (n > 1) {
      if (sharedSources) out.fill(p, at, at + n);
      else out.set(p, at);
    }
    at += n;
  }
  return out;
}
