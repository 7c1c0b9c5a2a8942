import { trainingBatches } from '../../data/batches.ts';
import type { SequenceBatch } from '../../data/batcher.ts';
import type { Dataset } from '../../data/dataset.ts';
import { addErrorCounts, type ErrorCounts } from '../../nn/loss.ts';
import { modelParallelLayers } from '../../parallel/modelParallel/plan.ts';
import { learningRateAt } from '../../optim/schedule.ts';
import type { Strategy, ReplicaView, StepInfo } from '../../parallel/strategy.ts';
import type { StepResult } from './replica.ts';
import type { ForwardContext } from '../../nn/layer.ts';
import type { RunConfig } from '../../config/runConfig.ts';
import type { EventSink } from '../events/events.ts';
import { FaultPlan } from '../faults/faultPlan.ts';
import { BadStepGuard } from './badSteps.ts';
import { allFinite } from '../../parallel/nonFinite.ts';
import { noteStep } from '../../comm/stallInspector.ts';
import type { ProbeBatch } from './nonFiniteProbe.ts';

/** What the loop trains: a whole-model Replica, or one device's part of a model-parallel model. */
export interface TrainableReplica {
  /** the buffers and local optimizer step the strategy acts on */
  view(): ReplicaView;
  zeroGrads(): void;
  /** forward and backward of this device's samples (in train.microBatches slices), accumulating gradients */
  computeGradientsAsync(
    images: Float32Array,
    labels: Int32Array,
    ctx: ForwardContext,
    gradScale: number,
    onGradientsReady: ((offset: number) => void) | undefined,
    globalBatchSize: number,
    targets?: Float32Array,
    sequence?: SequenceBatch,
  ): Promise<StepResult>;
  /** true when forward/backward contain collectives, so a device runs the step even without samples */
  readonly stepsWithoutSamples: boolean;
  /** the offsets backward passes to onGradientsReady, in order (announced by a device that skips a step) */
  readonly gradientReadyOffsets: readonly number[];
  /** the most bytes of activations held for backward since the last call */
  takePeakActivationBytes(): number;
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
  rank: number;
  worldSize: number;
  emit: EventSink;
  /** time in collectives, of it blocked on other devices, and bytes moved since the last call */
  takeCommStats?: () => CommStats;
  /** injected faults: this device's compute slowdown, the step it throws at (none when absent) */
  faults?: FaultPlan;
  /** called after each epoch (evaluation, checkpoints), after the strategy's onFinish for the last; awaited; `stopped`: the run stops here (a graceful stop) */
  onEpochEnd?: (epoch: number, step: number, stopped: boolean) => Promise<void> | void;
  /** before each step: false when the job agreed to stop before it (stopGate.ts); the run then ends as if the last step were its last */
  mayStart?: (step: number) => boolean | Promise<boolean>;
  /** resuming: the global step to start at (the steps before it are skipped, the data order kept) */
  firstStep?: number;
  /** after the strategy's onStart (whose broadcast made every replica rank 0's): put a resumed device's own state back */
  afterStart?: () => Promise<void> | void;
  /** after every step, `stepsDone` steps into the run (checkpoint sets); awaited */
  onStepEnd?: (stepsDone: number, stepsPerEpoch: number, totalSteps: number) => Promise<void>;
  /** an agreed stop after `stepsDone` steps, before the strategy's final consolidation (a checkpoint set to resume from); awaited */
  onStop?: (stepsDone: number, stepsPerEpoch: number, totalSteps: number) => Promise<void>;
}

/** Samples one step processes over all devices. */
export function globalBatchSize(config: RunConfig): number {
  const { batchSize, batchSizeScope } = config.data;
  return batchSizeScope === 'global' ? batchSize : batchSize * config.train.devices;
}

/** The base learning rate after linear scaling by the device count, when asked for. */
export function baseLearningRate(config: RunConfig): number {
  return config.optimizer.lr * (config.train.lrScaling === 'linear' ? config.train.devices : 1);
}

