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
 * applied. Before powerSGD's startStep the step is plain hybrid's, bit for bit.
 */
import type { Communicator } from '../../comm/communicator.ts';
import { counter, restoreTensor, type ReplicaView, type Strategy, type StrategyState } from '../strategy.ts';
import { allFinite, anyBad } from '../nonFinite.ts';
import { OneBitExchange } from './oneBit.ts';
import { PowerSgd } from './powerSgd.ts';
import type { CompressionSpec } from './spec.ts';
import { tensorPlaces } from './tensors.ts';

interface Codec {
  /** what collectives run on: registered at the start, so shared memory reads them in place */
  buffers: Float32Array[];
  reduce(grads: Float32Array, step: number): Promise<void>;
  reset(): void;
  save(): StrategyState;
  restore(state: StrategyState): void;
}

function codecFor(comm: Communicator, replica: ReplicaView, spec: CompressionSpec, seed: number): Codec {
  const n = replica.grads.length,
    places = tensorPlaces(n, replica.tensors);
  if (spec.type === 'oneBit') {
    const x = new OneBitExchange(comm, n, places);
    return {
      buffers: x.collectiveBuffers,
      reduce: (grads) => x.reduce(grads),
      reset: () => x.reset(),
      save: () => ({
        tensors: { 'oneBit.residual': x.residual, 'oneBit.serverResidual': x.serverResidual },
        counters: { worldSize: comm.size },
      }),
      restore(state) {
        restoreTensor(state, 'oneBit.residual', x.residual);
        // this rank's chunk of the mean depends on the device count: after a resize it starts afresh
        if (counter(state, 'worldSize') === comm.size) restoreTensor(state, 'oneBit.serverResidual', x.serverResidual);
        else x.serverResidual.fill(0);
      },
    };
  }
  const p = new PowerSgd(comm, n, places, { ...spec, seed });
  return {
    buffers: p.collectiveBuffers,
    reduce: (grads, step) => p.reduce(grads, step),
    reset: () => p.reset(),
    // q lives on a SharedArrayBuffer (registered with the transport): the set gets a plain copy
    save: () => ({ tensors: { 'powerSGD.error': p.error, 'powerSGD.q': p.q.slice() }, counters: {} }),
    restore(state) {
      restoreTensor(state, 'powerSGD.error', p.error);
      restoreTensor(state, 'powerSGD.q', p.q);
    },
  };
}

/**
 * `plain` is hybrid's own strategy on the same communicator: it starts the run (registering the
 * buffers, rank 0's weights to every replica) and takes the steps before powerSGD's startStep.
 */
export function compressedHybridStrategy(
  comm: Communicator,
  plain: Strategy,
  spec: CompressionSpec,
  seed: number,
): Strategy {
  const startStep = spec.type === 'powerSGD' ? spec.startStep : 0;
  let codec: Codec | null = null;
  /** the step under way (from beforeStep): its buckets go to `plain` before startStep */
  let step = -1;
  const flag = new Float32Array(1);
  const codecOf = (replica: ReplicaView) => (codec ??= codecFor(comm, replica, spec, seed));
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
      await c.reduce(replica.grads, info.step);
      if (!allFinite(replica.grads)) {
        c.reset();
        return { skipped: true };
      }
      await replica.clipGradients?.();
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
