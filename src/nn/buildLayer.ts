import type { Backend } from '../kernels/backend.ts';
import type { Layer } from './layer.ts';
import type { LayerSpec } from './spec.ts';
import { Conv2D } from './conv2d.ts';
import { Pool2D } from './pool2d.ts';
import { Dense } from './dense.ts';
import { Flatten } from './flatten.ts';
import { ActivationLayer } from './activationLayer.ts';
import { Dropout } from './dropout.ts';
import { BatchNorm } from './batchNorm.ts';

/** One layer from its normalised spec; `index` is its position, used in names and dropout keys. */
export function buildLayer(backend: Backend, spec: LayerSpec, index: number, inputShape: readonly number[]): Layer {
  const name = `model.layers[${index}] ${spec.type}`;
  switch (spec.type) {
    case 'conv2d':
      return new Conv2D(backend, name, inputShape, spec.filters, spec.kernelSize, spec.strides, spec.padding, spec.activation, spec.useBias);
    case 'maxPool2d':
    case 'avgPool2d':
      return new Pool2D(backend, name, inputShape, spec.type === 'maxPool2d' ? 'max' : 'avg', spec.poolSize, spec.strides, spec.padding);
    case 'dense':
      return new Dense(backend, name, inputShape, spec.units, spec.activation, spec.useBias);
    case 'flatten':
      return new Flatten(backend, name, inputShape);
    case 'relu':
    case 'tanh':
    case 'sigmoid':
      return new ActivationLayer(backend, name, inputShape, spec.type);
    case 'clippedRelu':
      return new ActivationLayer(backend, name, inputShape, 'clippedRelu', spec.cap);
    case 'dropout':
      return new Dropout(backend, name, inputShape, spec.rate, index, spec.masks);
    case 'batchNorm':
      return new BatchNorm(backend, name, inputShape, spec.momentum, spec.epsilon);
  }
}
