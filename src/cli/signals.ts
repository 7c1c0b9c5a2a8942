/**
 * SIGINT, SIGTERM and SIGUSR1 during `paratrain train`: the first asks the run to stop gracefully
 * (every device finishes the step in flight, all agree on one step, the checkpoint is written; see
 * runtime/job/stop/protocol.ts), the second exits at once. Exit codes follow the shell's 128 + signal:
 * 130 for SIGINT, 143 for SIGTERM, 138 for SIGUSR1.
 *
 * SIGUSR1 is there for the launchers that relay it and nothing else at once: Open MPI's mpirun
 * forwards SIGUSR1 to every rank immediately, while a SIGINT/SIGTERM to mpirun reaches the ranks
 * only after `odls_base_sigkill_timeout` seconds, followed by SIGKILL as long again
 * (docs/recovery.md); Slurm sends it with `scancel --signal=USR1` or `sbatch --signal=USR1@SECONDS`.
 * Installing a listener also keeps Node from opening its inspector on SIGUSR1.
 */
export const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGUSR1'] as const;
export type StopSignalName = (typeof STOP_SIGNALS)[number];
export const STOP_EXIT_CODES: Record<string, number> = { SIGINT: 130, SIGTERM: 143, SIGUSR1: 138 };

export interface StopSignals {
  /** aborted (reason: the signal's name) by the first signal or by request() */
  readonly signal: AbortSignal;
  /** asks for the graceful stop as if `name` had arrived (e.g. the launcher died) */
  request(name: StopSignalName, why?: string): void;
  dispose(): void;
}

export function installStopSignals(err: NodeJS.WritableStream, quiet: boolean): StopSignals {
  const controller = new AbortController();
  const request = (name: StopSignalName, why = `${name} received`) => {
    if (controller.signal.aborted) {
      err.write(`paratrain: second ${name}: exiting at once, without a checkpoint of this step\n`);
      process.exit(STOP_EXIT_CODES[name]);
    }
    if (!quiet)
      err.write(
        `\nparatrain: ${why}: finishing the step in flight on every device, then writing a checkpoint (send it again to exit at once)\n`,
      );
    controller.abort(name);
  };
  const handlers = STOP_SIGNALS.map((name) => [name, () => request(name)] as const);
  for (const [name, handler] of handlers) process.on(name, handler);
  return {
    signal: controller.signal,
    request,
    dispose: () => {
      for (const [name, handler] of handlers) process.off(name, handler);
    },
  };
}
