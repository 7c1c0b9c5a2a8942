/**
 * Resuming a run that already trained every epoch it was asked for: nothing to do, which is not a
 * failure (a scheduler's retry loop around `--resume` must end), so it is an error of its own that
 * the command line turns into a note and exit code 0.
 */

/** `train` with `resume` of a run that has trained all its epochs: where it ended, and how to go further. */
export class RunFinishedError extends Error {
  override readonly name = 'RunFinishedError';

  constructor(
    /** the run directory */
    readonly runDir: string,
    /** the global step the run ended at */
    readonly step: number,
    /** the epochs it completed */
    readonly epoch: number,
  ) {
    super(
      `the run in ${runDir} finished at epoch ${epoch} (step ${step}); nothing to resume — pass --epochs ${epoch + 1} (or more) to train further`,
    );
  }
}
