/**
 * metrics.jsonl: one JSON object per line, `{ "type": ..., "time": <unix ms>, ...fields }`.
 *
 * Events are buffered and written with a synchronous append every `flushEvery` events, at once for
 * every event other than 'step' (they are rare and matter: start, epoch, eval, checkpoint, end), when
 * the process exits, and on close. A crash loses at most the last few step events; a run that closes
 * its writer has everything on disk (fsynced).
 *
 * The file holds whole lines only: each append is one write of whole lines, and a write that fails
 * part way (a full disk) is cut back to the last whole line; a torn last line left by a crash is cut
 * (and kept in metrics.jsonl.torn) before a resumed run appends (files/tornTail.ts). A failed write
 * names the file and the fix (files/writeError.ts).
 *
 * Numbers that JSON cannot hold (NaN, ±Infinity: a diverged loss) are written as the strings
 * "NaN", "Infinity", "-Infinity" and read back as numbers.
 */
import { closeSync, fstatSync, fsyncSync, ftruncateSync, openSync, readFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { repairTornTail } from '../files/tornTail.ts';
import { writeError } from '../files/writeError.ts';

export const METRICS_FILE = 'metrics.jsonl';

/** A line of metrics.jsonl. */
export interface MetricEvent {
  type: string;
  /** unix time in milliseconds */
  time: number;
  [field: string]: unknown;
}

export interface MetricsWriterOptions {
  /** write buffered events after this many; default 16 */
  flushEvery?: number;
  /** start a new file instead of appending to an existing one */
  truncate?: boolean;
  /** clock, for tests; default Date.now */
  now?: () => number;
  /** the file's name in the directory; default metrics.jsonl */
  file?: string;
  /** told (one line) when a torn last line is cut before appending */
  log?: (message: string) => void;
}

function replacer(_key: string, value: unknown): unknown {
  if (typeof value === 'number' && !Number.isFinite(value)) return String(value);
  if (typeof value === 'bigint') return value.toString();
  if (ArrayBuffer.isView(value) && !(value instanceof DataView))
    return Array.from(value as unknown as ArrayLike<number>);
  return value;
}

const NON_FINITE: Record<string, number> = {
  NaN: Number.NaN,
  Infinity: Number.POSITIVE_INFINITY,
  '-Infinity': Number.NEGATIVE_INFINITY,
};

function reviver(_key: string, value: unknown): unknown {
  return typeof value === 'string' && Object.hasOwn(NON_FINITE, value) ? NON_FINITE[value] : value;
}

/** Appends events to `<dir>/metrics.jsonl`. */
export class MetricsWriter {
  readonly path: string;
  private fd: number | null;
  private pending: string[] = [];
  private readonly flushEvery: number;
  private readonly now: () => number;
  /** bytes of whole lines in the file: where a failed write is cut back to */
  private size: number;
  private readonly onExit = () => {
    try {
      this.flush();
    } catch (e) {
      // the process is ending: say why the last events are missing rather than throw from an exit handler
      process.stderr.write(`${(e as Error).message}\n`);
    }
  };

  constructor(dir: string, opts: MetricsWriterOptions = {}) {
    this.path = join(dir, opts.file ?? METRICS_FILE);
    this.flushEvery = Math.max(1, opts.flushEvery ?? 16);
    this.now = opts.now ?? Date.now;
    if (!opts.truncate) {
      const torn = repairTornTail(this.path);
      if (torn)
        opts.log?.(
          `${this.path} ended in a torn line (${torn.bytes} bytes of a write cut short); cut back to the last whole line, the bytes kept in ${torn.keptIn}`,
        );
    }
    try {
      this.fd = openSync(this.path, opts.truncate ? 'w' : 'a');
    } catch (e) {
      throw writeError(this.path, e);
    }
    this.size = fstatSync(this.fd).size;
    // an uncaught exception or process.exit() still writes what is buffered
    process.on('exit', this.onExit);
  }

  /** Records one event; `time` is added (unless the event has one). */
  write<E extends { type: string }>(event: E): void {
    if (this.fd === null) throw new Error(`metrics file ${this.path} is closed`);
    const { type, ...fields } = event as { type: string; [k: string]: unknown };
    const line = JSON.stringify({ type, time: this.now(), ...fields }, replacer);
    this.pending.push(line);
    if (type !== 'step' || this.pending.length >= this.flushEvery) this.flush();
  }

  /** Writes buffered events to the file (no fsync): whole lines, or (on a failed write) none of them. */
  flush(): void {
    if (this.fd === null || this.pending.length === 0) return;
    const bytes = Buffer.from(`${this.pending.join('\n')}\n`, 'utf8');
    this.pending = [];
    try {
      // one write; more only when the file system takes part of it (then usually fails on the rest)
      let off = 0;
      while (off < bytes.length) off += writeSync(this.fd, bytes, off, bytes.length - off);
    } catch (e) {
      try {
        ftruncateSync(this.fd, this.size);
      } catch {
        /* not a regular file, or the cut failed too: the next start cuts the torn line */
      }
      throw writeError(this.path, e);
    }
    this.size += bytes.length;
  }

  /** Flushes, fsyncs and closes; later calls do nothing. */
  close(): void {
    if (this.fd === null) return;
    process.off('exit', this.onExit);
    try {
      this.flush();
      fsyncFile(this.fd, this.path);
    } finally {
      closeSync(this.fd);
      this.fd = null;
    }
  }
}

/** fsync, where the file can be: a pipe or a device (EINVAL) has nothing to make durable. */
function fsyncFile(fd: number, path: string): void {
  try {
    fsyncSync(fd);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EINVAL') throw writeError(path, e);
  }
}

/**
 * Reads a metrics.jsonl. Blank lines are skipped; an unterminated last line that is not a whole
 * event (a run killed while writing it, or a disk that filled) is ignored; any other bad line is an
 * error naming its line number.
 */
export function readMetrics(path: string): MetricEvent[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw new Error(`metrics file ${path} not found`);
    throw e;
  }
  const lines = text.split('\n');
  const complete = text.endsWith('\n') || text.length === 0;
  const events: MetricEvent[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (line === '') continue;
    const last = i === lines.length - 1;
    let v: unknown;
    try {
      v = JSON.parse(line, reviver);
    } catch (e) {
      if (last && !complete) break;
      throw new Error(`metrics file ${path}: line ${i + 1} is not valid JSON (${(e as Error).message})`);
    }
    if (v === null || typeof v !== 'object' || Array.isArray(v) || typeof (v as MetricEvent).type !== 'string') {
      throw new Error(`metrics file ${path}: line ${i + 1} is not an event (expected an object with a "type")`);
    }
    events.push(v as MetricEvent);
  }
  return events;
}
