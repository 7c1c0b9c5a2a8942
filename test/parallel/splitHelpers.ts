import { Tensor } from '../../src/tensor/tensor.ts';
import type { Backend } from '../../src/kernels/backend.ts';
import type { LayerSpec } from '../../src/nn/spec.ts';
import type { Layer } from '../../src/nn/layer.ts';
import { buildLayer } from '../../src/nn/buildLayer.ts';
import { Sequential } from '../../src/nn/model.ts';
import { randomArray } from '../util/close.ts';

export const TRAIN = { training: true, seed: 5, step: 2, sampleOffset: 0 };

/** Layers built from specs on `input` (no parameters bound yet). */
export function buildLayers(backend: Backend, specs: LayerSpec[], input: number[]): Layer[] {
  let shape: readonly number[] = input;
  return specs.map((s, i) => {
    const l = buildLayer(backend, s, i, shape);
    shape = l.outputShape;
    return l;
  });
}

/** A Sequential of the specs with seeded weights perturbed so biases are non-zero. */
export function seededModel(backend: Backend, specs: LayerSpec[], input: number[]): Sequential {
  const m = new Sequential(backend, buildLayers(backend, specs, input), input);
  m.initialize(11);
  const noise = randomArray(m.params.length, 4);
  for (let i = 0; i < noise.length; i++) m.params[i] = m.params[i]! + 0.1 * noise[i]!;
  return m;
}

/** The unsplit reference: output, input gradient and parameter gradients for upstream gradient r. */
export function reference(model: Sequential, x: Tensor, r: Float32Array) {
  const y = model.forward(x, TRAIN);
  const yCopy = y.data.slice();
  model.zeroGrads();
  let g: Tensor = new Tensor(y.shape, r.slice());
  for (let i = model.layers.length - 1; i >= 0; i--) g = model.layers[i]!.backward(g, true)!;
  return { y: yCopy, dx: g.data.slice(), grads: model.grads.slice(), shape: y.shape };
}

export const conv = (
  filters: number,
  k: number | [number, number],
  o: Partial<{ strides: [number, number]; padding: 'valid' | 'same'; activation: 'relu' | 'tanh' | 'linear' }> = {},
): LayerSpec => ({
  type: 'conv2d',
  filters,
  kernelSize: typeof k === 'number' ? [k, k] : k,
  strides: o.strides ?? [1, 1],
  padding: o.padding ?? 'valid',
  activation: o.activation ?? 'linear',
  useBias: true,
});
export const pool = (
  type: 'maxPool2d' | 'avgPool2d',
  k: number,
  s = k,
  padding: 'valid' | 'same' = 'valid',
): LayerSpec => ({
  type,
  poolSize: [k, k],
  strides: [s, s],
  padding,
});
