/**
 * Where a model's layers find their parameters when the whole flat buffers are not held (ZeRO
 * stage 2's gradient: parallel/sharding/gradientShards.ts; stage 3's weights too: weightShards.ts). Sequential's passes call these around every layer,
 * by the model's layer index, and an async pass awaits what they return (a gather of the weights,
 * a reduce-scatter of the gradients); a hook with nothing to do returns nothing, so the pass goes
 * straight on. Before a layer's forward or backward its weights are bound (Sequential.bindLayer);
 * after, the residency may release them (Sequential.releaseLayer).
 */
export interface ParameterResidency {
  beforeForward(layer: number): void | Promise<void>;
  afterForward(layer: number): void | Promise<void>;
  beforeBackward(layer: number): void | Promise<void>;
  afterBackward(layer: number): void | Promise<void>;
}

/**
 * A dense layer's weights gathered a block of kernel rows at a time (ZeRO stage 3 with
 * `rowBlockBytes`: weightShards.ts) rather than whole: forward adds each block's product
 * x[:, r0:r1]·W[r0:r1, :] to the output, backward computes each block's gradient and the input
 * gradient's columns r0:r1 (denseRowBlocks.ts). A pass awaits `acquire` before a block and `release`
 * after it; every replica takes the blocks in the same order.
 */
export interface RowBlockSource {
  /** each block's kernel rows [r0, r1), in order; they cover every row once */
  readonly rows: readonly (readonly [number, number])[];
  /**
   * Block k's weights at hand: its kernel rows ([r1 − r0, units]), the bias with the last block
   * (null before it, or without a bias), and the gradient views to add into (zeroed for backward).
   */
  acquire(k: number, backward: boolean): Promise<RowBlock>;
  /** Block k done: forward, its weights may go; backward, its gradient is complete (reduced, then let go). */
  release(k: number, backward: boolean): void | Promise<void>;
}

export interface RowBlock {
  kernel: Float32Array;
  bias: Float32Array | null;
  kernelGrad: Float32Array;
  biasGrad: Float32Array | null;
}
