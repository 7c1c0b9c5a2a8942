import type { Tensor } from '../../tensor/tensor.ts';
import type { ForwardContext, Layer, ParamSpec, StateSpec } from '../../nn/layer.ts';
import { sectionRows } from './activationExchange.ts';

/**
 * An activation, dropout, flatten or pooling inside the model-parallel section: the nn layer on
 * every device's samples. Its input holds the job's whole batch, so sample k of it is sample k of
 * the global batch: the context's sample offset moves back to the batch's start (dropout's
 * batch-wide key). Needs no communication.
 */
export class SectionElementwise implements Layer {
  constructor(
    private readonly layer: Layer,
    private readonly rank: number,
    private readonly devices: number,
  ) {}

  get name(): string {
    return this.layer.name;
  }
  get inputShape(): readonly number[] {
    return this.layer.inputShape;
  }
  get outputShape(): readonly number[] {
    return this.layer.outputShape;
  }
  params(): ParamSpec[] {
    return [];
  }
  state(): StateSpec[] {
    return [];
  }
  bind(): void {}

  forward(x: Tensor, ctx: ForwardContext): Tensor {
    const rows = sectionRows(ctx, this.devices);
    return this.layer.forward(x, { ...ctx, sampleOffset: ctx.sampleOffset - rows.starts[this.rank]! });
  }

  backward(dy: Tensor, _needInputGrad?: boolean): Tensor | null {
    return this.layer.backward(dy, true);
  }

  savedForBackward(): readonly ArrayBufferView[] {
    return this.layer.savedForBackward?.() ?? [];
  }
}
