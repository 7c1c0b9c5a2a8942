/** The device threads' side of the graceful stop (protocol.ts): the claim before each step, and the wait at the gate. */
import { ABORT, CLAIMS, FINAL, LIMIT, SEQ, type StopGateMemory } from './protocol.ts';

/** Atomics.waitAsync (Node ≥ 16; not yet in this TypeScript lib) */
const waitAsync = (
  Atomics as unknown as {
    waitAsync(a: Int32Array, i: number, v: number): { async: boolean; value: Promise<string> | string };
  }
).waitAsync;

/** A device's side of the gate. */
export class StopGateDevice {
  private readonly words: Int32Array;
  private readonly claim: number;
  /** a device on the main thread lets signal handlers run between its steps */
  private readonly yieldEachStep: boolean;
  /** told once each time the device starts waiting before `step` (a device thread tells its main thread: holds.ts) */
  private readonly onWait?: (step: number) => void;

  constructor(memory: StopGateMemory, local: number, yieldEachStep = false, onWait?: (step: number) => void) {
    this.words = new Int32Array(memory);
    this.claim = CLAIMS + local;
    this.yieldEachStep = yieldEachStep;
    this.onWait = onWait;
  }

  /** The trainLoop's mayStart for device `local` of the gate. */
  static check(
    memory: StopGateMemory,
    local: number,
    yieldEachStep = false,
    onWait?: (step: number) => void,
  ): (step: number) => boolean | Promise<boolean> {
    const device = new StopGateDevice(memory, local, yieldEachStep, onWait);
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
    this.onWait?.(step);
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
        throw new Error("the run failed while this device waited at an epoch's end for the job to go on");
      const r = waitAsync(w, SEQ, seq);
      if (r.async) await r.value;
    }
  }
}
