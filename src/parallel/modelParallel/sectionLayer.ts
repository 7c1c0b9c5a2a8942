import type { Tensor } from '../../tensor/tensor.ts';
import type { ActivationKind } from '../../kernels/activation.ts';
import type { ForwardContext, Layer, ParamSpec, StateSpec } from '../../nn/layer.ts';

/**
 * A layer of the model-parallel section: it exchanges activations with the other devices in both
 * passes, so it runs only through forwardAsync/backwardAsync (`needsAsync`), on every device in
 * every step. Its input holds the job's whole batch or this device's rows of it; which rows each
 * device holds follows from `ctx.globalBatch` (sectionRows).
 */
export abstract class SectionLayer implements Layer {
  abstract readonly name: string;
  abstract readonly inputShape: readonly number[];
  abstract readonly outputShape: readonly number[];
  readonly needsAsync = true;

  params(): ParamSpec[] {
    return [];
  }
  state(): StateSpec[] {
    return [];
  }
  bind(_params: Float32Array[], _grads: Float32Array[], _state?: Float32Array[]): void {}

  forward(_x: Tensor, _ctx: ForwardContext): Tensor {
    throw new Error(`${this.name}: exchanges activations with the other devices; run it through forwardAsync`);
  }
  backward(_dy: Tensor, _needInputGrad?: boolean): Tensor | null {
    throw new Error(`${this.name}: exchanges gradients with the other devices; run it through backwardAsync`);
  }
  abstract forwardAsync(x: Tensor, ctx: ForwardContext): Promise<Tensor>;
  abstract backwardAsync(dy: Tensor, needInputGrad?: boolean): Promise<Tensor | null>;
  abstract savedForBackward(): readonly ArrayBufferView[];
}

/**
 * The specs of a shard's kernel (and bias): this device's shapes, with the unsplit layer's
 * initialisation and fans (its values are drawn for the unsplit layer, then cut; see ModelParallelNet).
 */
export function shardParamSpecs(
  shapes: number[][],
  activation: ActivationKind,
  fanIn: number,
  fanOut: number,
): ParamSpec[] {
  const init = activation === 'relu' || activation === 'clippedRelu' ? 'heNormal' : 'glorotUniform';
  return shapes.map((shape, k) => ({
    name: k === 0 ? 'kernel' : 'bias',
    shape,
    init: k === 0 ? init : 'zeros',
    fanIn,
    fanOut,
  }));
}
