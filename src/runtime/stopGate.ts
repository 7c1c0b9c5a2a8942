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
 */
/** Atomics.waitAsync (Node ≥ 16; not yet in this TypeScript lib) */
const waitAsync = (Atomics as unknown as { waitAsync(a: Int32Array, i: number, v: number): { async: boolean; value: Promise<string> | string } }).waitAsync;
const LIMIT = 0, FINAL = 1, SEQ = 2, CLAIMS = 3;
const NONE = 0x7fffffff;

export type StopGateMemory = SharedArrayBuffer;

export function allocateStopGate(devices: number): StopGateMemory {
  const memory = new SharedArrayBuffer((CLAIMS + devices) * 4);
  const words = new Int32Array(memory);
  words[LIMIT] = NONE;
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
  static check(memory: StopGateMemory, local: number, yieldEachStep = false): (step: number) => boolean | Promise<boolean> {
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
    const w = this.words;
    for (;;) {
      const seq = Atomics.load(w, SEQ);
      Atomics.store(w, this.claim, step);
      if (step <= Atomics.load(w, LIMIT)) return true;
      Atomics.store(w, this.claim, step - 1);
      if (Atomics.load(w, FINAL)) return false;
      const r = waitAsync(w, SEQ, seq);
      if (r.async) await r.value;
    }
  }
}

/** The main thread's side of the gate. */
export class StopGateControl {
  private readonly words: Int32Array;

  constructor(memory: StopGateMemory) {
    this.words = new Int32Array(memory);
  }

  /** Stops this process's devices from starting any step beyond those already claimed; returns that last step. */
  freeze(): number {
    const w = this.words;
    if (Atomics.load(w, LIMIT) !== NONE) return Atomics.load(w, LIMIT);
    let limit = this.largestClaim();
    for (let round = 0; round < 10_000; round++) {
      Atomics.store(w, LIMIT, limit);
      const claimed = this.largestClaim();
      if (claimed <= limit) break;
      limit = claimed;
    }
    this.changed();
    return limit;
  }

  /** The job's last step (at least every process's frozen limit): devices run up to it, then stop. */
  finalize(lastStep: number): void {
    const frozen = Atomics.load(this.words, LIMIT);
    Atomics.store(this.words, LIMIT, frozen === NONE ? lastStep : Math.max(lastStep, frozen));
    Atomics.store(this.words, FINAL, 1);
    this.changed();
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
