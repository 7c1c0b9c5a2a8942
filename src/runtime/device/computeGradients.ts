import type { TrainingBatches } from '../../data/batches.ts';
import type { RankBatch } from '../../data/sampler.ts';
import type { StepInfo } from '../../parallel/strategy.ts';
import { allFinite } from '../../parallel/nonFinite.ts';
import type { FaultPlan } from '../faults/faultPlan.ts';
import type { GradientSource, StepResult } from './gradientSource.ts';
import type { ProbeBatch } from './nonFiniteProbe.ts';
import type { GradientsReady } from '../../nn/trainableModel.ts';
import { poisonAt } from './badSteps.ts';

/** What the step's forward and backward need of a replica (the loop's TrainableReplica). */
export interface GradientReplica extends GradientSource {
  /** true when forward/backward contain collectives, so a device runs the step even without samples */
  readonly stepsWithoutSamples: boolean;
  /** the offsets backward passes to onGradientsReady, in order (announced by a device that skips a step) */
  readonly gradientReadyOffsets: readonly number[];
  /** the most bytes of activations held for backward since the last call */
  takePeakActivationBytes(): number;
}

export interface GradientOptions {
  replica: GradientReplica;
  /** the gradients of this device's model-parallel shards, which no strategy sees (empty when the model is whole) */
  shards: Float32Array;
  sampler: TrainingBatches;
  /** the strategy's hook for gradients final during backward (bucketed reductions; backward awaits a Promise it returns) */
  onGradientsReady: GradientsReady | undefined;
  seed: number;
  rank: number;
  worldSize: number;
  /** the NaN a FaultPlan injects into this device's gradient at a step */
  faults: FaultPlan;
}

/** One step's forward and backward on this device. */
export interface ComputedGradients {
  result: StepResult;
  /** the most bytes of activations held for backward in the step */
  activationBytes: number;
  /** the step's inputs, to run it again for the non-finite guard's diagnosis (null: no samples, nothing computed) */
  probe: ProbeBatch | null;
}

/**
 * Forward and backward of this device's slice of a global batch, as a function of the batch: the
 * gradients accumulate in the replica, scaled by the global batch (the mean over devices of these
 * gradients is the global mean). It marks in the step's info whether the loss or the shards'
 * gradients hold a NaN/Inf, for the update to decide on.
 */
export function gradientComputation(
  o: GradientOptions,
): (batch: RankBatch, info: StepInfo) => Promise<ComputedGradients> {
  const { replica, shards, sampler, onGradientsReady } = o;
  return async (batch, info) => {
    const { step, epoch } = info;
    let result: StepResult = { lossSum: 0, correct: 0, samples: 0 };
    let probe: ProbeBatch | null = null;
    // a device without samples this step still joins the collectives of layers that communicate
    const computes = batch.indices.length > 0 || replica.stepsWithoutSamples;
    const poison = computes ? poisonAt(o.faults, o.rank, step) : undefined;
    // an injected NaN goes into the zeroed gradient, which backward adds to
    replica.zeroGrads(poison);
    if (computes) {
      const { images, labels, targets, sequence } = sampler.gather(batch, epoch);
      probe = {
        images,
        labels,
        targets,
        sequence,
        ctx: {
          training: true,
          seed: o.seed,
          step,
          sampleOffset: batch.globalOffset,
          rank: o.rank,
          localOffset: 0,
          ...(sequence ? { lengths: sequence.lengths } : {}),
        },
        gradScale: o.worldSize / batch.globalBatchSize,
        globalBatchSize: batch.globalBatchSize,
        poison,
      };
      result = await replica.computeGradientsAsync(
        images,
        labels,
        probe.ctx,
        probe.gradScale,
        onGradientsReady,
        batch.globalBatchSize,
        targets,
        sequence,
      );
    } else if (onGradientsReady) {
      // its zero gradients are final at once; the same announcements keep bucketed reductions in step
      for (const offset of replica.gradientReadyOffsets) onGradientsReady(offset);
    }
    const activationBytes = replica.takePeakActivationBytes();
    info.lossNonFinite = !Number.isFinite(result.lossSum);
    // a split layer's shard gradients are never reduced: the strategy learns of a NaN/Inf in them here
    info.shardsNonFinite = shards.length > 0 && !allFinite(shards);
    return { result, activationBytes, probe };
  };
}
