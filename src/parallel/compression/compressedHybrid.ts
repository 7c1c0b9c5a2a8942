/**
 * Hybrid with compressed gradients (`train.strategy: { hybrid: { compression: … } }`): the same
 * synchronous step — one mean gradient, the same optimizer step on every replica — but the mean is
 * estimated from what each device sends compressed (oneBit.ts, powerSgd.ts), with error feedback:
 * what a device's compression leaves out is added to its next gradient.
 *
 * Non-finite numbers keep hybrid's rule: a device whose loss, gradient or model-parallel shards'
 * gradient is NaN/Inf says so in a one-float sum before anything is compressed (a NaN cannot ride
 * in a quantised gradient), so every device skips the step alike and the error-feedback state is
 * left as it was; an estimate that overflows is skipped on every device too (it is the same bits
 * everywhere) and the state starts afresh. train.clipGradNorm clips the estimate, the gradient
 * applied. Before the compression's startStep the step is plain hybrid's, bit for bit.
 *
 * oneBit's freezeVariance is 1-bit Adam (Tang et al. 2021): Adam's variance freezes at the first
 * compressed step, so the update is linear in the momentum, and the momentum is what is
 * compressed — smoother than the gradient, so the signs and group means lose less of it. Device d
 * sends, in the gradient's units (the momentum over 1 − β1), with its error feedback e_d:
 *
 *   x_d = g_d + β1/(1 − β1)·m            (= (β1·m + (1 − β1)·g_d) / (1 − β1); m the same on every device)
 *   ĝ  = estimate of the mean of the x_d − β1/(1 − β1)·m
 *
 * so Adam's own step, m ← β1·m + (1 − β1)·ĝ, makes m the compressed mean momentum (to float32
 * rounding), as 1-bit Adam's allreduce of the momenta does.
 */
import type { Communicator } from '../../comm/communicator.ts';
import type { ReplicaView, Strategy } from '../strategy.ts';
import { allFinite, anyBad } from '../nonFinite.ts';
import { codecFor, type Codec } from './codec.ts';
import { compressionStartStep, type CompressionSpec } from './spec.ts';

/**
 * `plain` is hybrid's own strategy on the same communicator: it starts the run (registering the
 * buffers, rank 0's weights to every replica) and takes the steps before the compression's startStep.
 */
export function compressedHybridStrategy(
  comm: Communicator,
  plain: Strategy,
  spec: CompressionSpec,
  seed: number,
): Strategy {
  const startStep = compressionStartStep(spec);
  const freezeVariance = spec.type === 'oneBit' && spec.freezeVariance === true;
  let codec: Codec | null = null;
  /** the step under way (from beforeStep): its buckets go to `plain` before startStep */
  let step = -1;
  const flag = new Float32Array(1);
  const codecOf = (replica: ReplicaView) =>
    (codec ??= codecFor(comm, replica.grads.length, replica.tensors, spec, seed));
  return {
    name: 'hybrid',
    async onStart(replica) {
      await plain.onStart?.(replica);
      // the same lengths on every device, so every device registers (or skips) the same buffers
      for (const b of codecOf(replica).buffers) if (b.length > 0) await comm.register?.(b);
    },
    async beforeStep(_replica, info) {
      step = info.step;
    },
    onGradientsReady(replica, offset) {
      if (step >= 0 && step < startStep) return plain.onGradientsReady?.(replica, offset);
    },
    async applyUpdate(replica, info) {
      if (info.step < startStep) return plain.applyUpdate!(replica, info);
      const localBad = info.lossNonFinite === true || info.shardsNonFinite === true || !allFinite(replica.grads);
      if (await anyBad((v) => comm.allreduce(v, 'sum'), flag, localBad)) return { skipped: true };
      const c = codecOf(replica);
      const momentum = freezeVariance ? momentumOf(replica) : null;
      if (momentum) addMomentum(replica.grads, momentum, 1);
      await c.reduce(replica.grads, info.step);
      if (momentum) addMomentum(replica.grads, momentum, -1);
      if (!allFinite(replica.grads)) {
        c.reset();
        return { skipped: true };
      }
      await replica.clipGradients?.();
      if (freezeVariance) {
        if (!replica.freezeOptimizerVariance)
          throw new Error("compression oneBit's freezeVariance needs a replica whose optimizer it can reach");
        // 1-bit Adam: v as the plain steps left it (idempotent: a resumed run's is already frozen)
        replica.freezeOptimizerVariance();
      }
      replica.localStep(info.lr);
      return undefined;
    },
    agree: (values) => comm.allreduce(values, 'sum'),
    saveState: () => codec?.save() ?? { tensors: {}, counters: {} },
    restoreState(state) {
      codec?.restore(state);
    },
  };
}

/** The replica's Adam momentum, which 1-bit Adam compresses. */
function momentumOf(replica: ReplicaView): { m: Float32Array; beta1: number } {
  if (!replica.optimizerMomentum)
    throw new Error("compression oneBit's freezeVariance needs a replica whose optimizer it can reach");
  return replica.optimizerMomentum();
}

/** grads += sign · β1/(1 − β1) · m over grads' floats (m's first ones: a split model's shards lie after). */
function addMomentum(grads: Float32Array, { m, beta1 }: { m: Float32Array; beta1: number }, sign: 1 | -1): void {
  const k = (sign * beta1) / (1 - beta1);
  for (let i = 0; i < grads.length; i++) grads[i] = grads[i]! + k * m[i]!;
}