export function viewOf(replica: TrainableReplica): ReplicaView {
  return replica.view();
}

export interface CommStats {
  commMs: number;
  idleMs: number;
  bytes: number;
}
const NO_COMM: CommStats = { commMs: 0, idleMs: 0, bytes: 0 };

const sleeper = new Int32Array(new SharedArrayBuffer(4));
/** Blocks the thread for `ms` (a straggler's extra compute time). */
function sleepSync(ms: number): void {
  if (ms > 0) Atomics.wait(sleeper, 0, 0, ms);
}

/**
 * The training loop one device runs, identical for every strategy: gather this rank's slice of the
 * global batch, forward/backward, let the strategy apply the update, let it synchronise.
 */
export async function runTrainLoop(o: LoopOptions): Promise<void> {
  const { replica, strategy, config, rank, worldSize, emit } = o;
  const takeCommStats = o.takeCommStats ?? (() => NO_COMM);
  const faults = o.faults ?? FaultPlan.none;
  const slowdown = faults.slowdownFor(rank);
  // a model-parallel section exchanges frames: every device's slice then has the global batch's frames
  const sampler = trainingBatches(o.train, {
    batchSize: globalBatchSize(config),
    worldSize,
    rank,
    seed: config.train.seed,
    shuffle: config.data.shuffle,
    augment: config.data.augment,
    poolBatches: config.data.dataset === 'speech' ? config.data.poolBatches : undefined,
    padToGlobalBatch: worldSize > 1 && modelParallelLayers(config.model).length > 0,
  });
  const stepsPerEpoch = sampler.stepsPerEpoch();
  const totalSteps = stepsPerEpoch * config.train.epochs;
  const baseLr = baseLearningRate(config);
  const view = viewOf(replica);
  const shards = replica.shardGrads?.() ?? new Float32Array(0);
  const onGradientsReady = strategy.onGradientsReady
    ? (offset: number) => strategy.onGradientsReady!(view, offset)
    : undefined;
  const guard = new BadStepGuard(config.train.maxBadSteps, rank, worldSize, strategy, faults, config.optimizer.lr);
  await strategy.onStart?.(view);
  await o.afterStart?.();
  takeCommStats();
  const firstStep = o.firstStep ?? 0;
  let step = Math.floor(firstStep / stepsPerEpoch) * stepsPerEpoch,
    stopped = false;
  for (let epoch = step / stepsPerEpoch; epoch < config.train.epochs && !stopped; epoch++) {
    const epochStart = performance.now();
    guard.inEpoch = 0;
    const sum: {
      lossSum: number;
      correct: number;
      samples: number;
      computeMs: number;
      syncMs: number;
      idleMs: number;
      bytes: number;
      peakActivationBytes: number;
      errors?: ErrorCounts;
    } = { lossSum: 0, correct: 0, samples: 0, computeMs: 0, syncMs: 0, idleMs: 0, bytes: 0, peakActivationBytes: 0 };
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
      const n = batch.indices.length;
      const lr = learningRateAt(step, baseLr, config.schedule, totalSteps);
      const info: StepInfo = { step, epoch, lr, samples: n };
      let probe: ProbeBatch | null = null;
      noteStep(step);
      const t0 = performance.now();
      await strategy.beforeStep?.(view, info);
      if (faults.failsAt(rank, step)) throw new Error(`injected failure at step ${step}`);
      const t1 = performance.now();
      const before = takeCommStats();
      replica.zeroGrads();
      let r: StepResult = { lossSum: 0, correct: 0, samples: 0 };
      // a device without samples this step still joins the collectives of layers that communicate
      if (n > 0 || replica.stepsWithoutSamples) {
        const { images, labels, targets, sequence } = sampler.gather(batch, epoch);
        // Scale by the GLOBAL batch: the mean over devices of these gradients is the global mean.
        probe = {
          images,
          labels,
          targets,
          sequence,
          ctx: {
            training: true,
            seed: config.train.seed,
            step,
            sampleOffset: batch.globalOffset,
            rank,
            localOffset: 0,
            ...(sequence ? { lengths: sequence.lengths } : {}),
          },
          gradScale: worldSize / batch.globalBatchSize,
          globalBatchSize: batch.globalBatchSize,
          poison: guard.poisonAt(step),
        };
        r = await replica.computeGradientsAsync(
          images,
          labels,
          probe.ctx,
          probe.gradScale,
          onGradientsReady,
          batch.globalBatchSize,
          targets,
          sequence,
        );
        probe.poison?.(view.grads, shards);
      } else if (onGradientsReady) {
        // its zero gradients are final at once; the same announcements keep bucketed reductions in step
        for (const offset of replica.gradientReadyOffsets) onGradientsReady(offset);
      }
      const activationBytes = replica.takePeakActivationBytes();
      info.lossNonFinite = !Number.isFinite(r.lossSum);
      // a split layer's shard gradients are never reduced: the strategy learns of a NaN/Inf in them here
      info.shardsNonFinite = shards.length > 0 && !allFinite(shards);
      if (slowdown > 1) sleepSync((performance.now() - t1) * (slowdown - 1));
      const t2 = performance.now();
      // gradient buckets reduced during backward are communication, not compute
      const during = takeCommStats();
      const stats = await guard.update(view, info);
      const gradNorm = replica.takeGradNorm?.();
      await strategy.afterStep?.(view, info);
      const t3 = performance.now();
      const after = takeCommStats();
      const idleMs = before.idleMs + during.idleMs + after.idleMs,
        bytes = before.bytes + during.bytes + after.bytes;
      const computeMs = t2 - t1 - during.commMs,
        syncMs = t1 - t0 + during.commMs + (t3 - t2);
      const skipped = stats?.skipped === true;
      // a skipped step's non-finite loss stays out of the epoch's loss
      if (!skipped) sum.lossSum += r.lossSum;
      sum.correct += r.correct;
      sum.samples += r.samples;
      if (!skipped) sum.errors = addErrorCounts(sum.errors, r.errors);
      sum.computeMs += computeMs;
      sum.syncMs += syncMs;
      sum.idleMs += idleMs;
      sum.bytes += bytes;
      sum.peakActivationBytes = Math.max(sum.peakActivationBytes, activationBytes);
      emit({
        type: 'step',
        rank,
        epoch,
        step,
        stepInEpoch: batch.step,
        stepsPerEpoch,
        loss: r.samples ? r.lossSum / r.samples : 0,
        accuracy: r.samples ? r.correct / r.samples : 0,
        lr,
        samples: r.samples,
        computeMs,
        syncMs,
        idleMs,
        bytes,
        activationBytes,
        ...(stats ?? {}),
        ...(gradNorm !== undefined ? { gradNorm } : {}),
        ...(skipped || guard.total > 0 ? { badSteps: guard.total + (skipped ? 1 : 0) } : {}),
      });
      await guard.record(skipped, { step, epoch, lossSum: r.lossSum }, async () =>
        probe && replica.locateNonFinite ? replica.locateNonFinite(probe) : null,
      );
      step++;
      await o.onStepEnd?.(step, stepsPerEpoch, totalSteps);
    }
    // an epoch the stop left without steps is not reported, and the stop is that of the epoch before
    const ran = step > epochFirstStep;
    if (ran)
      emit({
        type: 'rankEpoch',
        rank,
        epoch,
        ...sum,
        ...(guard.inEpoch > 0 ? { badSteps: guard.inEpoch } : {}),
        seconds: (performance.now() - epochStart) / 1000,
      });
    // a stop's checkpoint set holds the state before the final consolidation, as a resume needs it
    if (stopped) await o.onStop?.(step, stepsPerEpoch, totalSteps);
    // the final consolidation (last average, last push) comes before the last evaluation
    if (stopped || epoch === config.train.epochs - 1) await strategy.onFinish?.(view);
    await o.onEpochEnd?.(ran || epoch === 0 ? epoch : epoch - 1, step, stopped);
  }
}
