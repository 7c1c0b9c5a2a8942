/**
 * The stall inspector (after Horovod's): a collective or parameter-server wait that lasts longer
 * than a threshold (`train.stallWarningSeconds`) is reported once — which ranks have not arrived and
 * where each of the others is (its training step and its current call) — then the wait goes on.
 * Transports call `reportStall`; the runtime names the step each thread is at (`noteStep`) and may
 * route reports into the run's metrics (`setStallSink`). Both are per thread (module state): each
 * device runs in its own worker thread.
 */

/** Where one rank is: its training step (−1: unknown or not training) and its current call. */
export interface RankPosition {
  rank: number;
  step: number;
  call: string;
}

export interface StallReport {
  /** the rank that waited, and in which call */
  rank: number;
  waitingIn: string;
  seconds: number;
  /** ranks the wait is for (they have not arrived, or their frames are missing) */
  missing: number[];
  /** where every other rank is, as far as this rank can tell */
  others: RankPosition[];
  /** what messages call each rank of the world (tcp's rankNames: `process 1`, `the parameter server`); default `rank q` */
  names?: readonly string[];
}

let currentStep = -1;
let sink: ((report: StallReport) => void) | null = null;

/** The training loop says which step this thread is at (read by the transports when they describe a call). */
export function noteStep(step: number): void {
  currentStep = step;
}

export function currentTrainingStep(): number {
  return currentStep;
}

/** Where stall reports of this thread go besides stderr (the run's metrics); null: stderr only. */
export function setStallSink(fn: ((report: StallReport) => void) | null): void {
  sink = fn;
}

function at(p: { step: number; call: string }): string {
  return p.step >= 0 ? `${p.call} at step ${p.step}` : p.call;
}

/** The one-line warning: `paratrain: stall: rank 0 has waited 61 s in allreduce #57 of 11072 floats at step 12 for rank 1 (…); …`. */
export function formatStall(r: StallReport): string {
  const name = (q: number) => r.names?.[q] ?? `rank ${q}`;
  const missing = r.missing.length ? r.missing.map(name).join(', ') : 'no rank it can name';
  const others = r.others.map((p) => `${name(p.rank)}: ${at(p)}`).join('; ');
  return (
    `${name(r.rank)} has waited ${r.seconds < 10 ? r.seconds.toFixed(1) : Math.round(r.seconds)} s in ${at({ step: currentStep, call: r.waitingIn })} for ${missing}` +
    (others ? ` (where the others are — ${others})` : '')
  );
}

/** Logs one stall (stderr line `paratrain: stall: …`) and hands it to the sink (a `stall` metrics event). */
export function reportStall(r: StallReport): void {
  process.stderr.write(`paratrain: stall: ${formatStall(r)}\n`);
  sink?.(r);
}
