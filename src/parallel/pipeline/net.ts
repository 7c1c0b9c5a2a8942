import type { Communicator } from '../../comm/communicator.ts';
import { subgroup } from '../../comm/subgroup.ts';
import type { Backend } from '../../kernels/backend.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import type { ModelSpec } from '../../nn/spec.ts';
import type { Layer } from '../../nn/layer.ts';
import type { FlatEntry } from '../../nn/flatLayout.ts';
import { outputLengths } from '../../nn/sequence.ts';
import type { PipelineStepInput, StepSums, TrainableModel, WholeModelTarget } from '../../nn/trainableModel.ts';
import { stageOps, type PipelineOp, type PipelineScheduleName } from './schedule.ts';
import type { StageRange } from './partition.ts';
import { PipelineStage, planStages, stageLayout, unsplitLayers } from './stage.ts';
import { copiesNeeded, runStageStep, type OpTiming } from './stageStep.ts';
import { stageTimeline, timelineSampled, type StageTimeline } from './timeline.ts';

/** How a job's devices form pipelines: consecutive ranks are the stages of one pipeline. */
export interface PipelinePlace {
  stages: number;
  /** this device's stage and pipeline */
  stage: number;
  pipeline: number;
  pipelines: number;
}

export function pipelinePlace(rank: number, devices: number, stages: number): PipelinePlace {
  return { stages, stage: rank % stages, pipeline: Math.floor(rank / stages), pipelines: Math.floor(devices / stages) };
}

/** The ranks holding `stage` in every pipeline: the group whose gradients hybrid reduces. */
export function stageRanks(stage: number, devices: number, stages: number): number[] {
  return Array.from({ length: Math.floor(devices / stages) }, (_, q) => q * stages + stage);
}

/** A pipeline stage of `config`'s model on the device `comm.rank`, initialised as the unsplit model would be. */
export function pipelineStage(
  backend: Backend,
  config: {
    model: ModelSpec;
    train: { seed: number; microBatches: number; pipeline?: Omit<PipelineNetOptions, 'microBatches'> };
  },
  comm: Communicator,
  options: { shared?: boolean },
): PipelineNet {
  const { pipeline, microBatches, seed } = config.train;
  if (!pipeline) throw new Error('pipelineStage: the config has no train.pipeline');
  const net = new PipelineNet(backend, config.model, comm, { ...pipeline, microBatches, shared: options.shared });
  net.initialize(seed);
  return net;
}

/** Tags of the pipeline's messages on the world communicator: activations and gradients from here, the gather's below. */
export const PIPELINE_TAG_BASE = 1 << 24;
const GATHER_TAG = PIPELINE_TAG_BASE - 1;
/** The strategy's subgroup tags (its pairs of ranks are never a pipeline's neighbours, but keep them apart anyway). */
const STRATEGY_TAG_BASE = 1 << 25;

/**
 * The communicator a data-parallel strategy reduces over: with a pipeline, the devices of the same
 * stage in every pipeline (their replicas are the same layers); without one, the world.
 */
export function strategyCommunicator(world: Communicator, stages: number | undefined): Communicator {
  if (!stages) return world;
  const { stage } = pipelinePlace(world.rank, world.size, stages);
  return subgroup(world, stageRanks(stage, world.size, stages), STRATEGY_TAG_BASE);
}

export interface PipelineNetOptions {
  stages: number;
  schedule: PipelineScheduleName;
  boundaries?: readonly number[];
  /** the step's micro-batches (train.microBatches) */
  microBatches: number;
  shared?: boolean;
}

/**
 * One device's stage of a pipelined model as the training loop's model: its layers' flat buffers
 * (all of them replicated over the pipelines: hybrid reduces them over the same stage of the
 * other pipelines), and `runStep`, which streams the step's micro-batches through the pipeline
 * (stageStep.ts) over the world communicator. For checkpoints and evaluation, `gatherWhole`
 * assembles the unsplit model on rank 0 from pipeline 0's stages, so a set written pipelined
 * holds the whole model and its optimizer state, by the unsplit model's tensor names.
 */
export class PipelineNet implements TrainableModel {
  readonly place: PipelinePlace;
  readonly stage: PipelineStage;
  readonly ranges: StageRange[];
  readonly params: Float32Array;
  readonly grads: Float32Array;
  readonly state: Float32Array;
  readonly replicatedLength: number;
  readonly paramEntries: FlatEntry[];
  readonly stateEntries: FlatEntry[];
  readonly inputShape: readonly number[];
  readonly outputShape: readonly number[];
  readonly needsAsync = false;
  /** every gradient is final when the step's last backward ends */
  readonly gradientReadyOffsets: readonly number[] = [0];
  /** told pipeline 0's sampled steps' timelines (timeline.ts): the run's metrics, for the report's chart */
  onTimeline?: (timeline: StageTimeline) => void;
  private readonly unsplit: Layer[];
  private readonly opsFor = new Map<number, PipelineOp[]>();
  private peak = 0;

  constructor(
    readonly backend: Backend,
    readonly spec: ModelSpec,
    readonly comm: Communicator,
    readonly options: PipelineNetOptions,
  ) {
    this.place = pipelinePlace(comm.rank, comm.size, options.stages);
    this.unsplit = unsplitLayers(backend, spec);
    this.ranges = planStages(this.unsplit, options);
    const copies = copiesNeeded(this.ops(options.microBatches));
    this.stage = new PipelineStage(backend, spec, this.ranges, this.place.stage, copies, { shared: options.shared });
    ({ params: this.params, grads: this.grads, state: this.state } = this.stage);
    this.replicatedLength = this.params.length;
    this.paramEntries = this.stage.paramEntries;
    this.stateEntries = this.stage.stateEntries;
    this.inputShape = spec.input;
    this.outputShape = this.unsplit[this.unsplit.length - 1]!.outputShape;
  }

