import { TcpCommunicator } from '../../comm/tcp/index.ts';
import { StopGateControl, abortStopGate, type StopGateMemory } from './stopGate.ts';
import type { ProcessPlacement } from './processWorld.ts';

/**
 * The main thread's part of a graceful stop (see stopGate.ts for the devices' part). In one
 * process, a stop request freezes the gate and makes that the last step. In a job of several
 * processes the main threads form a small control world over TCP (port P + threads + 1, beside the
 * device worlds, so a run that is never stopped exchanges nothing after forming it):
 *   a process whose signal fired sends REQUEST to process 0;
 *   process 0 (on its own signal or the first REQUEST) freezes its gate and sends FREEZE to all;
 *   each process freezes its gate and answers REPORT(its last step);
 *   process 0 takes the largest and sends FINAL(step); every gate is finalized with it.
 * Every device of every process thus runs the same steps 0 … last and stops.
 *
 * Early stopping goes through the same world: process 0's main thread hears device 0's verdict on
 * each evaluation and sends HOLD(next hold) — every gate is released up to it — or FINAL(the held
 * step, 'earlyStopping'), which ends the run there as a stop does.
 */
const TAG = 0x5709;
enum Kind {
  Request = 1,
  Freeze = 2,
  Report = 3,
  Final = 4,
  Hold = 5,
}
/** what a stop may be caused by; the wire carries the index, so new causes go at the end ('abort': the library's AbortSignal aborted for another reason) */
const SIGNALS = ['SIGINT', 'SIGTERM', 'abort', 'earlyStopping', 'SIGUSR1'] as const;
/** HOLD(NO_HOLD): no further hold */
const NO_HOLD = 0x7fffffff;
const CONTROL_RECV_TIMEOUT_MS = 7 * 24 * 3600_000;

export interface StopControlOptions {
  gate: StopGateMemory;
  /** aborted to request the stop; its reason names the signal ('SIGINT', 'SIGTERM', 'SIGUSR1'), any other reason is 'abort' (absent: only early stopping stops) */
  signal?: AbortSignal;
  /** absent: the job is this process */
  placement?: ProcessPlacement;
  /** device threads per process (the control world's port is after theirs) */
  threads: number;
  log?: (message: string) => void;
}

export interface StopDecision {
  lastStep: number;
  signal: string;
}

const signalName = (reason: unknown): string =>
  SIGNALS.includes(reason as (typeof SIGNALS)[number]) ? (reason as string) : 'abort';
const encode = (kind: Kind, value = 0, signal = '') =>
  new Float32Array([
    kind,
    Math.floor(value / 65536),
    value % 65536,
    SIGNALS.indexOf(signal as (typeof SIGNALS)[number]),
  ]);
const decode = (m: Float32Array) => ({
  kind: m[0] as Kind,
  value: m[1]! * 65536 + m[2]!,
  signal: SIGNALS[m[3]!] ?? 'SIGTERM',
});

export class StopControl {
  private readonly gate: StopGateControl;
  private readonly o: StopControlOptions;
  private comm: TcpCommunicator | null = null;
  private forming: Promise<void> | null = null;
  private closing = false;
  private signal: string | null = null;
  private readonly reports = new Map<number, number>();

  constructor(o: StopControlOptions) {
    this.o = o;
    this.gate = new StopGateControl(o.gate);
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
   * Early stopping, process 0: device 0's verdict on an evaluation was "go on"; every process's
   * devices may run up to `hold` (null: to the end of the run).
   */
  release(hold: number | null): void {
    this.gate.release(hold);
    this.toAll(encode(Kind.Hold, hold ?? NO_HOLD));
  }

  /** Early stopping, process 0: the verdict was "stop"; the run ends after `lastStep` (the held step) in every process. */
  stopEarly(lastStep: number): void {
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

  /** Devices held for a verdict that cannot come: they stop with an error rather than wait forever. */
  private abandon(why: string): void {
    this.o.log?.(`note: ${why} while this process's devices waited for early stopping's verdict; stopping them`);
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
    if (!p || p.processes <= 1) return this.stopAlone(sig);
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
        await this.comm!.recv(buf, peer, TAG);
        const m = decode(buf);
        if (m.kind === Kind.Request) this.begin(m.signal);
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
      await this.comm!.send(message, peer, TAG);
    } catch {
      // the peer is gone; its recv loop here (or its devices' worlds) reports that
    }
  }
}

/** What the run reports when stopped before its natural end: steps done and the (1-based) epoch of the last. */
export function stoppedAt(
  decision: StopDecision | null | undefined,
  stepsPerEpoch: number,
  epochs: number,
): { step: number; epoch: number; signal: string } | undefined {
  if (!decision || decision.lastStep + 1 >= stepsPerEpoch * epochs) return undefined;
  const step = decision.lastStep + 1;
  return { step, epoch: Math.max(1, Math.ceil(step / stepsPerEpoch)), signal: decision.signal };
}
