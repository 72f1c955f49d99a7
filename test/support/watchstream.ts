// Reading a watch's stream in a test: JSON lines, until the test has what it waits for or the
// time is up.
import assert from 'node:assert/strict';
import { request, type Dispatcher } from 'undici';

export async function watchLines(url: string, agent: Dispatcher, token: string, accept: string, done: (lines: string[]) => boolean, ms = 20_000): Promise<string[]> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), ms);
  const r = await request(url, { dispatcher: agent, headers: { authorization: `Bearer ${token}`, accept }, signal: controller.signal });
  assert.equal(r.statusCode, 200);
  const lines: string[] = [];
  let pending = '';
  try {
    for await (const chunk of r.body) {
      pending += (chunk as Buffer).toString();
      let nl: number;
      while ((nl = pending.indexOf('\n')) !== -1) {
        lines.push(pending.slice(0, nl));
        pending = pending.slice(nl + 1);
      }
      if (done(lines)) break;
    }
  } catch (e) {
    if (!controller.signal.aborted) throw e;
  } finally {
    clearTimeout(timer);
    controller.abort();
  }
  return lines;
}

/** The status a watch served from the cache ended with, once it has ended. */
export function watchEnded(watch: { whenEnded(listener: (code: number) => void): void }): Promise<number> {
  return new Promise((resolve) => watch.whenEnded(resolve));
}
