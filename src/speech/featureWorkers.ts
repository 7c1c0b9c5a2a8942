/**
 * Computing many utterances' features on every core: a small pool of worker threads (featureWorker.ts),
 * each with its own extractor and resampler, fed batches of utterances in manifest order. The values
 * are those of computing on one thread, bit for bit (the same code on the same input), and so is the
 * error: dispatch stops at the first failure and, once the batches in flight are back, the failure
 * with the lowest index is thrown — every utterance before it was computed, so it is the one a
 * serial run would have stopped at.
 */
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { featuresOfFile, type FeatureJob } from './featureJob.ts';
import type { FeatureOptions } from './featureOptions.ts';
import type { FeatureReply, FeatureRequest } from './featureWorker.ts';
import type { FeatureExtractor } from './features.ts';

/**
 * Below this many utterances per thread the automatic choice stays on fewer threads: starting a
 * worker (loading the modules and compiling the WebAssembly) costs about as much as computing a few
 * hundred utterances of a second.
 */
export const UTTERANCES_PER_THREAD = 500;

/**
 * Utterances sent to a worker at a time (about 10 ms of work), two batches in flight per worker so it
 * does not wait for the main thread even on a busy machine; fewer near the end, so the threads
 * finish together.
 */
const BATCH = 32;

/**
 * The threads to compute `count` utterances on: `requested` when given (capped at `count`), else the
 * machine's cores, fewer when there are under UTTERANCES_PER_THREAD utterances per thread.
 */
export function featureThreads(requested: number | undefined, count: number, field = 'threads'): number {
  if (requested !== undefined) {
    if (!Number.isInteger(requested) || requested < 1)
      throw new Error(
        `${field}: must be a whole number of threads ≥ 1 (1 computes on the calling thread), got ${requested}`,
      );
    return Math.max(1, Math.min(requested, count));
  }
  return Math.max(1, Math.min(availableParallelism(), Math.floor(count / UTTERANCES_PER_THREAD)));
}

/**
 * The features of every job, in order, on `threads` threads: 1 computes with `extractor` on this
 * thread, more start workers with extractors of its options. `onProgress` is called with the number
 * done so far as results arrive.
 */
export async function computeFeatures(
  jobs: FeatureJob[],
  extractor: FeatureExtractor,
  threads: number,
  onProgress: (done: number) => void = () => {},
): Promise<Float32Array[]> {
  if (threads <= 1 || jobs.length <= 1) {
    return jobs.map((job, i) => {
      const data = featuresOfFile(job, extractor);
      onProgress(i + 1);
      return data;
    });
  }
  const pool = new FeaturePool(extractor.options, Math.min(threads, jobs.length));
  try {
    return await pool.compute(jobs, onProgress);
  } finally {
    await pool.close();
  }
}

/** Worker threads for one option set, reusable across calls (one call at a time); close() ends them. */
export class FeaturePool {
  private readonly workers: Worker[];
  private busy = false;
  /** why the pool cannot be used any more (a worker ended, or close() was called) */
  private ended?: string;

  constructor(options: FeatureOptions, threads: number) {
    if (!Number.isInteger(threads) || threads < 1) throw new Error(`FeaturePool: threads must be ≥ 1, got ${threads}`);
    this.workers = Array.from({ length: threads }, () => startWorker(options));
    for (const worker of this.workers)
      worker.once('exit', (code) => {
        this.ended ??= `a feature worker thread exited (code ${code})`;
      });
  }

  get threads(): number {
    return this.workers.length;
  }

  /** The features of every job, in order. */
  async compute(jobs: FeatureJob[], onProgress: (done: number) => void = () => {}): Promise<Float32Array[]> {
    if (this.ended) throw new Error(`FeaturePool: the pool is closed: ${this.ended}`);
    if (this.busy) throw new Error('FeaturePool: compute() is already running; await it first');
    this.busy = true;
    try {
      return await runPool(this.workers, jobs, onProgress);
    } finally {
      this.busy = false;
    }
  }

  async close(): Promise<void> {
    this.ended ??= 'close() was called';
    await Promise.all(this.workers.map((w) => w.terminate()));
  }
}

function runPool(workers: Worker[], jobs: FeatureJob[], onProgress: (done: number) => void): Promise<Float32Array[]> {
  return new Promise((resolve, reject) => {
    const results = new Array<Float32Array>(jobs.length);
    const errors = new Map<number, string>();
    let next = 0,
      done = 0,
      inFlight = 0,
      settled = false;
    const listeners = new Map<
      Worker,
      { message: (r: FeatureReply[]) => void; error: (e: Error) => void; exit: (code: number) => void }
    >();
    const settle = (crash?: Error): void => {
      if (settled) return;
      if (!crash && (inFlight > 0 || (errors.size === 0 && next < jobs.length))) return;
      settled = true;
      for (const [worker, l] of listeners) {
        worker.off('message', l.message);
        worker.off('error', l.error);
        worker.off('exit', l.exit);
      }
      if (crash) reject(crash);
      else if (errors.size === 0) resolve(results);
      else reject(new Error(errors.get(Math.min(...errors.keys()))));
    };
    const feed = (worker: Worker): void => {
      if (settled || errors.size > 0 || next >= jobs.length) {
        settle();
        return;
      }
      const request: FeatureRequest = { jobs: [] };
      const size = Math.max(1, Math.min(BATCH, Math.ceil((jobs.length - next) / (2 * workers.length))));
      for (const end = Math.min(next + size, jobs.length); next < end; next++)
        request.jobs.push({ ...jobs[next]!, index: next });
      inFlight++;
      worker.postMessage(request);
    };
    for (const worker of workers) {
      const l = {
        message: (replies: FeatureReply[]): void => {
          inFlight--;
          for (const reply of replies) {
            if ('error' in reply) errors.set(reply.index, reply.error);
            else results[reply.index] = reply.data;
          }
          done += replies.length;
          onProgress(done);
          feed(worker);
        },
        error: (e: Error): void =>
          settle(
            new Error(
              `speech features: a feature worker thread failed (${e.message}); set the loader's threads to 1 to compute on the main thread`,
            ),
          ),
        exit: (code: number): void =>
          settle(new Error(`speech features: a feature worker thread exited (code ${code})`)),
      };
      listeners.set(worker, l);
      worker.on('message', l.message);
      worker.on('error', l.error);
      worker.on('exit', l.exit);
    }
    if (jobs.length === 0) settle();
    // two batches per worker in flight: it starts the next while the reply to the last one travels
    for (let k = 0; k < 2; k++) for (const worker of workers) feed(worker);
  });
}

/**
 * Starts featureWorker.ts beside this module. From TypeScript sources (tests, tsx) the worker
 * registers tsx itself: tsx's --import hooks do not reach worker threads on Node 20 (tsx#354).
 */
function startWorker(options: FeatureOptions): Worker {
  const isTs = import.meta.url.endsWith('.ts');
  const entry = new URL(`./featureWorker.${isTs ? 'ts' : 'js'}`, import.meta.url);
  if (!isTs) return new Worker(entry, { workerData: { options } });
  const code = `import('tsx/esm/api').then((m) => { m.register(); return import(${JSON.stringify(entry.href)}); })`;
  return new Worker(code, { eval: true, workerData: { options } });
}
