/**
 * What a run that stopped on an error leaves to resume from, read from its run directory when the
 * error is reported: the newest complete checkpoint set, or none. The error then says what is so,
 * never what a run usually leaves. (Whether that set is worth resuming from is the error's to say:
 * a set written while a finite loss blew up holds the blown-up weights.)
 */
import { latestCompleteSet } from './checkpointSet.ts';

/** One clause to append to the error (it begins with '; '). */
export function resumeNote(runDir: string): string {
  const newest = latestCompleteSet(runDir);
  return newest
    ? `; the newest checkpoint set is ${newest.dir} (step ${newest.state.step})`
    : '; no checkpoint set was written before the stop, so there is nothing to resume: after the fix, start the run again';
}
