/**
 * Setting up a world of `size` ranks on the main thread. `createShmWorld` allocates the control
 * block (a SharedArrayBuffer: abort word, barrier, mutexes, call descriptors, mailbox flags) and
 * the arena (a shared WebAssembly.Memory: staging areas, mailbox payloads, `alloc` heap).
 * `world.rankInit(rank)` is a structured-clonable object (SharedArrayBuffer + shared Memory +
 * numbers) for worker `rank`'s workerData; there `await ShmCommunicator.connect(init)`.
 */
import { availableParallelism } from 'node:os';
import { randomUUID } from 'node:crypto';
import type { Worker } from 'node:worker_threads';
import { AbortFlag, type AbortInfo } from './abort.ts';
import { Arena } from './arena.ts';
import { MAIN_THREAD, ShmUsageError, describeParty } from './errors.ts';
import { computeLayout, LAYOUT_VERSION, MAGIC, REASON_BYTES, type Layout, type LayoutParams } from './layout.ts';
import { Mutex } from './mutex.ts';
import type { WaitOptions } from './wait.ts';

export interface ShmWorldOptions {
  /** staging bytes per rank for unregistered buffers (two halves used alternately); default 4 MiB */
  stagingBytes?: number;
  /** send/recv payload bytes per ordered rank pair (larger messages go in chunks); default 256 KiB */
  mailboxBytes?: number;
  /** mutex slots in the control block (`comm.mutex(i)`, `world.mutex(i)`); default 16 */
  mutexes?: number;
  /** heap bytes reserved up front in the arena for `alloc` (it grows on demand anyway); default 0 */
  arenaBytes?: number;
  /** the arena never grows beyond this; default 4 GiB (the wasm32 limit) */
  arenaMaxBytes?: number;
  /** fail any wait that lasts longer than this (ms), naming who had not arrived; default 0 = off */
  timeoutMs?: number;
  /**
   * busy-poll before sleeping in a wait: µs, or 'adaptive' (each rank learns it from its own waits,
   * 50 µs to 1 ms: adaptiveSpin.ts); default 'adaptive' when every rank has a core, else 0
   */
  spinMicros?: number | 'adaptive';
  /** sleep slices between abort checks (ms); default 100 */
  sliceMs?: number;
  /** the stall inspector reports a wait longer than this (ms); default 0 = off */
  stallMs?: number;
}

/** What worker `rank` needs to connect; structured-clonable (post it as workerData). */
export interface ShmInit {
  kind: 'paratrain.shm';
  version: number;
  worldId: string;
  rank: number;
  size: number;
  control: SharedArrayBuffer;
  memory: WebAssembly.Memory;
  params: LayoutParams;
  arenaMaxBytes: number;
  timeoutMs: number;
  spinMicros: number | 'adaptive';
  sliceMs: number;
  stallMs: number;
}

/**
 * PARATRAIN_SHM_SPIN: the waits' spin for worlds whose options do not set one — a number of µs, or
 * 'adaptive' — in place of the default (adaptive when every rank has a core, else none); undefined
 * when unset or empty. For machines the default misjudges, and to compare spins.
 */
export function spinFromEnv(env: NodeJS.ProcessEnv = process.env): number | 'adaptive' | undefined {
  const v = env.PARATRAIN_SHM_SPIN?.trim();
  if (!v) return undefined;
  if (v === 'adaptive') return v;
  const us = Number(v);
  if (!(us >= 0 && Number.isFinite(us))) {
    throw new ShmUsageError(
      `PARATRAIN_SHM_SPIN: expected a number of µs ≥ 0 or 'adaptive', got '${env.PARATRAIN_SHM_SPIN}'; unset it for the default`,
    );
  }
  return us;
}

const PAGE = 65536;
const MAX_ARENA = 65536 * PAGE;

export function createShmWorld(size: number, options: ShmWorldOptions = {}): ShmWorld {
  return new ShmWorld(size, options);
}

export class ShmWorld {
  readonly size: number;
  readonly worldId = randomUUID();
  readonly control: SharedArrayBuffer;
  readonly memory: WebAssembly.Memory;
  readonly layout: Layout;
  readonly abortFlag: AbortFlag;
  private readonly i32: Int32Array;
  private readonly opts: Required<Omit<ShmWorldOptions, 'stagingBytes' | 'mailboxBytes' | 'mutexes' | 'arenaBytes'>>;
  private arena?: Arena;

