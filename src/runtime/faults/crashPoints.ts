/**
 * Crash points, for crash-consistency tests: with `PARATRAIN_CRASH_AT=<point>@<n>` the process kills
 * itself with SIGKILL the n-th time (in its thread) it passes `<point>` — a real crash at an exact
 * moment of a checkpoint write, where a timed kill from outside lands there only by luck. Unset (as
 * always outside tests) a crash point is one comparison.
 */
export type CrashPoint =
  /** a safetensors file's bytes are in its temporary file, not yet fsync'd nor renamed */
  | 'checkpoint-tmp'
  /** every file of a set is in its `.partial` directory; state.json is not written yet */
  | 'set-files'
  /** state.json is written; the `.partial` directory is not renamed yet */
  | 'set-state'
  /** the set is complete and renamed; the older sets are not pruned yet */
  | 'set-renamed';

const wanted = /^([a-z-]+)@(\d+)$/.exec(process.env.PARATRAIN_CRASH_AT ?? '');
let passes = 0;

export function crashPoint(point: CrashPoint): void {
  if (wanted === null || wanted[1] !== point) return;
  if (++passes === Number(wanted[2])) process.kill(process.pid, 'SIGKILL');
}
