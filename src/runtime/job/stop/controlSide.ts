/**
 * The main thread's side of the graceful stop (protocol.ts): its gate's control (freeze, release,
 * finalize, abort) and the controller that hears the stop request and early stopping's verdicts,
 * alone or with the other processes over the control world.
 */
import { TcpCommunicator } from '../../../comm/tcp/index.ts';
import type { ProcessPlacement } from '../processWorld.ts';
import {
  CONTROL_TAG,
  decode,
  encode,
  FINAL,
  Kind,
  LIMIT,
  NO_HOLD,
  NONE,
  ABORT,
  SEQ,
  CLAIMS,
  signalName,
  type StopGateMemory,
} from './protocol.ts';
import type { HoldSchedule } from './holds.ts';

const CONTROL_RECV_TIMEOUT_MS = 7 * 24 * 3600_000;

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

  /** Whether the devices are held (holds.ts) and the last hold has not been lifted. */
  get holding(): boolean {
    return this.held !== NONE;
  }

  /** The hold the devices wait at, while they may still be released from it (null: none, or a stop froze the gate). */
  get currentHold(): number | null {
    return this.held === NONE || this.frozen !== null || this.lastStep !== null ? null : this.held;
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

export interface StopControlOptions {
  gate: StopGateMemory;
  /** aborted to request the stop; its reason names the signal ('SIGINT', 'SIGTERM', 'SIGUSR1'), any other reason is 'abort' (absent: only early stopping stops) */
  signal?: AbortSignal;
  /** absent: the job is this process */
  placement?: ProcessPlacement;
  /** the run's holds and what each waits for (absent: none) */
  holds?: HoldSchedule;
  /** device threads per process (the control world's port is after theirs) */
  threads: number;
  log?: (message: string) => void;
}

export interface StopDecision {
  lastStep: number;
  signal: string;
}

/**
 * A process's controller of the stop: it turns the signal into a stop (alone, or through process
 * 0 in the control world), relays early stopping's verdicts, and finalizes this process's gate.
 */
export class StopControl {
  private readonly gate: StopGateControl;
  private readonly o: StopControlOptions;
  private comm: TcpCommunicator | null = null;
  private forming: Promise<void> | null = null;
  private closing = false;
  private signal: string | null = null;
  private readonly reports = new Map<number, number>();
  /** each of this process's device threads: the step it waits before (-1: none), and those lost */
  private readonly waiting: number[];
  private readonly lostDevices = new Set<number>();
  /** process 0: the processes whose devices wait past the current hold with its events delivered, those gone */
  private readonly delivered = new Set<number>();
  private readonly gone = new Set<number>();
  /** process 0: early stopping's verdict on the current hold was "go on" */
  private verdictGo = false;

  constructor(o: StopControlOptions) {
    this.o = o;
    this.gate = new StopGateControl(o.gate);
    this.waiting = new Array<number>(o.threads).fill(-1);
    const p = o.placement;
    if (p && p.processes > 1)
      this.forming = this.form(p).catch((err: Error) => {
        if (this.closing) return;
        o.log?.(`note: the stop control world did not form (${err.message}); a signal stops this process alone`);
        this.forming = null;
        if (o.signal?.aborted) this.stopAlone(signalName(o.signal.reason));
        // early stopping's verdicts cannot reach the other processes: this one must not wait for them
        else if (this.gate.holding) this.abandon('the stop control world did not form');
      });
    if (o.signal?.aborted) queueMicrotask(() => this.requested());
    else o.signal?.addEventListener('abort', () => this.requested(), { once: true });
  }

  /**
   * Early stopping, process 0: device 0's verdict on the evaluation `step` steps into the run.
   * "Stop" ends the run at the hold in every process; "go on" releases the hold once its other
   * reason (holds.ts) is met. False: no hold waits for this verdict.
   */
  verdict(step: number, stop: boolean): boolean {
    const hold = this.gate.currentHold;
    if (hold === null || step !== hold + 1) return false;
    if (stop) this.stopEarly(hold);
    else {
      this.verdictGo = true;
      this.mayRelease();
    }
    return true;
  }

  /** A device thread of this process (index `local`) waits before `step`, every event before it delivered (holds.ts). */
  deviceWaits(local: number, step: number): void {
    if (local < 0 || local >= this.waiting.length) return;
    this.waiting[local] = step;
    this.mayReportDelivered();
  }

  /** A device thread of this process died and the run goes on without it: no hold waits for it. */
  deviceLost(local: number): void {
    if (local < 0 || local >= this.waiting.length) return;
    this.lostDevices.add(local);
    this.mayReportDelivered();
  }

  /** Epoch-end holds: once every live device of this process waits past the hold, process 0 hears it. */
  private mayReportDelivered(): void {
    const hold = this.gate.currentHold;
    if (!this.o.holds?.epochEnds || hold === null) return;
    if (this.waiting.some((step, local) => step !== hold + 1 && !this.lostDevices.has(local))) return;
    // once per hold: a later wait is before a later step
    this.waiting.fill(-1);
    const p = this.o.placement;
    if (!p || p.processes <= 1 || p.process === 0) this.processDelivered(0, hold + 1);
    else
      void (this.forming ?? Promise.resolve()).then(() =>
        this.comm ? this.send(0, encode(Kind.Ready, hold + 1)) : undefined,
      );
  }

  /** Process 0: process `q`'s devices wait before `step` with its events delivered. */
  private processDelivered(q: number, step: number): void {
    if (step !== (this.gate.currentHold ?? -2) + 1) return;
    this.delivered.add(q);
    this.mayRelease();
  }

  /** Process 0: releases the current hold once each of its reasons is met, up to the next hold. */
  private mayRelease(): void {
    const hold = this.gate.currentHold;
    const holds = this.o.holds;
    if (hold === null || !holds) return;
    const processes = this.o.placement?.processes ?? 1;
    if (holds.epochEnds) for (let q = 0; q < processes; q++) if (!this.delivered.has(q) && !this.gone.has(q)) return;
    if (holds.needsVerdict(hold) && !this.verdictGo) return;
    this.delivered.clear();
    this.verdictGo = false;
    const next = holds.after(hold);
    this.gate.release(next);
    this.toAll(encode(Kind.Hold, next ?? NO_HOLD));
  }

  /** Early stopping, process 0: the verdict was "stop"; the run ends after `lastStep` (the held step) in every process. */
  private stopEarly(lastStep: number): void {
    if (this.gate.lastStep !== null) return;
    this.signal ??= 'earlyStopping';
    this.gate.finalize(lastStep);
    this.toAll(encode(Kind.Final, lastStep, this.signal));
  }

  private toAll(message: Float32Array): void {
    const p = this.o.placement;
    if (!p || p.processes <= 1) return;
    // sent once the world is formed, in order
    const forming = this.forming ?? Promise.resolve();
    for (let q = 1; q < p.processes; q++) void forming.then(() => (this.comm ? this.send(q, message) : undefined));
  }

  /** Devices held for a release that cannot come: they stop with an error rather than wait forever. */
  private abandon(why: string): void {
    this.o.log?.(`note: ${why} while this process's devices waited at a hold (an epoch's end); stopping them`);
    abortStopGate(this.o.gate);
  }

  /** The agreed stop, once the devices have stopped at it (null: the run was not stopped). */
  get decision(): StopDecision | null {
    const lastStep = this.gate.lastStep;
    return lastStep === null ? null : { lastStep, signal: this.signal ?? signalName(this.o.signal?.reason) };
  }

  /** Leaves the control world (the run is over). */
  async close(): Promise<void> {
    this.closing = true;
    await this.forming;
    await this.comm?.close().catch(() => {});
  }

  private async form(p: ProcessPlacement): Promise<void> {
    this.comm = await TcpCommunicator.connect({
      rank: p.process,
      worldSize: p.processes,
      masterAddr: p.masterAddr,
      masterPort: p.masterPort + this.o.threads + 1,
      configHash: p.configHash,
      timeoutMs: p.timeoutMs,
      recvTimeoutMs: CONTROL_RECV_TIMEOUT_MS,
      log: () => {},
    });
    if (this.closing) return;
    if (p.process === 0) for (let q = 1; q < p.processes; q++) void this.listen(q);
    else void this.listen(0);
    // a signal that came while the world was forming
    if (this.o.signal?.aborted && p.process !== 0)
      void this.send(0, encode(Kind.Request, 0, signalName(this.o.signal.reason)));
  }

  private requested(): void {
    const sig = signalName(this.o.signal?.reason);
    const p = this.o.placement;
    if (!p || p.processes <= 1) {
      this.stopAlone(sig);
      return;
    }
    if (!this.comm) {
      // the control world is still forming (it sends the request once formed) or never formed
      if (!this.forming) this.stopAlone(sig);
      return;
    }
    if (p.process === 0) this.begin(sig);
    else void this.send(0, encode(Kind.Request, 0, sig));
  }

  private stopAlone(sig: string): void {
    this.signal ??= sig;
    this.gate.finalize(this.gate.freeze());
  }

  /** Process 0: the first request starts the agreement. */
  private begin(sig: string): void {
    if (this.signal !== null) return;
    this.signal = sig;
    this.reports.set(0, this.gate.freeze());
    for (let q = 1; q < this.o.placement!.processes; q++) void this.send(q, encode(Kind.Freeze, 0, sig));
    this.maybeFinal();
  }

  private maybeFinal(): void {
    const processes = this.o.placement!.processes;
    if (this.reports.size < processes || this.gate.lastStep !== null) return;
    const last = Math.max(...this.reports.values());
    this.gate.finalize(last);
    for (let q = 1; q < processes; q++) void this.send(q, encode(Kind.Final, last, this.signal!));
  }

  private async listen(peer: number): Promise<void> {
    const buf = new Float32Array(4);
    try {
      for (;;) {
        await this.comm!.recv(buf, peer, CONTROL_TAG);
        const m = decode(buf);
        if (m.kind === Kind.Request) this.begin(m.signal);
        else if (m.kind === Kind.Ready) this.processDelivered(peer, m.value);
        else if (m.kind === Kind.Report) {
          this.reports.set(peer, m.value);
          this.maybeFinal();
        } else if (m.kind === Kind.Freeze) {
          this.signal ??= m.signal;
          await this.send(0, encode(Kind.Report, this.gate.freeze()));
        } else if (m.kind === Kind.Final) {
          this.signal = m.signal;
          this.gate.finalize(m.value);
          return;
        } else if (m.kind === Kind.Hold) this.gate.release(m.value === NO_HOLD ? null : m.value);
      }
    } catch (err) {
      // a peer that finished or failed: the device worlds report failures; a stop in flight here has lost its partner
      if (!this.closing && this.o.placement?.process === 0) {
        // a hold no longer waits for a process that is gone
        this.gone.add(peer);
        this.mayRelease();
      }
      if (!this.closing && this.signal !== null && this.gate.lastStep === null) {
        this.o.log?.(
          `note: process ${peer} left during the stop (${(err as Error).message}); stopping this process alone`,
        );
        this.stopAlone(this.signal);
      } else if (!this.closing && peer === 0 && this.gate.holding && this.gate.lastStep === null) {
        this.abandon(`process 0 left (${(err as Error).message})`);
      }
    }
  }

  private async send(peer: number, message: Float32Array): Promise<void> {
    try {
      await this.comm!.send(message, peer, CONTROL_TAG);
    } catch {
      // the peer is gone; its recv loop here (or its devices' worlds) reports that
    }
  }
}