  constructor(size: number, options: ShmWorldOptions = {}) {
    if (!Number.isInteger(size) || size < 1 || size > 256)
      throw new ShmUsageError(`createShmWorld: size must be an integer in 1..256, got ${size}`);
    const stagingBytes = options.stagingBytes ?? 4 << 20;
    const mailboxBytes = options.mailboxBytes ?? 256 << 10;
    const mutexes = options.mutexes ?? 16;
    const arenaMaxBytes = Math.min(options.arenaMaxBytes ?? MAX_ARENA, MAX_ARENA);
    if (!(stagingBytes >= 2 * 64 * size))
      throw new ShmUsageError(
        `createShmWorld: stagingBytes must be at least ${2 * 64 * size} for ${size} ranks, got ${stagingBytes}`,
      );
    if (!(mailboxBytes >= 64))
      throw new ShmUsageError(`createShmWorld: mailboxBytes must be at least 64, got ${mailboxBytes}`);
    if (!Number.isInteger(mutexes) || mutexes < 0)
      throw new ShmUsageError(`createShmWorld: mutexes must be a non-negative integer, got ${mutexes}`);
    const spin = options.spinMicros;
    if (
      spin !== undefined &&
      spin !== 'adaptive' &&
      !(typeof spin === 'number' && spin >= 0 && Number.isFinite(spin))
    ) {
      throw new ShmUsageError(
        `createShmWorld: spinMicros must be a number of µs ≥ 0 or 'adaptive', got ${String(spin)}`,
      );
    }
    this.size = size;
    this.layout = computeLayout({ size, mutexes, stagingBytes, mailboxBytes });
    const arenaBytes = this.layout.heapBase + (options.arenaBytes ?? 0);
    if (arenaBytes > arenaMaxBytes)
      throw new ShmUsageError(
        `createShmWorld: staging, mailboxes and arenaBytes need ${arenaBytes} bytes, more than arenaMaxBytes ${arenaMaxBytes}`,
      );
    this.control = new SharedArrayBuffer(this.layout.controlBytes);
    this.i32 = new Int32Array(this.control);
    this.i32[this.layout.magic] = MAGIC;
    this.i32[this.layout.sizeWord] = size;
    this.memory = new WebAssembly.Memory({
      initial: Math.ceil(arenaBytes / PAGE),
      maximum: Math.floor(arenaMaxBytes / PAGE),
      shared: true,
    });
    this.abortFlag = new AbortFlag(this.i32, {
      flag: this.layout.abortFlag,
      rank: this.layout.abortRank,
      reasonLen: this.layout.reasonLen,
      reasonByte: this.layout.reasonByte,
      reasonBytes: REASON_BYTES,
    });
    this.opts = {
      arenaMaxBytes,
      timeoutMs: options.timeoutMs ?? 0,
      spinMicros: options.spinMicros ?? spinFromEnv() ?? (size <= availableParallelism() ? 'adaptive' : 0),
      sliceMs: options.sliceMs ?? 100,
      stallMs: options.stallMs ?? 0,
    };
  }

  /** The structured-clonable init object for worker `rank`. */
  rankInit(rank: number): ShmInit {
    if (!Number.isInteger(rank) || rank < 0 || rank >= this.size)
      throw new ShmUsageError(`rankInit: rank must be in 0..${this.size - 1}, got ${rank}`);
    return {
      kind: 'paratrain.shm',
      version: LAYOUT_VERSION,
      worldId: this.worldId,
      rank,
      size: this.size,
      control: this.control,
      memory: this.memory,
      params: {
        size: this.size,
        mutexes: this.layout.mutexes,
        stagingBytes: this.layout.stagingBytes,
        mailboxBytes: this.layout.mailboxBytes,
      },
      ...this.opts,
    };
  }

  /**
   * Abort the job: every rank blocked in (or later entering) a collective, send/recv, barrier or
   * world mutex throws PeerFailedError naming `by` (default: the main thread). First abort wins.
   */
  abort(reason = 'aborted', by: number = MAIN_THREAD): boolean {
    return this.abortFlag.raise(by, reason);
  }

  get aborted(): boolean {
    return this.abortFlag.aborted;
  }

  abortInfo(): AbortInfo | null {
    return this.abortFlag.info();
  }

  /** Wait options for primitives the main thread uses on this world (abort-aware). */
  waitOptions(observer = 'the main thread'): WaitOptions {
    return { abort: this.abortFlag, timeoutMs: this.opts.timeoutMs, sliceMs: this.opts.sliceMs, observer };
  }

  /** Mutex slot `i` of the control block (the same lock as `comm.mutex(i)` on every rank). */
  mutex(i: number): Mutex {
    if (!Number.isInteger(i) || i < 0 || i >= this.layout.mutexes)
      throw new ShmUsageError(
        `mutex: index must be in 0..${this.layout.mutexes - 1} (raise 'mutexes' in createShmWorld options), got ${i}`,
      );
    return new Mutex(this.i32, this.layout.mutexBase + i, this.waitOptions());
  }

  /** Allocates zeroed floats in the shared arena (visible to every rank; see comm.alloc). */
  alloc(length: number): Float32Array {
    this.arena ??= new Arena(this.memory, this.i32, this.layout, this.opts.arenaMaxBytes, this.waitOptions());
    return this.arena.alloc(length);
  }

  /**
   * Abort the world when `worker` (rank `rank`) fails: an uncaught error, or an exit with a
   * non-zero code. Returns a function that stops watching.
   */
  watch(worker: Worker, rank: number): () => void {
    const onError = (err: unknown) => {
      const msg = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
      this.abort(`uncaught ${msg}`, rank);
    };
    const onExit = (code: number) => {
      if (code !== 0) this.abort(`${describeParty(rank)} exited with code ${code}`, rank);
    };
    worker.on('error', onError);
    worker.on('exit', onExit);
    return () => {
      worker.off('error', onError);
      worker.off('exit', onExit);
    };
  }
}
