import type { Communicator } from '../../comm/communicator.ts';
import type { Strategy } from '../strategy.ts';
import { registerAndBroadcast } from '../replicaSync.ts';
import { allFinite, anyBad } from '../nonFinite.ts';
import type { StrategyEntry } from './entry.ts';

/**
 * Hybrid (synchronous data parallelism): every device computes a gradient on its own slice of the
 * global batch, the mean of all is applied by every replica's identical optimizer — exactly one
 * device with the global batch, up to floating-point summation order.
 *
 * Gradients are reduced in buckets of about `bucketBytes`, from the last layers backwards, each
 * as soon as backward has finished it; what remains is reduced after backward.
 *
 * Non-finite numbers travel with the gradients: the bucket that reaches offset 0 is always reduced
 * in applyUpdate, where a device whose loss — or gradient of its shards of `parallel: model`
 * layers, which are never reduced — is NaN/Inf sets grads[0] to NaN first; a NaN or Inf
 * anywhere makes the sum non-finite on every device alike, so one pass over the reduced gradient
 * decides, identically everywhere, to skip the step (no optimizer update). train.clipGradNorm
 * clips the reduced (finite) gradient.
 */
export function hybridStrategy(comm: Communicator, bucketBytes: number): Strategy {
  const bucketFloats = Math.max(1, Math.floor(bucketBytes / 4));
  /** grads[reducedFrom:] are being reduced this step; −1 before the first bucket of a step */
  let reducedFrom = -1;
  let inFlight: Promise<void>[] = [];
  const flag = new Float32Array(1);
  return {
    name: 'hybrid',
    onStart: (replica) => registerAndBroadcast(comm, replica),
    onGradientsReady(replica, offset) {
      if (reducedFrom < 0) reducedFrom = replica.grads.length;
      // the first bucket waits for applyUpdate, which may mark it (see above)
      if (offset === 0) return;
      if (reducedFrom - offset < bucketFloats) return;
      // each rank's gradient is already scaled by worldSize/globalBatch, so the mean is the global mean
      inFlight.push(comm.allreduce(replica.grads.subarray(offset, reducedFrom), 'mean'));
      reducedFrom = offset;
    },
    async applyUpdate(replica, info) {
      const rest = reducedFrom < 0 ? replica.grads.length : reducedFrom;
      const localBad = info.lossNonFinite === true || info.shardsNonFinite === true;
      if (localBad && rest > 0) replica.grads[0] = NaN;
      if (rest > 0) inFlight.push(comm.allreduce(replica.grads.subarray(0, rest), 'mean'));
      await Promise.all(inFlight);
      inFlight = [];
      reducedFrom = -1;
      // a model split entirely (no replicated gradient to carry the flag) agrees on it alone
      const bad =
        replica.grads.length > 0
          ? !allFinite(replica.grads)
          : await anyBad((v) => comm.allreduce(v, 'sum'), flag, localBad);
      if (bad) return { skipped: true };
      // clipping acts on the reduced gradient, so G devices clip exactly as one device would
      await replica.clipGradients?.();
      replica.localStep(info.lr);
    },
    agree: (values) => comm.allreduce(values, 'sum'),
  };
}

export interface HybridSpec {
  type: 'hybrid';
  /** gradients are all-reduced in buckets of about this size as backward produces them */
  bucketBytes: number;
}

export const hybridEntry: StrategyEntry<HybridSpec> = {
  name: 'hybrid',
  schema: (f) =>
    f
      .options({ bucketBytes: f.posInt().default(4 * 1024 * 1024) })
      .transform((o): HybridSpec => ({ type: 'hybrid', bucketBytes: o.bucketBytes })),
  needsParameterServer: () => false,
  lockstep: true,
  modelParallel: true,
  create: (spec, { comm }) => hybridStrategy(comm, spec.bucketBytes),
};
