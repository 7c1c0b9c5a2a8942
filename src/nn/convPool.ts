import type { Tensor } from '../tensor/tensor.ts';
import type { Backend } from '../kernels/backend.ts';
import type { ForwardContext, Layer } from './layer.ts';
import { Conv2D } from './conv2d.ts';
import { Pool2D } from './pool2d.ts';

/**
 * A conv2d followed by a max pool whose windows tile its output (stride = window, no padding: the
 * usual 2×2/2), run by the model as one step where the backend fuses them
 * (Backend.convPoolForward, onednn's native/onednn/convpool.c for few input channels): the
 * convolution's output — a CNN's largest activation, in its first layer — is never written, and
 * when no input gradient is needed (the first layer) the filter gradient comes straight from the
 * pool's (Backend.conv2dBackwardFilterPooled). Results are the two layers' (the same argmax, the
 * activation backward on the pool's output as activationFusion.ts does). Where the backend does not
 * fuse the shape, the two layers run one after the other as always. Sequential's passes pair layers,
 * and so does what times a pass as they run it (passSteps); a layer run on its own (the non-finite
 * probe) computes in full.
 */
export class ConvPool {
  /** whether the last forward ran fused (then backward must too) */
  private fused = false;

  constructor(
    readonly conv: Conv2D,
    readonly pool: Pool2D,
  ) {}

  forward(x: Tensor, ctx: ForwardContext): Tensor {
    const y = this.pool.forwardAfter(this.conv, x);
    this.fused = y !== null;
    return y ?? this.pool.forward(this.conv.forward(x, ctx), ctx);
  }

  backward(dy: Tensor, needInputGrad: boolean): Tensor | null {
    if (this.fused) return this.pool.backwardBefore(this.conv, dy, needInputGrad);
    const g = this.pool.backward(dy, true);
    return g && this.conv.backward(g, needInputGrad);
  }
}

/** Per index of `layers`, the pair starting there (none when the backend fuses no convolution with a pool). */
export function convPoolPairs(backend: Backend, layers: readonly Layer[]): (ConvPool | undefined)[] {
  const pairs: (ConvPool | undefined)[] = new Array(layers.length).fill(undefined);
  if (!backend.convPoolForward) return pairs;
  for (let i = 0; i + 1 < layers.length; i++) {
    const conv = layers[i],
      pool = layers[i + 1];
    if (conv instanceof Conv2D && pool instanceof Pool2D && pool.tiles) {
      pairs[i] = new ConvPool(conv, pool);
      i++;
    }
  }
  return pairs;
}

/** One step of a pass over `layers` as Sequential takes it: a fused pair, or one layer. */
export interface PassStep {
  /** its layers, first to last (two for a pair) */
  first: number;
  last: number;
  forward(x: Tensor, ctx: ForwardContext): Tensor;
  backward(dy: Tensor, needInputGrad: boolean): Tensor | null;
}

/**
 * The steps of a pass over `layers` as Sequential's passes take them, a pair the backend fuses as
 * one, for what times the layers as a model runs them (the simulator's profile, `bench layers`).
 */
export function passSteps(backend: Backend, layers: readonly Layer[]): PassStep[] {
  const pairs = convPoolPairs(backend, layers);
  const steps: PassStep[] = [];
  for (let i = 0; i < layers.length; i++) {
    const pair = pairs[i],
      layer = layers[i]!;
    steps.push(
      pair
        ? {
            first: i,
            last: i + 1,
            forward: (x, ctx) => pair.forward(x, ctx),
            backward: (g, need) => pair.backward(g, need),
          }
        : {
            first: i,
            last: i,
            forward: (x, ctx) => layer.forward(x, ctx),
            backward: (g, need) => layer.backward(g, need),
          },
    );
    if (pair) i++;
  }
  return steps;
}
