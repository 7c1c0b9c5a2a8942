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
