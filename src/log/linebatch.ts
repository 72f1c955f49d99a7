// Log lines gathered into one string per batch before they reach sonic-boom (pino's destination).
// sonic-boom gathers by itself (its minLength), but it appends each line to the string it holds
// and then asks that string's UTF-8 length on the next write (Buffer.byteLength of its last
// buffer), which makes V8 flatten it into a new copy: with 8 KiB gathered, every line copied the
// lines before it. bench/micro/logline.ts, request lines as src/serve/chain.ts writes them: about
// 6 KB of garbage per line that way, a young-generation collection every ~86 lines; in a mass
// restart (bench:massrestart) those lines were a tenth of everything Levee allocated. Joined once
// per batch here, sonic-boom sees one string per 8 KiB, already flat: 4.3 µs of CPU per line
// against 7.1, a third of the collections. Against the commit before, in one run each:
// bench:restartab (eight pairs) Levee's CPU per restart 2.83 → 2.46 s (medians; less in six
// pairs), all synced 3.46 → 3.17 s; bench:ab, CPU per cached GET 350 → 317 µs, per LIST of one
// node's pods 433 → 417, per watch-list 667 → 650.

/** Where a batch goes: sonic-boom, or anything with its write and flushSync. */
export interface LineSink {
  write(data: string): boolean;
  flushSync(): void;
}

export class LineBatch {
  readonly #sink: LineSink;
  readonly #batchChars: number;
  #lines: string[] = [];
  #chars = 0;
  #stopped = false;

  /** `batchChars`: a batch goes out once it holds this many characters (a byte each for ASCII). */
  constructor(sink: LineSink, batchChars: number) {
    this.#sink = sink;
    this.#batchChars = batchChars;
  }

  /** pino's destination interface: one serialized line, newline included. */
  write(line: string): boolean {
    if (this.#stopped) return true;
    this.#lines.push(line);
    this.#chars += line.length;
    if (this.#chars >= this.#batchChars) return this.flush();
    return true;
  }

  /** Hands what is gathered to the sink. */
  flush(): boolean {
    if (this.#lines.length === 0) return true;
    const batch = this.#lines.join('');
    this.#lines = [];
    this.#chars = 0;
    return this.#sink.write(batch);
  }

  /** Everything out before the process ends. */
  flushSync(): void {
    if (this.#stopped) return;
    this.flush();
    this.#sink.flushSync();
  }

  /** Drops what is held and every later line: the sink can take no more. */
  stop(): void {
    this.#stopped = true;
    this.#lines = [];
    this.#chars = 0;
  }
}
