/**
 * One compressor with error feedback over a flat buffer (oneBit.ts, powerSgd.ts) behind one face,
 * for whoever sends its vectors compressed: hybrid's gradients (compressedHybrid.ts), the averaging
 * strategies' model deltas (compressedDeltas.ts). Its state goes in checkpoint sets under the
 * names below; a set without this compression's state (written with another compression, none,
 * another rank) starts the error feedback afresh, which the resume's `train.strategy` line reports.
 */
import type { Communicator } from '../../comm/communicator.ts';
import { counter, restoreTensor, type ParamTensor, type StrategyState } from '../strategy.ts';
import { OneBitExchange } from './oneBit.ts';
import { PowerSgd } from './powerSgd.ts';
import type { CompressionSpec } from './spec.ts';
import { tensorPlaces } from './tensors.ts';

export interface Codec {
  /** what collectives run on: registered at the start, so shared memory reads them in place */
  buffers: Float32Array[];
  /** `values` (this device's) becomes the estimate of the devices' mean, the same bits on every device; `step` seeds powerSGD's fresh Q */
  reduce(values: Float32Array, step: number): Promise<void>;
  /** back to a fresh run's state (no error feedback) */
  reset(): void;
  save(): StrategyState;
  restore(state: StrategyState): void;
}

/** The codec of `spec` for buffers of `length` floats laid out as `tensors`; `seed` is train.seed (powerSGD's Q). */
export function codecFor(
  comm: Communicator,
  length: number,
  tensors: readonly ParamTensor[] | undefined,
  spec: CompressionSpec,
  seed: number,
): Codec {
  const places = tensorPlaces(length, tensors);
  if (spec.type === 'oneBit') {
    const x = new OneBitExchange(comm, length, places);
    return {
      buffers: x.collectiveBuffers,
      reduce: (values) => x.reduce(values),
      reset: () => x.reset(),
      save: () => ({
        tensors: { 'oneBit.residual': x.residual, 'oneBit.serverResidual': x.serverResidual },
        counters: { worldSize: comm.size },
      }),
      restore(state) {
        if (!holds(state, { 'oneBit.residual': x.residual })) return x.reset();
        restoreTensor(state, 'oneBit.residual', x.residual);
        // this rank's chunk of the mean depends on the device count: after a resize it starts afresh
        if (counter(state, 'worldSize') === comm.size && holds(state, { 'oneBit.serverResidual': x.serverResidual }))
          restoreTensor(state, 'oneBit.serverResidual', x.serverResidual);
        else x.serverResidual.fill(0);
      },
    };
  }
  const p = new PowerSgd(comm, length, places, { ...spec, seed });
  return {
    buffers: p.collectiveBuffers,
    reduce: (values, step) => p.reduce(values, step),
    reset: () => p.reset(),
    // q lives on a SharedArrayBuffer (registered with the transport): the set gets a plain copy
    save: () => ({ tensors: { 'powerSGD.error': p.error, 'powerSGD.q': p.q.slice() }, counters: {} }),
    restore(state) {
      if (!holds(state, { 'powerSGD.error': p.error, 'powerSGD.q': p.q })) return p.reset();
      restoreTensor(state, 'powerSGD.error', p.error);
      restoreTensor(state, 'powerSGD.q', p.q);
    },
  };
}

/** Whether `state` holds every one of `wanted` at its length. */
function holds(state: StrategyState, wanted: Record<string, Float32Array>): boolean {
  return Object.entries(wanted).every(([name, t]) => state.tensors[name]?.length === t.length);
}
