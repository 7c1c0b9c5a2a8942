import { Tensor } from '../../src/tensor/tensor.ts';
import type { Backend } from '../../src/kernels/backend.ts';
import { buildModel } from '../../src/nn/model.ts';
import { createLoss } from '../../src/nn/losses.ts';
import { createOptimizer } from '../../src/optim/optimizer.ts';
import { resolveConfig, type ConfigInput } from '../../src/config/index.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';
import { accumulateMicroBatches } from '../../src/parallel/microbatch.ts';
import { pipelineSchedule, type PipelineScheduleName } from '../../src/parallel/pipeline/schedule.ts';
import { PipelineStage, planStages, unsplitLayers } from '../../src/parallel/pipeline/stage.ts';
import { copiesNeeded, runStageStep, type OpTiming } from '../../src/parallel/pipeline/stageStep.ts';
import { localGroup } from './localGroup.ts';

/**
 * The pipeline against the unsplit model in one thread: the same config, batches and
 * micro-batches, stepped with the config's optimizer; tensors compared by their unsplit names.
 */

export interface Batch {
  samples: number;
  x: Float32Array;
  labels: Int32Array;
}

export interface RunOutcome {
  /** per step, the summed loss */
  losses: number[];
  /** gradients of the first step, and weights and BatchNorm statistics after the last, by tensor name */
  firstGrads: Map<string, Float32Array>;
  finalParams: Map<string, Float32Array>;
  /** per stage (the unsplit run: one), the most activation bytes held in any step */
  peakActivationBytes: number[];
}

export const config = (input: ConfigInput): RunConfig => resolveConfig(input);

const ctxOf = (step: number) => ({ training: true, seed: 5, step, sampleOffset: 100 * step, rank: 0, localOffset: 0 });

/** The unsplit model, micro-batched (parallel/microbatch.ts): the reference. */
export async function unsplitRun(backend: Backend, c: RunConfig, batches: Batch[], m: number): Promise<RunOutcome> {
  const model = buildModel(backend, c.model);
  model.initialize(c.train.seed);
  const loss = createLoss(backend, c.loss),
    opt = createOptimizer(backend, c.optimizer, model.params.length);
  const out: RunOutcome = { losses: [], firstGrads: new Map(), finalParams: new Map(), peakActivationBytes: [0] };
  for (const [step, b] of batches.entries()) {
    const n = b.samples;
    model.zeroGrads();
    const x = new Tensor([n, ...c.model.input], b.x);
    const r = await accumulateMicroBatches(model, loss, x, b.labels, ctxOf(step), 1 / n, m);
    out.losses.push(r.lossSum);
    out.peakActivationBytes[0] = Math.max(out.peakActivationBytes[0]!, model.takePeakActivationBytes());
    if (step === 0)
      for (const e of model.paramEntries) out.firstGrads.set(e.name, model.grads.slice(e.offset, e.offset + e.size));
    opt.step(model.params, model.grads, c.optimizer.lr);
  }
  for (const e of model.paramEntries) out.finalParams.set(e.name, model.params.slice(e.offset, e.offset + e.size));
  for (const e of model.stateEntries) out.finalParams.set(e.name, model.state.slice(e.offset, e.offset + e.size));
  return out;
}

/**
 * The same steps pipelined over `p` stages, every stage an async task of this thread (localGroup).
 * `sendAhead`: the communicators take a send at once (`trySend`, as shm's mailbox does), so a stage
 * sends before a receive the schedule puts first.
 */
export async function pipelinedRun(
  backend: Backend,
  c: RunConfig,
  batches: Batch[],
  m: number,
  p: number,
  schedule: PipelineScheduleName,
  timings?: OpTiming[][],
  sendAhead = false,
): Promise<RunOutcome> {
  const ranges = planStages(unsplitLayers(backend, c.model), { stages: p });
  const plan = pipelineSchedule(schedule, p, m);
  const stages = plan.map((ops, s) => new PipelineStage(backend, c.model, ranges, s, copiesNeeded(ops)));
  for (const st of stages) st.initialize(c.train.seed);
  const opts = stages.map((st) => createOptimizer(backend, c.optimizer, st.params.length));
  const comms = localGroup(p),
    loss = createLoss(backend, c.loss);
  // localGroup's send copies the message before it returns
  if (sendAhead)
    for (const comm of comms)
      comm.trySend = (buf, dest, tag) => {
        void comm.send(buf, dest, tag);
        return true;
      };
  const out: RunOutcome = {
    losses: [],
    firstGrads: new Map(),
    finalParams: new Map(),
    peakActivationBytes: stages.map(() => 0),
  };
  for (const [step, b] of batches.entries()) {
    const n = b.samples;
    for (const st of stages) st.zeroGrads();
    const results = await Promise.all(
      stages.map((st, s) =>
        runStageStep(
          st,
          plan[s]!,
          {
            samples: n,
            microBatches: m,
            ...(s === 0 ? { x: new Tensor([n, ...c.model.input], b.x) } : {}),
            ...(s === p - 1 ? { labels: b.labels } : {}),
            ctx: ctxOf(step),
            gradScale: 1 / n,
          },
          { comm: comms[s]!, prev: s > 0 ? s - 1 : null, next: s < p - 1 ? s + 1 : null, tagBase: 0 },
          s === p - 1 ? loss : null,
          timings?.[s],
        ),
      ),
    );
    out.losses.push(results[p - 1]!.lossSum);
    for (const [s, r] of results.entries())
      out.peakActivationBytes[s] = Math.max(out.peakActivationBytes[s]!, r.peakActivationBytes);
    if (step === 0)
      for (const st of stages)
        for (const e of st.paramEntries) out.firstGrads.set(e.name, st.grads.slice(e.offset, e.offset + e.size));
    for (const [s, st] of stages.entries()) opts[s]!.step(st.params, st.grads, c.optimizer.lr);
  }
  for (const st of stages) {
    for (const e of st.paramEntries) out.finalParams.set(e.name, st.params.slice(e.offset, e.offset + e.size));
    for (const e of st.stateEntries) out.finalParams.set(e.name, st.state.slice(e.offset, e.offset + e.size));
  }
  return out;
}
