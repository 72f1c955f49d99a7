// The V8 flags Levee runs with; `levee` (its shebang), the container entrypoint, `npm start` and
// the tests all start Node with these.
//
// A gateway streams far more bytes than it keeps. Every network read is a fresh 64 KiB buffer that
// dies at once, but V8 frees those only when the young generation fills (16 MiB semi-spaces by
// default) or external memory passes its ~64 MiB trigger, so the process swells by tens of MB per
// large response. A 1 MiB semi-space collects them promptly. Measured while a 53 MB LIST streamed
// through: peak RSS growth +45..67 MB with the default, +9..14 MB with this flag, and 12–30 MB at
// 4 MiB. The scavenges cost CPU: serving 600 node agents' watch-lists at once (bench:massrestart,
// pinned) took Levee 1.7–1.8 s of CPU at 1 MiB against 1.4 s at 4 MiB, and 2,000 agents' restart
// 2.1 s against 1.6 s (one pair, with the all-synced time 2.6 s at either); memory is kept first.
// Tried again on 2026-11-29 (4 MiB as the maximum, V8 growing the young generation only while much
// survives): restart CPU 1.8 against 1.5 s, bench:watch --full and bench:workers within their
// memory goals, but a 53 MB LIST streamed through grew RSS by 31.2 MB, more than
// test/integration/stream.test.ts allows (24 MB, the answer itself being 53); reverted.
// What bounds that growth is not the semi-space: V8 starts a young collection for the buffers it
// holds outside its heap only once they pass twice --scavenger-max-new-space-capacity-mb (32 by
// default; in MiB, doubled on 64-bit builds without pointer compression, as Node's). With 1–4 MiB
// and that flag at 2 (8 MiB of buffers), the 53 MB LIST grew RSS by 4.7, 8.5 and 8.6 MB in three
// runs (28.7, 24.6 and 10.2 without the flag; 0.4 and 13.3 with the flags below). In the restart,
// two runs: Levee's CPU 2.0 and 1.7 s (1.9–2.1 s in three runs of the flags below that evening),
// but in the first, 143 watch-lists of a restart ended before their initial events did and two of
// its three restarts took 5 s, where no run without the flag had an error; not kept.
//
// A small young generation promotes more short-lived objects, and a cache turns over its old
// generation on every change (the new object stays, the old one is garbage). V8 sizes the old
// generation's next limit from how fast it collects against how fast the program allocates; a
// gateway allocates slowly and its heap marks quickly, so V8 set the limit only 1.1× above what
// was live and ran a full collection every ~3 s at 100 pod updates/s, each marking the whole
// heap: 10,000 watches' streams, or 50,000 objects' metadata in every thread. Those pauses (10–60
// ms) were what a watch event waited behind, and their marking threads took the CPU the serving
// threads needed. 1.5× leaves 5× fewer full collections. Measured (bench:watch --full, 10,000
// watchers): full-collection time during the updates 0.28 → 0.08 and 0.06 s per minute, added
// p99 over the reference watch 22.2 → 10.3 and 15.8 ms (noisy: the apiserver shares the two CPUs),
// RSS per idle watcher 5.4 → 4.5 and 5.6 KiB; LIST by node with two threads at 50,000 pods: GC
// threads' CPU 1.9 → 1.1 s per 5 s of load, throughput +10 %. (The full-collection times came
// from prom-client's GC histogram, which recorded only the first collection of each batch, on
// both sides alike; metrics/runtime.ts now counts every one.) The idle heap trim (heaptrim.ts)
// still gives the headroom back when the process is quiet.
//
// 2× since: a burst of new connections grows the live heap itself. 2,000 node agents opening
// their watch-lists at once (bench:massrestart, pinned) took the serving thread's heap from about
// 55 to 100 MB, and at 1.5× V8 ran 10–11 full collections in those ~5 s, each marking the whole
// heap with helper threads that share the serving core; at 2× it ran 6–7. Alternated, three
// rounds each: Levee's CPU 3.5–3.9 → 2.8–3.2 s, all agents synced 4.1–4.5 → 3.4–3.7 s. bench:watch
// --full, four alternated pairs: added p99 over the reference watch 7.5–20.6 → 4.7–9.7 ms, RSS
// per idle watcher 6.7–8.3 → 7.6–8.0 KiB. It is the apiserver's own headroom (Go's GOGC=100
// collects when the heap has doubled). The cost is a higher peak between collections, up to twice
// the live heap; at rest after load (bench:workers, 5,000 pods, two pairs) one thread held 263
// and 264 MB at 1.5×, 324 and 279 MB at 2×.
//
// External memory within that limit (--external-memory-accounted-in-global-limit). Otherwise V8
// starts a full collection whenever external memory (Buffers' backing stores, and the nghttp2
// session memory Node reports to V8) has grown 64 MiB since the last one, however large the heap
// is. A burst of new connections crosses that every half second or so: in bench:massrestart, 7 of
// the 9 full collections started during the agents' two rounds were for it. Counted in the
// global limit, external memory grows that limit as the heap does, by the factor above; the
// 64 KiB read buffers that die at once are still freed by the scavenges of the 1 MiB semi-space.
// Alternated, two pairs traced (--trace-gc): full collections over the run 17 → 8, Levee's CPU
// for the agents' restart 2.7–2.8 → 2.0–2.1 s. Three pairs untraced, Levee's CPU for the restart
// 2.10, 2.32, 2.96 → 1.74, 2.26, 1.99 s and for the first start 2.48, 3.13, 3.47 → 2.31, 2.76,
// 2.43 s (lower in all six; the time to sync, which waits on the consistency proof, did not move).
// bench:watch --full, two pairs: RSS per idle watcher 6.4 and 8.2 KiB without, 8.0 and 6.7 with,
// the added p99 as noisy either way (20.9–30.0 ms that day, the apiserver's own p99 near 1 s).
//
// V8's memory reducer collects the ordinary way (--no-memory-reducer-favors-memory). It starts a
// few seconds after a burst, once allocation slows (whether or not requests still come), and by
// default its collections are memory-reducing ones, which drop every hidden class (map) that no
// live object has any more, where an ordinary collection keeps a map for as long as its prototype
// lives. Optimized code that checks for a dropped map is thrown away: after a mass restart, when
// every connection, stream and request object of it is gone, that was 56–183 functions at each
// such collection (--trace-deopt: Node's TLS, HTTP/2 and stream code, Levee's request chain), and
// the next burst ran them unoptimized and compiled them again. bench:restartab against the
// commit before (2,000 agents restarting against each Levee in turn, six times each): Levee's CPU
// per restart 1.85 → 1.53 s (medians; lower in all six pairs), and 1.83 → 1.61 s in an earlier run
// of the same comparison. What a request costs did not move (bench:ab: GET 267/250 µs of CPU, LIST
// by node 650/650). The pages a burst emptied still go back at the idle heap trim (heaptrim.ts;
// bench:watch --full: 5.3 KiB of RSS per idle watcher), whose collection must stay a
// memory-reducing one: an ordinary collection told to compact every page
// (--compact-on-every-full-gc) moves the objects, but V8 keeps the emptied pages in its pool,
// resident (RSS rose by 40 MB), and releases that pool only in a memory-reducing collection. So a
// burst after a quiet spell long enough for the trim still finds its code to optimize again.
export const NODE_FLAGS: readonly string[] = [
  '--max-semi-space-size=1',
  '--heap-growing-percent=100',
  '--external-memory-accounted-in-global-limit',
  '--no-memory-reducer-favors-memory',
];
