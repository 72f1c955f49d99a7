// A bounded wait for something that has no deadline of its own, or none short enough for the one
// waiting: a review or a LIST sent over an upstream connection that went silent waits for the
// headers' timeout (two minutes), and whoever waits for it must still be answered by its bound.

/**
 * `p`'s value, or undefined once `ms` have passed without it. Only the wait ends: `p` goes on, and
 * whoever shares it (a cached review, a shared LIST) still gets its value.
 */
export function within<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const passed = new Promise<undefined>((resolve) => (timer = setTimeout(resolve, Math.max(0, Math.ceil(ms)), undefined)));
  return Promise.race([p, passed]).finally(() => clearTimeout(timer));
}
