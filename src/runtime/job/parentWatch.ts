/**
 * A child of `paratrain launch` stops when the launcher is gone, however it ended (even SIGKILL,
 * which the launcher cannot forward): the launcher names itself in PARATRAIN_LAUNCHER_PID and the
 * child polls its parent pid; once it changes (the child was re-parented) `onGone` runs once.
 */
export const LAUNCHER_PID_VAR = 'PARATRAIN_LAUNCHER_PID';

export function watchParent(env: NodeJS.ProcessEnv, onGone: () => void, everyMs = 250): () => void {
  const expected = Number(env[LAUNCHER_PID_VAR]);
  if (!Number.isInteger(expected) || expected <= 0) return () => {};
  if (process.ppid !== expected) {
    // started by something else with the variable left over: nothing to watch
    return () => {};
  }
  const timer = setInterval(() => {
    if (process.ppid === expected) return;
    clearInterval(timer);
    onGone();
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
