/**
 * The stop gate of one process: how its device threads agree, without any communication in a run
 * that is never stopped, on the last step they run.
 *
 * Shared memory (one Int32Array over a SharedArrayBuffer): LIMIT, the last step any device may
 * start (INT32_MAX until a stop is requested); FINAL, 1 once LIMIT is the job's agreed last step;
 * SEQ, bumped on every change (devices wait on it); and one CLAIM word per device thread, the step
 * it has committed to run.
 *
 * A device, before step s: stores CLAIM = s, then reads LIMIT (two atomic operations: the whole
 * cost in an un-stopped run). s ≤ LIMIT: it runs the step. Otherwise it withdraws its claim
 * (CLAIM = s − 1) and waits until LIMIT grows to s (it runs) or is final (it stops).
 *
 * The main thread, on a stop request, freezes the gate: LIMIT = the largest claim, re-read until no
 * claim exceeds it. Atomics are sequentially consistent, so a device that read the old LIMIT has
 * its claim seen by the re-read: no device runs a step beyond a frozen LIMIT. The job's last step
 * is the largest frozen LIMIT over its processes (stopControl.ts gathers them); finalize() sets it.
 * A device waiting at the gate holds no collective of a step other devices are in (it has finished
 * every call of its earlier steps), and the final LIMIT arrives without any device's help, so
 * waiting cannot deadlock; every device then runs exactly the steps 0 … LIMIT.
 *
 * Early stopping uses the same gate to hold the devices after an evaluation until device 0's verdict
 * (evalSchedule.ts): LIMIT starts at the hold, and the main thread either raises it to the next hold
 * (release) or makes it final (the run stops there, as a graceful stop does). A stop request caps its
 * frozen LIMIT at the hold. A run that fails while devices wait at a hold sets ABORT, and they throw.
 */
/** Atomics.waitAsync (Node ≥ 16; not yet in this TypeScript lib) */
const waitAsync = (
  Atomics as unknown as {
    waitAsync(a: Int32Array, i: number, v: number): { async: boolean; value: Promise<string> | string };
  }
).waitAsync;
const LIMIT = 0,
  FINAL = 1,
  SEQ = 2,
  ABORT = 3,
  CLAIMS = 4;
const NONE = 0x7fffffff;

export type StopGateMemory = SharedArrayBuffer;

/** A gate for `devices` device threads; `hold`: the last step they may run before a release (early stopping). */
export function allocateStopGate(devices: number, hold: number | null = null): StopGateMemory {
  const memory = new SharedArrayBuffer((CLAIMS + devices) * 4);
  const words = new Int32Array(memory);
  words[LIMIT] = hold ?? NONE;
  words.fill(-1, CLAIMS);
  return memory;
}

/** A device's side of the gate. */
export class StopGateDevice {
  private readonly words: Int32Array;
  private readonly claim: number;
  /** a device on the main thread lets signal handlers run between its steps */
  private readonly yieldEachStep: boolean;

  constructor(memory: StopGateMemory, local: number, yieldEachStep = false) {
    this.words = new Int32Array(memory);
    this.claim = CLAIMS + local;
    this.yieldEachStep = yieldEachStep;
  }

  /** The trainLoop's mayStart for device `local` of the gate. */
  static check(
    memory: StopGateMemory,
    local: number,
    yieldEachStep = false,
  ): (step: number) => boolean | Promise<boolean> {
    const device = new StopGateDevice(memory, local, yieldEachStep);
    return (step) => device.mayStart(step);
  }

  /** Before step `step`: true to run it, false when the job stops before it. */
  mayStart(step: number): boolean | Promise<boolean> {
    if (this.yieldEachStep) return new Promise<void>((resolve) => setImmediate(resolve)).then(() => this.check(step));
    return this.check(step);
  }

  private check(step: number): boolean | Promise<boolean> {
    Atomics.store(this.words, this.claim, step);
    if (step <= Atomics.load(this.words, LIMIT)) return true;
    Atomics.store(this.words, this.claim, step - 1);
    return this.await(step);
  }

  private async await(step: number): Promise<boolean> {
    // Atomics.waitAsync does not keep the event loop alive: a worker thread with nothing else to do would exit mid-wait
    const keepAlive = setInterval(() => {}, 1 << 30);
    try {
      return await this.waitForLimit(step);
    } finally {
      clearInterval(keepAlive);
    }
  }

  private async waitForLimit(step: number): Promise<boolean> {
    const w = this.words;
    for (;;) {
      const seq = Atomics.load(w, SEQ);
      Atomics.store(w, this.claim, step);
      if (step <= Atomics.load(w, LIMIT)) return true;
      Atomics.store(w, this.claim, step - 1);
      if (Atomics.load(w, FINAL)) return false;
      if (Atomics.load(w, ABORT))
        throw new Error('the run failed while this device waited for the verdict on an evaluation');
      const r = waitAsync(w, SEQ, seq);
      if (r.async) await r.value;
    }
  }
}

/** The main thread's side of the gate. */
export class StopGateControl {
  private readonly words: Int32Array;
  /** the last step allowed until a release (NONE: no hold) */
  private held: number;
  /** the LIMIT a stop request froze (null: none yet) */
  private frozen: number | null = null;

  constructor(memory: StopGateMemory) {
    this.words = new Int32Array(memory);
    this.held = Atomics.load(this.words, LIMIT);
  }

  /** Stops this process's devices from starting any step beyond those already claimed; returns that last step. */
  freeze(): number {
    if (this.frozen !== null) return this.frozen;
    const w = this.words;
    // a claim beyond the hold is withdrawn, never run: the frozen limit stays within it
    let limit = Math.min(this.largestClaim(), this.held);
    for (let round = 0; round < 10_000; round++) {
      Atomics.store(w, LIMIT, limit);
      const claimed = Math.min(this.largestClaim(), this.held);
      if (claimed <= limit) break;
      limit = claimed;
    }
    this.frozen = limit;
    this.changed();
    return limit;
  }

  /** Early stopping's verdict "go on": the devices may run up to `hold` (null: to the end). A frozen or final gate stays. */
  release(hold: number | null): void {
    this.held = hold ?? NONE;
    if (this.frozen !== null || this.lastStep !== null) return;
    Atomics.store(this.words, LIMIT, this.held);
    this.changed();
  }

  /** The job's last step (at least every process's frozen limit): devices run up to it, then stop. */
  finalize(lastStep: number): void {
    Atomics.store(this.words, LIMIT, this.frozen === null ? lastStep : Math.max(lastStep, this.frozen));
    Atomics.store(this.words, FINAL, 1);
    this.changed();
  }

  /** Whether the devices are held for a verdict (early stopping) that has not lifted the last hold yet. */
  get holding(): boolean {
    return this.held !== NONE;
  }

  /** The agreed last step, or null while none is. */
  get lastStep(): number | null {
    return Atomics.load(this.words, FINAL) ? Atomics.load(this.words, LIMIT) : null;
  }

  private largestClaim(): number {
    let m = -1;
    for (let i = CLAIMS; i < this.words.length; i++) m = Math.max(m, Atomics.load(this.words, i));
    return m;
  }

  private changed(): void {
    Atomics.add(this.words, SEQ, 1);
    Atomics.notify(this.words, SEQ);
  }
}

/** The run failed: devices waiting at the gate (for early stopping's verdict) throw instead of waiting forever. */
export function abortStopGate(memory: StopGateMemory): void {
  const words = new Int32Array(memory);
  Atomics.store(words, ABORT, 1);
  Atomics.add(words, SEQ, 1);
  Atomics.notify(words, SEQ);
}
