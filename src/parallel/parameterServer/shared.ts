import type { Backend } from '../../kernels/backend.ts';
import { createOptimizer, optimizerStateSize, type FlatRange, type Optimizer } from '../../optim/optimizer.ts';
import type { OptimizerSpec } from '../../optim/spec.ts';
import type { ParameterServer, ParameterServerSnapshot, ParameterServerStart, ParameterServerStats } from './index.ts';
import { jsBackend } from '../../kernels/js/index.ts';
import { allFinite } from '../nonFinite.ts';
import { currentTrainingStep, reportStall } from '../../comm/stallInspector.ts';

/** A lock every thread can take (Atomics-based); waits throw when the job aborts. Returns ms waited. */
export interface SharedLock {
  lock(): number;
  unlock(): void;
}

/**
 * Blocks until `word` of `control` satisfies `ready`, waking on notify; throws when the job aborts.
 * `stall`: called once if the wait passes the stall inspector's threshold. Returns ms waited.
 */
export type WaitUntil = (
  control: Int32Array,
  word: number,
  ready: (value: number) => boolean,
  stall?: (waitedMs: number) => void,
) => number;

/**
 * Slots of the control block: the version, the sync strategy's turn, the count of devices done
 * (finished, or lost: see markDeviceDone), the device count, then one done flag per device, then
 * each device's training step when it last asked for its turn (for stall reports).
 */
const VERSION = 0,
  TURN = 1,
  DONE = 2,
  DEVICES = 3,
  FLAGS = 4;

/** Shared memory of a parameter server, created once by the main thread and handed to every device. */
export interface SharedParameterServerMemory {
  control: SharedArrayBuffer;
  params: SharedArrayBuffer;
  optimizerState: SharedArrayBuffer;
  /** ranges of params the optimizer never updates (frozen layers) */
  frozen: FlatRange[];
}

/** The server's optimizer over its state buffer in shared memory (the same views in every thread). */
function sharedOptimizer(
  memory: SharedParameterServerMemory,
  backend: Backend,
  spec: OptimizerSpec,
  paramCount: number,
): Optimizer {
  let offset = 0;
  const state = new Float32Array(memory.optimizerState);
  return createOptimizer(
    backend,
    spec,
    paramCount,
    (n) => {
      const view = state.subarray(offset, offset + n);
      offset += n;
      return view;
    },
    memory.frozen,
  );
}

/** The server's shared memory, starting from `start` (weights alone: a fresh server). */
export function allocateParameterServer(
  paramCount: number,
  spec: OptimizerSpec,
  start: Float32Array | ParameterServerStart,
  devices: number,
): SharedParameterServerMemory {
  if (start instanceof Float32Array) start = { params: start, version: 0, optimizer: null };
  const initial = start.params;
  const memory = {
    control: new SharedArrayBuffer((FLAGS + 2 * devices) * 4),
    params: new SharedArrayBuffer(paramCount * 4),
    optimizerState: new SharedArrayBuffer(Math.max(optimizerStateSize(spec, paramCount), 1) * 4),
    frozen: start.frozen ?? [],
  };
  new Float32Array(memory.params).set(initial.subarray(0, paramCount));
  new Int32Array(memory.control)[DEVICES] = devices;
  new Int32Array(memory.control)[VERSION] = start.version;
  if (start.optimizer) sharedOptimizer(memory, jsBackend, spec, paramCount).loadState(start.optimizer);
  new Int32Array(memory.control).fill(-1, FLAGS + devices);
  return memory;
}

/**
 * Counts device `rank` as done once: it finished, or (called by the main thread) it died, so the
 * others' finish() does not wait for it.
 */
export function markDeviceDone(memory: SharedParameterServerMemory, rank: number): void {
  const control = new Int32Array(memory.control);
  if (Atomics.compareExchange(control, FLAGS + rank, 0, 1) !== 0) return;
  Atomics.add(control, DONE, 1);
  Atomics.notify(control, DONE);
}

/**
 * The parameter server in shared memory: weights, optimizer state and version live in buffers
 * the main thread allocated; a device applies its own push under the lock, so "the server applies
 * each gradient as it arrives" without a server thread in the data path.
 */
export class SharedParameterServer implements ParameterServer {
  private readonly control: Int32Array;
  private readonly params: Float32Array;
  private readonly optimizer: Optimizer;
  /** time in server calls, of it idle (lock, turn), and bytes moved, since the last takeStats() */
  private stats: ParameterServerStats = { commMs: 0, idleMs: 0, bytes: 0 };

