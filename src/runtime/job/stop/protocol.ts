/**
 * The graceful stop: how every device of every process agrees on the last step it runs, without
 * any communication in a run that is never stopped nor held (holds: below). Two sides: each device thread before each of
 * its steps (deviceSide.ts), and each process's main thread (controlSide.ts), which hears a stop
 * request (TrainOptions.signal: SIGINT, SIGTERM, SIGUSR1 in the CLI) and early stopping's verdicts.
 *
 * Within a process they share the gate, one Int32Array over a SharedArrayBuffer:
 *   LIMIT   the last step any device may start (NONE until a stop or a hold)
 *   FINAL   1 once LIMIT is the job's agreed last step
 *   SEQ     bumped on every change (waiting devices wait on it)
 *   ABORT   1 once the run failed while devices waited at a hold
 *   CLAIMS  one word per device thread: the step it has committed to run
 *
 * A device, before step s: stores its CLAIM = s, then reads LIMIT (two atomic operations: the whole
 * cost in an un-stopped run). s ≤ LIMIT: it runs the step. Otherwise it withdraws its claim
 * (CLAIM = s − 1) and waits until LIMIT grows to s (it runs) or is final (it stops).
 *
 * The main thread, on a stop request, freezes the gate: LIMIT = the largest claim, re-read until no
 * claim exceeds it. Atomics are sequentially consistent, so a device that read the old LIMIT has
 * its claim seen by the re-read: no device runs a step beyond a frozen LIMIT. Finalizing sets the
 * job's last step (at least the frozen LIMIT) and FINAL. A device waiting at the gate holds no
 * collective of a step other devices are in (it has finished every call of its earlier steps), and
 * the final LIMIT arrives without any device's help, so waiting cannot deadlock; every device then
 * runs exactly the steps 0 … LIMIT.
 *
 * In one process a stop request freezes the gate and finalizes it at that. In a job of several
 * processes the main threads form a control world over TCP (port P + threads + 1, beside the
 * device worlds, so a run never stopped nor held exchanges nothing after forming it):
 *   REQUEST(signal)      a process whose signal fired, to process 0;
 *   FREEZE(signal)       process 0, on its own signal or the first REQUEST, to every process;
 *   REPORT(step)         each process, having frozen its gate, its frozen LIMIT to process 0;
 *   FINAL(step, signal)  process 0, the largest reported, to every process: every gate finalizes it.
 *
 * Holds (holds.ts) keep the devices at an epoch's last step until the main threads let them go on:
 * LIMIT starts at the first hold, and process 0's main thread releases each with HOLD(the next
 * hold; NO_HOLD: none) to every process once its reasons are met:
 *   - early stopping: device 0's verdict on the evaluation after that epoch (eval/evalSchedule.ts);
 *     a verdict "stop" is FINAL(the held step, 'earlyStopping') instead, which ends the run there
 *     as a stop does;
 *   - epoch ends (a caller that may stop the run from onEpoch): every process's main thread has
 *     delivered the epoch's events. A device thread that starts waiting at the gate tells its main
 *     thread after the events it sent before (so every event of the epoch is delivered once all its
 *     devices wait); a process whose devices all wait sends READY(step) to process 0.
 * A stop request caps its frozen LIMIT at the hold: an abort requested while an epoch's events are
 * handled stops every device before the next epoch's first step, on any number of devices and
 * processes. A run that fails while devices wait at a hold sets ABORT, and they throw.
 */

/** The gate's words: LIMIT, FINAL, SEQ, ABORT, then one claim per device thread from CLAIMS. */
export const LIMIT = 0,
  FINAL = 1,
  SEQ = 2,
  ABORT = 3,
  CLAIMS = 4;
/** LIMIT without a stop or a hold */
export const NONE = 0x7fffffff;

export type StopGateMemory = SharedArrayBuffer;

/** A gate for `devices` device threads; `hold`: the last step they may run before a release (early stopping). */
export function allocateStopGate(devices: number, hold: number | null = null): StopGateMemory {
  const memory = new SharedArrayBuffer((CLAIMS + devices) * 4);
  const words = new Int32Array(memory);
  words[LIMIT] = hold ?? NONE;
  words.fill(-1, CLAIMS);
  return memory;
}

/** The control world's messages (tag CONTROL_TAG): four floats, kind, step (two halves), signal. */
export const CONTROL_TAG = 0x5709;
export enum Kind {
  Request = 1,
  Freeze = 2,
  Report = 3,
  Final = 4,
  Hold = 5,
  Ready = 6,
}
/** What a stop may be caused by; the wire carries the index, so new causes go at the end ('abort': the library's AbortSignal aborted for another reason). */
const SIGNALS = ['SIGINT', 'SIGTERM', 'abort', 'earlyStopping', 'SIGUSR1'] as const;
/** HOLD(NO_HOLD): no further hold */
export const NO_HOLD = 0x7fffffff;

/** The cause an AbortSignal's reason names. */
export const signalName = (reason: unknown): string =>
  SIGNALS.includes(reason as (typeof SIGNALS)[number]) ? (reason as string) : 'abort';

export const encode = (kind: Kind, value = 0, signal = ''): Float32Array =>
  new Float32Array([
    kind,
    Math.floor(value / 65536),
    value % 65536,
    SIGNALS.indexOf(signal as (typeof SIGNALS)[number]),
  ]);

export const decode = (m: Float32Array): { kind: Kind; value: number; signal: string } => ({
  kind: m[0] as Kind,
  value: m[1]! * 65536 + m[2]!,
  signal: SIGNALS[m[3]!] ?? 'SIGTERM',
});
