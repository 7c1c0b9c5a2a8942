import { trainingBatches } from '../../data/batches.ts';
import type { RankBatch } from '../../data/sampler.ts';
import type { Dataset } from '../../data/dataset.ts';
import { modelParallelLayers } from '../../parallel/modelParallel/plan.ts';
import { learningRateAt } from '../../optim/schedule.ts';
import type { Strategy, ReplicaView, StepInfo, StrategyStepStats } from '../../parallel/strategy.ts';
import type { RunConfig } from '../../config/runConfig.ts';
import type { EventSink } from '../events/events.ts';
import { FaultPlan } from '../faults/faultPlan.ts';
import { NonFiniteGuard } from './badSteps.ts';
import { DivergenceGuard } from './divergenceGuard.ts';
import type { ProbeBatch } from './nonFiniteProbe.ts';
import { gradientComputation, type GradientReplica } from './computeGradients.ts';
import { StepPhases, type CommStats } from './stepPhases.ts';
import { StepReporter, wasSkipped, type StepOutcome } from './stepEvents.ts';

/** What the loop trains: a whole-model Replica, or one device's part of a model-parallel model. */
export interface TrainableReplica extends GradientReplica {
  /** the buffers and local optimizer step the strategy acts on */
  view(): ReplicaView;
  /** the gradient norm before clipping of the step just applied (train.clipGradNorm; undefined: not clipped) */
  takeGradNorm?(): number | undefined;
  /** where this device's step first holds a NaN/Inf, run again on its batch (nonFiniteProbe.ts) */
  locateNonFinite?(batch: ProbeBatch): Promise<string | null>;
  /** the gradients of this device's model-parallel shards, which no strategy sees (empty when the model is whole) */
  shardGrads?(): Float32Array;
}

export interface LoopOptions {
  replica: TrainableReplica;
  strategy: Strategy;
  config: RunConfig;
  train: Dataset;
  /** this device's rank among the job's devices, and their number */
  rank: number;
  worldSize: number;
  emit: EventSink;
  /** time in collectives, of it blocked on other devices, and bytes moved since the last call */
  takeCommStats?: () => CommStats;
  /** injected faults: this device's compute slowdown, the step it throws at (none when absent) */
  faults?: FaultPlan;
  /** called after each epoch (evaluation, checkpoints), after the strategy's onFinish for the last; awaited; `stopped`: the run stops here (a graceful stop) */
  onEpochEnd?: (epoch: number, step: number, stopped: boolean) => Promise<void> | void;
  /** before each step: false when the job agreed to stop before it (job/stop/); the run then ends as if the last step were its last */
  mayStart?: (step: number) => boolean | Promise<boolean>;
  /** resuming: the global step to start at (the steps before it are skipped, the data order kept) */
  firstStep?: number;
  /** after the strategy's onStart (whose broadcast made every replica rank 0's): put a resumed device's own state back */
  afterStart?: () => Promise<void> | void;
  /**
   * this device's place in the data-parallel split when it is not its rank among worldSize (a
   * pipeline: the stages of one pipeline see the same samples, the pipelines split the batch)
   */
  dataParallel?: { rank: number; size: number };
  /** after every step, `stepsDone` steps into the run (checkpoint sets); awaited */
  onStepEnd?: (stepsDone: number, stepsPerEpoch: number, totalSteps: number) => Promise<void>;
  /** an agreed stop after `stepsDone` steps, before the strategy's final consolidation (a checkpoint set to resume from); awaited */
  onStop?: (stepsDone: number, stepsPerEpoch: number, totalSteps: number) => Promise<void>;
}

/** Samples one step processes over the job's `devices` devices (a pipeline's stages share their samples: devices / stages replicas). */
export function globalBatchSize(config: RunConfig, devices: number): number {
  const { batchSize, batchSizeScope } = config.data;
  const pipeline = config.train.pipeline;
  const replicas = pipeline ? Math.max(1, Math.floor(devices / pipeline.stages)) : devices;
  return batchSizeScope === 'global' ? batchSize : batchSize * replicas;
}

/** The base learning rate after linear scaling by the job's device count, when asked for. */
export function baseLearningRate(config: RunConfig, devices: number): number {
  return config.optimizer.lr * (config.train.lrScaling === 'linear' ? devices : 1);
}

export function viewOf(replica: TrainableReplica): ReplicaView {
  return replica.view();
}

/**
 * The update of a step: the strategy's own when it has one (it reduces the gradients and applies
 * them, and skips a non-finite step itself), else this device's optimizer step on its own gradient
 * (one device, bsp, easgd, bmuf, diloco), unless the non-finite guard skips the step.
 */
async function update(
  strategy: Strategy,
  guard: NonFiniteGuard,
  view: ReplicaView,
  info: StepInfo,
): Promise<StrategyStepStats | undefined> {
  if (strategy.applyUpdate) return strategy.applyUpdate(view, info);
  if (await guard.skips(view, info)) return { skipped: true };
  // train.clipGradNorm: a device's own gradient (one device, bsp, easgd, bmuf, diloco), finite here
  await view.clipGradients?.();
  view.localStep(info.lr);
  return undefined;
}