  constructor(
    private readonly memory: SharedParameterServerMemory,
    private readonly rank: number,
    backend: Backend,
    spec: OptimizerSpec,
    private readonly mutex: SharedLock,
    private readonly waitUntil: WaitUntil,
  ) {
    this.control = new Int32Array(memory.control);
    this.params = new Float32Array(memory.params);
    this.optimizer = sharedOptimizer(memory, backend, spec, this.params.length);
  }

  takeStats(): ParameterServerStats {
    const s = this.stats;
    this.stats = { commMs: 0, idleMs: 0, bytes: 0 };
    return s;
  }

  /** Runs `fn` under the lock, accounting time, lock wait and bytes moved. */
  private locked<T>(bytes: number, fn: () => T): T {
    const t0 = performance.now();
    this.stats.idleMs += this.mutex.lock();
    try {
      return fn();
    } finally {
      this.mutex.unlock();
      this.stats.commMs += performance.now() - t0;
      this.stats.bytes += bytes;
    }
  }

  async pull(into: Float32Array): Promise<number> {
    return this.locked(into.byteLength, () => {
      into.set(this.params);
      return Atomics.load(this.control, VERSION);
    });
  }

  async push(
    grads: Float32Array,
    computedAt: number,
    lr: number,
    maxStaleness?: number,
  ): Promise<{ staleness: number; applied: boolean }> {
    return this.locked(grads.byteLength, () => {
      const version = Atomics.load(this.control, VERSION);
      const staleness = version - computedAt;
      if (maxStaleness !== undefined && staleness > maxStaleness) return { staleness, applied: false };
      // devices do not push NaN/Inf; the server never applies one either
      if (!allFinite(grads)) return { staleness, applied: false };
      this.optimizer.stepCount = version;
      this.optimizer.step(this.params, grads, lr);
      Atomics.store(this.control, VERSION, version + 1);
      return { staleness, applied: true };
    });
  }

  async snapshot(): Promise<ParameterServerSnapshot> {
    return this.locked(0, () => ({
      params: this.params.slice(),
      version: Atomics.load(this.control, VERSION),
      optimizer: this.optimizer.state().buffers.map((b) => b.data.slice()),
    }));
  }

  async elasticExchange(x: Float32Array, alpha: number): Promise<void> {
    // reads the centre and writes it back: twice the weights' bytes
    this.locked(2 * x.byteLength, () => {
      // a replica holding NaN/Inf must not poison the centre: no exchange
      if (!allFinite(x)) return;
      const c = this.params;
      for (let i = 0; i < c.length; i++) {
        const d = alpha * (x[i]! - c[i]!);
        c[i] = c[i]! + d;
        x[i] = x[i]! - d;
      }
      Atomics.add(this.control, VERSION, 1);
    });
  }

  async waitTurn(rank: number, size: number): Promise<void> {
    const t0 = performance.now();
    Atomics.store(this.control, FLAGS + Atomics.load(this.control, DEVICES) + rank, currentTrainingStep());
    this.stats.idleMs += this.waitUntil(
      this.control,
      TURN,
      (turn) => turn % size === rank,
      (ms) => this.reportTurnStall(size, ms),
    );
    this.stats.commMs += performance.now() - t0;
  }

  /** The stall inspector: this device waited too long for its turn; the device holding it is named. */
  private reportTurnStall(size: number, waitedMs: number): void {
    const c = this.control,
      holder = Atomics.load(c, TURN) % size,
      steps = FLAGS + Atomics.load(c, DEVICES);
    const others = Array.from({ length: size }, (_, q) => q)
      .filter((q) => q !== this.rank)
      .map((q) => ({
        rank: q,
        step: Atomics.load(c, steps + q),
        call: Atomics.load(c, FLAGS + q)
          ? 'done'
          : q === holder
            ? 'holding the turn (its batch on the server)'
            : 'waiting for its turn',
      }));
    reportStall({
      rank: this.rank,
      waitingIn: 'sync, waiting for its turn on the parameter server',
      seconds: waitedMs / 1000,
      missing: [holder],
      others,
      names: Array.from({ length: size }, (_, q) => `device ${q}`),
    });
  }

  async finish(): Promise<void> {
    const t0 = performance.now();
    markDeviceDone(this.memory, this.rank);
    const devices = Atomics.load(this.control, DEVICES);
    this.stats.idleMs += this.waitUntil(this.control, DONE, (done) => done >= devices);
    this.stats.commMs += performance.now() - t0;
  }

  async passTurn(): Promise<void> {
    Atomics.add(this.control, TURN, 1);
    Atomics.notify(this.control, TURN);
  }
}
