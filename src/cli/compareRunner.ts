/**
 * One training run of `paratrain compare`, in a process of its own (so each strategy's peak memory
 * and timings are its own, not inherited from the runs before it). The parent sends
 * `{ config, out, force, faults }`; this process answers with its events, log lines, and the
 * result or the error.
 */
import { train, type TrainResult } from '../runtime/run/train.ts';
import { FaultPlan, type FaultPlanData } from '../runtime/faults/faultPlan.ts';
import type { RunConfig } from '../config/runConfig.ts';
import type { TrainEvent } from '../runtime/events/events.ts';

export interface RunnerRequest {
  config: RunConfig;
  out: string;
  force: boolean;
  faults: FaultPlanData;
  command: string[];
}
export type RunnerMessage =
  | { type: 'event'; event: TrainEvent }
  | { type: 'log'; message: string }
  | { type: 'result'; result: TrainResult }
  | { type: 'error'; message: string; stack?: string };

function send(message: RunnerMessage): Promise<void> {
  return new Promise((resolve) => process.send!(message, undefined, {}, () => resolve()));
}

if (process.send) {
  process.once('message', async (request: RunnerRequest) => {
    try {
      const result = await train(request.config, {
        out: request.out,
        force: request.force,
        faults: FaultPlan.fromData(request.faults),
        command: request.command,
        onEvent: (event) => {
          process.send!({ type: 'event', event } satisfies RunnerMessage);
        },
        log: (message) => {
          process.send!({ type: 'log', message } satisfies RunnerMessage);
        },
      });
      await send({ type: 'result', result });
    } catch (err) {
      const e = err instanceof Error ? err : new Error(String(err));
      await send({ type: 'error', message: e.message, stack: e.stack });
    } finally {
      process.disconnect();
    }
  });
}