/**
 * The training loop one device runs, identical for every strategy: for each of this rank's slices
 * of the global batches, forward and backward, the update (the strategy's, or the optimizer's),
 * the strategy's after-step. Beside the step: its timing and injected faults (StepPhases), the
 * non-finite guard (NonFiniteGuard), the divergence guard (DivergenceGuard), its events (StepReporter).
 */
export async function runTrainLoop(o: LoopOptions): Promise<void> {
  const { replica, strategy, config, rank, worldSize, emit } = o;
  const faults = o.faults ?? FaultPlan.none;
  const data = o.dataParallel ?? { rank, size: worldSize };
  // a model-parallel section exchanges frames: every device's slice then has the global batch's frames
  const sampler = trainingBatches(o.train, {
    batchSize: globalBatchSize(config, worldSize),
    worldSize: data.size,
    rank: data.rank,
    seed: config.train.seed,
    shuffle: config.data.shuffle,
    augment: config.data.augment,
    poolBatches: config.data.dataset === 'speech' ? config.data.poolBatches : undefined,
    padToGlobalBatch: worldSize > 1 && modelParallelLayers(config.model).length > 0,
  });
  const stepsPerEpoch = sampler.stepsPerEpoch();
  const totalSteps = stepsPerEpoch * config.train.epochs;
  const baseLr = baseLearningRate(config, data.size);
  const view = viewOf(replica);
  const shards = replica.shardGrads?.() ?? new Float32Array(0);
  const onGradientsReady = strategy.onGradientsReady
    ? (offset: number) => strategy.onGradientsReady!(view, offset)
    : undefined;
  const computeGradients = gradientComputation({
    replica,
    shards,
    sampler,
    onGradientsReady,
    seed: config.train.seed,
    rank: data.rank,
    worldSize: data.size,
    faults,
  });
  const phases = new StepPhases(o.takeCommStats, faults, rank);
  const guard = new NonFiniteGuard(config.train.maxBadSteps, rank, worldSize, strategy, config.optimizer.lr);
  const divergence = new DivergenceGuard(config.train.divergence);
  const reporter = new StepReporter(emit, rank, stepsPerEpoch);

  /** One step: forward and backward, the update, the strategy's after-step. */
  const trainStep = async (batch: RankBatch, info: StepInfo): Promise<StepOutcome & { probe: ProbeBatch | null }> => {
    phases.begin(info.step);
    await strategy.beforeStep?.(view, info);
    phases.computeBegins(info.step);
    const computed = await computeGradients(batch, info);
    phases.computeEnds();
    const stats = await update(strategy, guard, view, info);
    const gradNorm = replica.takeGradNorm?.();
    await strategy.afterStep?.(view, info);
    return { ...computed, stats, gradNorm, times: phases.end() };
  };

  await strategy.onStart?.(view);
  await o.afterStart?.();
  phases.discardCommStats();
  const firstStep = o.firstStep ?? 0;
  let step = Math.floor(firstStep / stepsPerEpoch) * stepsPerEpoch,
    stopped = false;
  for (let epoch = step / stepsPerEpoch; epoch < config.train.epochs && !stopped; epoch++) {
    reporter.epochStarts();
    guard.epochStarts();
    const epochFirstStep = Math.max(step, firstStep);
    for (const batch of sampler.epoch(epoch)) {
      if (step < firstStep) {
        step++;
        continue;
      }
      if (o.mayStart && !(await o.mayStart(step))) {
        stopped = true;
        break;
      }
      const lr = learningRateAt(step, baseLr, config.schedule, totalSteps);
      const info: StepInfo = { step, epoch, lr, samples: batch.indices.length };
      const done = await trainStep(batch, info);
      guard.record(wasSkipped(done), step);
      reporter.step(info, batch.step, done, guard.total);
      await guard.stopIfDiverged({ step, epoch, lossSum: done.result.lossSum }, async () =>
        done.probe && replica.locateNonFinite ? replica.locateNonFinite(done.probe) : null,
      );
      divergence.stopIfDiverged(done.result.lossSum, done.result.samples, step, {
        rank,
        epoch,
        lr: config.optimizer.lr,
        clipGradNorm: config.train.clipGradNorm,
      });
      step++;
      await o.onStepEnd?.(step, stepsPerEpoch, totalSteps);
    }
    // an epoch the stop left without steps is not reported, and the stop is that of the epoch before
    const ran = step > epochFirstStep;
    if (ran) reporter.epochEnds(epoch, guard.inEpoch);
    // a stop's checkpoint set holds the state before the final consolidation, as a resume needs it
    if (stopped) await o.onStop?.(step, stepsPerEpoch, totalSteps);
    // the final consolidation (last average, last push) comes before the last evaluation
    if (stopped || epoch === config.train.epochs - 1) await strategy.onFinish?.(view);
    await o.onEpochEnd?.(ran || epoch === 0 ? epoch : epoch - 1, step, stopped);
  }
}