  /** This stage's ops for `m` micro-batches (a batch smaller than train.microBatches has fewer). */
  private ops(m: number): PipelineOp[] {
    let ops = this.opsFor.get(m);
    if (!ops) this.opsFor.set(m, (ops = stageOps(this.options.schedule, this.options.stages, m, this.place.stage)));
    return ops;
  }

  initialize(seed: number): void {
    this.stage.initialize(seed);
  }

  zeroGrads(): void {
    this.stage.zeroGrads();
  }

  async runStep(step: PipelineStepInput): Promise<StepSums> {
    if (step.sequence) throw new Error('train.pipeline: sequence batches with per-sample lengths are not supported');
    const sums = await this.stepSums(step);
    // every gradient is final once the step's last backward has ended
    for (const offset of this.gradientReadyOffsets) step.onGradientsReady?.(offset);
    return sums;
  }

  private async stepSums(step: PipelineStepInput): Promise<StepSums> {
    const { stage, stages } = this.place,
      rank = this.comm.rank;
    const last = stage === stages - 1;
    const n = step.x.batch,
      m = Math.min(step.microBatches, Math.max(n, 1));
    // one pipeline's rows show the schedule; the others run the same ops
    const timings: OpTiming[] | undefined =
      this.onTimeline && this.place.pipeline === 0 && timelineSampled(step.ctx.step) ? [] : undefined;
    const r = await runStageStep(
      this.stage,
      this.ops(m),
      {
        samples: n,
        microBatches: m,
        ...(stage === 0 ? { x: step.x } : {}),
        ...(last ? { labels: step.labels, ...(step.targets ? { targets: step.targets } : {}) } : {}),
        ctx: step.ctx,
        gradScale: step.gradScale,
      },
      { comm: this.comm, prev: stage > 0 ? rank - 1 : null, next: last ? null : rank + 1, tagBase: PIPELINE_TAG_BASE },
      last ? step.loss : null,
      timings,
    );
    if (timings) {
      const { schedule } = this.options;
      this.onTimeline!(
        stageTimeline(timings, { step: step.ctx.step, stage, stages, pipeline: 0, schedule, microBatches: m }),
      );
    }
    this.peak = Math.max(this.peak, r.peakActivationBytes);
    const { lossSum, correct, absErrorSum, exactMatches } = r;
    // the last stage reports the pipeline's samples; the others none, so the step counts once
    return last
      ? {
          lossSum,
          correct,
          samples: n,
          ...(absErrorSum !== undefined ? { absErrorSum } : {}),
          ...(exactMatches !== undefined ? { exactMatches } : {}),
        }
      : { lossSum: 0, correct: 0, samples: 0 };
  }

  /** A stage runs whole steps (runStep): its layers are not the model's. */
  forwardAsync(_x: Tensor): Promise<Tensor> {
    return Promise.reject(new Error('a pipeline stage runs whole steps (runStep), not the model on its own'));
  }

  backwardAsync(_dy: Tensor): Promise<void> {
    return Promise.reject(new Error('a pipeline stage runs whole steps (runStep), not the model on its own'));
  }

  outputLengths(lengths: Int32Array): Int32Array {
    return outputLengths(this.unsplit, lengths);
  }

  takePeakActivationBytes(): number {
    const peak = this.peak;
    this.peak = 0;
    return peak;
  }

  /**
   * Collective over pipeline 0 (the other pipelines' replicas are the same): each stage sends
   * `sources` (laid out like its params: the params, optimizer buffers) and its state to rank 0,
   * which places every tensor by name into `into` (the unsplit model's layout).
   */
  async gatherWhole(sources: Float32Array[], into: WholeModelTarget | null): Promise<void> {
    const { stage, stages, pipeline } = this.place;
    if (pipeline !== 0) return;
    if (stage > 0) {
      for (const src of [...sources, this.state]) await this.comm.send(src, 0, GATHER_TAG);
      return;
    }
    if (!into) throw new Error('PipelineNet.gatherWhole: rank 0 needs the whole model to gather into');
    const place = (src: Float32Array, from: readonly FlatEntry[], dst: Float32Array, to: readonly FlatEntry[]) => {
      for (const e of from) {
        const t = to.find((x) => x.name === e.name);
        if (!t) throw new Error(`PipelineNet.gatherWhole: the unsplit model has no tensor '${e.name}'`);
        dst.set(src.subarray(e.offset, e.offset + e.size), t.offset);
      }
    };
    for (const [k, src] of sources.entries()) place(src, this.paramEntries, into.buffers[k]!, into.paramEntries);
    place(this.state, this.stateEntries, into.state, into.stateEntries);
    for (let s = 1; s < stages; s++) {
      const layout = stageLayout(this.unsplit, this.ranges[s]!);
      const params = layout.params.flat(),
        state = layout.state.flat();
      for (const k of sources.keys()) {
        const buf = new Float32Array(Math.max(layout.paramLength, 1));
        await this.comm.recv(buf, s, GATHER_TAG);
        place(buf, params, into.buffers[k]!, into.paramEntries);
      }
      const buf = new Float32Array(Math.max(layout.stateLength, 1));
      await this.comm.recv(buf, s, GATHER_TAG);
      place(buf, state, into.state, into.stateEntries);
    }
  }
}
