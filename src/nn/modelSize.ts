import type { Backend } from '../kernels/backend.ts';
import { shapeSize } from '../tensor/shape.ts';
import { buildLayer, checkOutputShape } from './buildLayer.ts';
import type { ModelSpec } from './spec.ts';
import { checkModelInput } from './sequence.ts';

/** One layer's share of a model's flat buffers, in floats (before alignment). */
export interface LayerSize {
  /** 'model.layers[3] dense' */
  name: string;
  params: number;
  state: number;
}

/**
 * The parameter and state sizes of every layer of `spec`, without allocating them: layers are built
 * (their shapes checked, errors naming the layer) but never bound to buffers, so a model that could
 * not fit in memory can be refused before `buildModel` tries to allocate it.
 */
export function layerSizes(backend: Backend, spec: ModelSpec): LayerSize[] {
  checkModelInput(spec.input);
  let shape: readonly number[] = spec.input;
  return spec.layers.map((layerSpec, i) => {
    const layer = buildLayer(backend, layerSpec, i, shape);
    checkOutputShape(layer, shape);
    shape = layer.outputShape;
    const sum = (specs: readonly { shape: number[] }[]) => specs.reduce((n, s) => n + shapeSize(s.shape), 0);
    return { name: layer.name, params: sum(layer.params()), state: sum(layer.state()) };
  });
}
