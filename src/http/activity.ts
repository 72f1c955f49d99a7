// What this thread served since it was last asked: API requests taken and live watch events sent.
// The idle heap trim (heaptrim.ts) stops the thread for a full collection, 0.1–0.3 s at 10,000
// watches, and a quiet event loop alone does not say that nobody would wait on it: delivering
// 1,000 watch events a second (10,000 watches, 100 pod updates/s) keeps the loop under 5 % busy,
// and a trim taken then held every event of that moment back for 310 ms. Counted per thread
// (module state), and only what a client waits on: not Levee's own endpoints (a scrape every 15 s
// would keep a quiet gateway from ever trimming) and not bookmarks.

let served = 0;

/** One API request taken or one watch event sent. */
export function noteServed(): void {
  served++;
}

/** How many were noted since the last call. */
export function takeServed(): number {
  const n = served;
  served = 0;
  return n;
}
