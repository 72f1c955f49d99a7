// Many watches over few HTTP/2 connections, as a fleet of node agents behind one proxy would open
// them: each watch is a stream, at most `streamsPerSession` of them per connection (the apiserver
// and Levee both advertise 100 concurrent streams). Every event line is scanned for the send
// timestamp the updater embedded in the object, and its delivery is reported with the time the
// chunk that completed the line arrived. Bodies are scanned as bytes, never parsed as JSON, so the
// client spends as little as possible of the CPU it shares with the servers it measures.
import { connect, constants, type ClientHttp2Session, type ClientHttp2Stream } from 'node:http2';
import type { ClientRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { once } from 'node:events';

/** Wall-clock milliseconds with sub-millisecond resolution; the updater stamps objects with this. */
export const wallMs = (): number => performance.timeOrigin + performance.now();

export const SENT_ANNOTATION = 'levee.bench/sent';
export const SEQ_ANNOTATION = 'levee.bench/seq';

// The annotation as it appears in an object's JSON. In managedFields the same key is written
// `"f:levee.bench/sent":{}`, which these do not match.
const SENT = Buffer.from(`"${SENT_ANNOTATION}":"`);
const SEQ = Buffer.from(`"${SEQ_ANNOTATION}":"`);
const BOOKMARK = Buffer.from('"type":"BOOKMARK"');
const QUOTE = 0x22;
const NEWLINE = 0x0a;

export interface FanoutOptions {
  origin: string;
  ca: Buffer;
  token: string;
  /** One request path per watch. */
  paths: string[];
  streamsPerSession: number;
  /** Called for every event that carries the updater's annotations. */
  onEvent: (seq: number, sentMs: number, receivedMs: number, watcher: number) => void;
  /** How long every watch may take to get its response headers. */
  timeoutMs?: number;
  /**
   * Each watch on an HTTP/1.1 connection of its own, as Levee's reflector watches its upstream,
   * instead of streams over HTTP/2 sessions (streamsPerSession is then ignored).
   */
  http1?: boolean;
}

export interface FanoutCounters {
  /** Response bytes received on all watches. */
  bytes: number;
  bookmarks: number;
  /** Event lines without the updater's annotations (other users' changes, replays). */
  otherEvents: number;
  /** Watches that ended while they should have stayed open, and the first few reasons. */
  unexpectedEnds: number;
  endReasons: string[];
}

export class WatchFanout {
  readonly counters: FanoutCounters = { bytes: 0, bookmarks: 0, otherEvents: 0, unexpectedEnds: 0, endReasons: [] };
  /** From the first request to the last response head, in ms. */
  establishMs = 0;
  readonly #o: FanoutOptions;
  readonly #sessions: ClientHttp2Session[] = [];
  readonly #streams: ClientHttp2Stream[] = [];
  readonly #requests: ClientRequest[] = [];
  #closing = false;

  private constructor(o: FanoutOptions) {
    this.#o = o;
  }

  get sessions(): number {
    return this.#sessions.length;
  }

  /** Opens every watch; resolves once each has answered 200, rejects (after closing all) otherwise. */
  static async open(o: FanoutOptions): Promise<WatchFanout> {
    const f = new WatchFanout(o);
    try {
      await f.#open();
    } catch (err) {
      await f.close();
      throw err;
    }
    return f;
  }

  async #open(): Promise<void> {
    const o = this.#o;
    const started = performance.now();
    const sessions = o.http1 ? 0 : Math.ceil(o.paths.length / o.streamsPerSession);
    for (let s = 0; s < sessions; s++) {
      const session = connect(o.origin, {
        ca: o.ca,
        // A large window per stream and per connection: a burst of events for one watch must not
        // wait for WINDOW_UPDATE round trips, which would show up as delivery latency.
        settings: { enablePush: false, initialWindowSize: 4 << 20 },
      });
      session.on('error', (err: Error) => this.#ended(`session: ${err.message}`));
      session.once('connect', () => session.setLocalWindowSize(64 << 20));
      this.#sessions.push(session);
    }
    // Every connection is up before any watch is asked for. Asked for at once, the watches were
    // queued on connections still connecting, and each connection wrote its 100 the moment it was
    // up, in the same turn as its SETTINGS frame: the turns of 100 connections added up to more
    // than the 2 s the apiserver (Go's HTTP/2 server) waits for a client's first SETTINGS, and it
    // closed 68 of the 100 connections (2026-12-02, bench:watch --full).
    const heads = Promise.all(this.#sessions.map(connected)).then(() =>
      Promise.all(o.paths.map((path, i) => (o.http1 ? this.#watchHttp1(path, i) : this.#watch(this.#sessions[Math.floor(i / o.streamsPerSession)]!, path, i)))),
    );
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`watches not all established after ${(o.timeoutMs ?? 120_000) / 1000} s`)), o.timeoutMs ?? 120_000);
    });
    try {
      await Promise.race([heads, timeout]);
    } finally {
      clearTimeout(timer);
    }
    this.establishMs = performance.now() - started;
  }

  /** One watch; resolves on a 200 head, rejects with the server's answer otherwise. */
  #watch(session: ClientHttp2Session, path: string, watcher: number): Promise<void> {
    const stream = session.request({
      ':method': 'GET',
      ':path': path,
      authorization: `Bearer ${this.#o.token}`,
      accept: 'application/json',
    });
    this.#streams.push(stream);
    let pending: Buffer | null = null;
    let ok = false;
    return new Promise<void>((resolve, reject) => {
      stream.on('response', (headers) => {
        const status = Number(headers[':status']);
        if (status === 200) {
          ok = true;
          resolve();
          return;
        }
        let body = '';
        stream.setEncoding('utf8');
        stream.on('data', (c: string) => (body += c));
        stream.on('end', () => reject(new Error(`watch ${path}: HTTP ${status}: ${body.slice(0, 300)}`)));
      });
      stream.on('data', (chunk: Buffer) => {
        if (ok) pending = this.#chunk(pending, chunk, watcher);
      });
      stream.on('error', (err: Error) => {
        if (!ok) reject(err);
      });
      stream.on('close', () => {
        if (!ok) reject(new Error(`watch ${path}: stream closed before its response (code ${stream.rstCode})`));
        else if (!this.#closing) this.#ended(`stream closed by the server (code ${stream.rstCode})`);
      });
    });
  }

  /** One watch on an HTTP/1.1 connection of its own; resolves on a 200 head, rejects otherwise. */
  #watchHttp1(path: string, watcher: number): Promise<void> {
    const url = new URL(path, this.#o.origin);
    return new Promise<void>((resolve, reject) => {
      const req = httpsRequest(url, { ca: this.#o.ca, agent: false, headers: { authorization: `Bearer ${this.#o.token}`, accept: 'application/json' } }, (res) => {
        if (res.statusCode !== 200) {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (body += c));
          res.on('end', () => reject(new Error(`watch ${path}: HTTP ${res.statusCode}: ${body.slice(0, 300)}`)));
          return;
        }
        resolve();
        let pending: Buffer | null = null;
        res.on('data', (chunk: Buffer) => (pending = this.#chunk(pending, chunk, watcher)));
        res.on('close', () => {
          if (!this.#closing) this.#ended('response closed by the server');
        });
      });
      req.on('error', (err) => {
        reject(err);
        if (!this.#closing) this.#ended(`request: ${err.message}`);
      });
      req.end();
      this.#requests.push(req);
    });
  }

  /** A chunk of a watch body after `pending` (a partial line); returns the partial line it leaves. */
  #chunk(pending: Buffer | null, chunk: Buffer, watcher: number): Buffer | null {
    const receivedMs = wallMs();
    this.counters.bytes += chunk.length;
    const buf: Buffer = pending === null ? chunk : Buffer.concat([pending, chunk]);
    let start = 0;
    for (let nl = buf.indexOf(NEWLINE); nl >= 0; nl = buf.indexOf(NEWLINE, start)) {
      this.#line(buf.subarray(start, nl), receivedMs, watcher);
      start = nl + 1;
    }
    // Copied, so a long-lived remainder does not pin the whole chunk it came from.
    return start < buf.length ? Buffer.from(buf.subarray(start)) : null;
  }

  #line(line: Buffer, receivedMs: number, watcher: number): void {
    const sent = value(line, SENT);
    if (sent === undefined) {
      if (line.subarray(0, 24).indexOf(BOOKMARK) >= 0) this.counters.bookmarks++;
      else if (line.length > 0) this.counters.otherEvents++;
      return;
    }
    const seq = value(line, SEQ);
    if (seq === undefined) {
      this.counters.otherEvents++;
      return;
    }
    this.#o.onEvent(Number(seq), Number(sent), receivedMs, watcher);
  }

  #ended(reason: string): void {
    if (this.#closing) return;
    this.counters.unexpectedEnds++;
    if (this.counters.endReasons.length < 5) this.counters.endReasons.push(reason);
  }

  /** Cancels every watch and closes the connections. */
  async close(): Promise<void> {
    this.#closing = true;
    for (const r of this.#requests) r.destroy();
    for (const s of this.#streams) if (!s.closed) s.close(constants.NGHTTP2_CANCEL);
    await Promise.all(
      this.#sessions.map(async (session) => {
        if (session.closed || session.destroyed) return;
        const closed = once(session, 'close');
        session.close();
        const timer = setTimeout(() => session.destroy(), 5000);
        await closed.catch(() => undefined);
        clearTimeout(timer);
      }),
    );
  }
}

/** The string value after `key` in a JSON line, when the key is there. */
function value(line: Buffer, key: Buffer): string | undefined {
  const at = line.indexOf(key);
  if (at < 0) return undefined;
  const from = at + key.length;
  const to = line.indexOf(QUOTE, from);
  return to < 0 ? undefined : line.toString('latin1', from, to);
}

/** Resolves once the session is connected (its SETTINGS sent); rejects if it fails first. */
function connected(session: ClientHttp2Session): Promise<void> {
  if (!session.connecting) return Promise.resolve();
  return new Promise<void>((resolve, reject) => {
    session.once('connect', () => resolve());
    session.once('error', reject);
  });
}
