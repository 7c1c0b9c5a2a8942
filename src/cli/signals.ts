/**
 * SIGINT and SIGTERM during `paratrain train`: the first asks the run to stop gracefully (every
 * device finishes the step in flight, all agree on one step, the checkpoint is written; see
 * runtime/stopGate.ts), the second exits at once. Exit codes follow the shell's 128 + signal:
 * 130 for SIGINT, 143 for SIGTERM.
 */
export const STOP_EXIT_CODES: Record<string, number> = { SIGINT: 130, SIGTERM: 143 };

export interface StopSignals {
  /** aborted (reason: the signal's name) by the first signal or by request() */
  readonly signal: AbortSignal;
  /** asks for the graceful stop as if `name` had arrived (e.g. the launcher died) */
  request(name: 'SIGINT' | 'SIGTERM', why?: string): void;
  dispose(): void;
}

export function installStopSignals(err: NodeJS.WritableStream, quiet: boolean): StopSignals {
  const controller = new AbortController();
  const request = (name: 'SIGINT' | 'SIGTERM', why = `${name} received`) => {
    if (controller.signal.aborted) {
      err.write(`paratrain: second ${name}: exiting at once, without a checkpoint of this step\n`);
      process.exit(STOP_EXIT_CODES[name]);
    }
    if (!quiet) err.write(`\nparatrain: ${why}: finishing the step in flight on every device, then writing a checkpoint (send it again to exit at once)\n`);
    controller.abort(name);
  };
  const onInt = () => request('SIGINT'), onTerm = () => request('SIGTERM');
  process.on('SIGINT', onInt);
  process.on('SIGTERM', onTerm);
  return {
    signal: controller.signal,
    request,
    dispose: () => { process.off('SIGINT', onInt); process.off('SIGTERM', onTerm); },
  };
}
