/**
 * The line `paratrain train` prints when a signal stopped the run: where it stopped and what there
 * is to resume from, as the run directory holds it — the newest complete checkpoint set, or none
 * (a run stopped before its first set has nothing to resume, and a --resume of it would refuse).
 */
import { latestCompleteSet } from '../runtime/checkpoint/checkpointSet.ts';

export function stopLine(stopped: { step: number; epoch: number; signal: string }, runDir: string): string {
  // epochs are 0-based in the result and the events; people count from 1, as the progress lines do
  const head = `paratrain: stopped by ${stopped.signal} at step ${stopped.step} (epoch ${stopped.epoch + 1})`;
  const newest = latestCompleteSet(runDir);
  if (!newest)
    return `${head}; no checkpoint set was written, so there is nothing to resume: start the run again without --resume`;
  return `${head}; the newest checkpoint set is ${newest.dir} (step ${newest.state.step}); resume with: paratrain train --resume ${runDir}`;
}
