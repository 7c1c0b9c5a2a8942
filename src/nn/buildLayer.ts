import type { Backend } from '../kernels/backend.ts';
import { formatShape, VARIABLE } from '../tensor/shape.ts';
import { fixedSize, isSequenceShape } from './sequence.ts';
import type { Layer } from './layer.ts';
import type { LayerSpec, SpatialSplitSpec } from './spec.ts';
import { Conv2D } from './conv2d.ts';
import { Pool2D } from './pool2d.ts';
import { Dense } from './dense.ts';
import { Flatten } from './flatten.ts';
import { ActivationLayer } from './activationLayer.ts';
import { Dropout } from './dropout.ts';
import { BatchNorm } from './batchNorm.ts';
import { SerialSpatialStack } from './spatialStack.ts';
import { Recurrent } from './recurrent.ts';
import { Conv1D } from './conv1d.ts';
import { LayerNorm } from './layerNorm.ts';
import { SoftmaxLayer } from './softmaxLayer.ts';
import { buildAddBlock } from './buildAddBlock.ts';
import { Attention } from './attention.ts';
import { buildTransformerBlock } from './transformerBlock.ts';
import { Embedding, knownVocab } from './embedding.ts';
import { PositionEncoding } from './positionEncoding.ts';
import { TiedEmbedding } from './tiedEmbedding.ts';

/**
 * One layer from its normalised spec; `index` is its position, used in names and dropout keys.
 * `name` defaults to 'model.layers[<index>] <type>'.
 */
export function buildLayer(
  backend: Backend,
  spec: LayerSpec,
  index: number,
  inputShape: readonly number[],
  name = `model.layers[${index}] ${spec.type}`,
): Layer {
  switch (spec.type) {
    case 'conv2d':
      return new Conv2D(
        backend,
        name,
        inputShape,
        spec.filters,
        spec.kernelSize,
        spec.strides,
        spec.padding,
        spec.activation,
        spec.useBias,
      );
    case 'maxPool2d':
    case 'avgPool2d':
      return new Pool2D(
        backend,
        name,
        inputShape,
        spec.type === 'maxPool2d' ? 'max' : 'avg',
        spec.poolSize,
        spec.strides,
        spec.padding,
      );
    case 'dense':
      return new Dense(backend, name, inputShape, spec.units, spec.activation, spec.useBias);
    case 'flatten':
      return new Flatten(backend, name, inputShape);
    case 'relu':
    case 'tanh':
    case 'sigmoid':
    case 'gelu':
      return new ActivationLayer(backend, name, inputShape, spec.type);
    case 'leakyRelu':
      return new ActivationLayer(backend, name, inputShape, 'leakyRelu', spec.slope);
    case 'softmax':
      return new SoftmaxLayer(backend, name, inputShape);
    case 'residual':
    case 'add':
      return buildAddBlock(backend, spec, index, inputShape, name, (inner, key, shape, innerName) => {
        const layer = buildLayer(backend, inner, key, shape, innerName);
        checkOutputShape(layer, shape);
        return layer;
      });
    case 'clippedRelu':
      return new ActivationLayer(backend, name, inputShape, 'clippedRelu', spec.cap);
    case 'dropout':
      return new Dropout(backend, name, inputShape, spec.rate, index, spec.masks);
    case 'batchNorm':
      if (isSequenceShape(inputShape))
        throw new Error(`${name}: batch statistics over a sequence would count its padded frames; use layerNorm`);
      return new BatchNorm(backend, name, inputShape, spec.momentum, spec.epsilon);
    case 'lstm':
    case 'gru':
      return new Recurrent(backend, name, inputShape, spec.type, spec.units, {
        returnSequences: spec.returnSequences,
        bidirectional: spec.bidirectional,
        forgetBias: spec.forgetBias,
      });
    case 'conv1d':
      return new Conv1D(
        backend,
        name,
        inputShape,
        spec.filters,
        spec.kernelSize,
        spec.strides,
        spec.padding,
        spec.activation,
        spec.useBias,
      );
    case 'layerNorm':
      return new LayerNorm(backend, name, inputShape, spec.epsilon);
    case 'attention':
      return new Attention(backend, name, inputShape, spec, index);
    case 'transformerBlock':
      return buildTransformerBlock(backend, spec, index, inputShape, name, (inner, key, shape, innerName) =>
        buildLayer(backend, inner, key, shape, innerName),
      );
    case 'embedding':
      return new Embedding(backend, name, inputShape, knownVocab(name, spec.vocab), spec.dim);
    case 'positionEncoding':
      return new PositionEncoding(backend, name, inputShape, spec.encoding);
    case 'tiedEmbedding':
      return new TiedEmbedding(backend, name, inputShape, knownVocab(name, spec.vocab));
    case 'spatialSplit':
      return new SerialSpatialStack(
        backend,
        buildSpatialLayers(backend, spec, index, inputShape, name),
        spec.tiles[0],
        spec.tiles[1],
        name,
      );
  }
}

/** A built layer whose output is empty means its input was too small: say so, naming it. */
export function checkOutputShape(layer: Layer, inputShape: readonly number[]): void {
  if (fixedSize(layer.outputShape) < 1 || layer.outputShape.some((d) => d < 1 && d !== VARIABLE)) {
    throw new Error(
      `${layer.name}: output shape ${formatShape(layer.outputShape)} is empty for input ${formatShape(inputShape)}; the input is too small for this layer`,
    );
  }
}

/**
 * The layers inside `model.layers[index]` (a spatialSplit), named 'model.layers[3].spatialSplit.layers[0] conv2d'
 * like their config path. `name` is the container's, for the error when it is empty.
 */
export function buildSpatialLayers(
  backend: Backend,
  spec: SpatialSplitSpec,
  index: number,
  inputShape: readonly number[],
  name = `model.layers[${index}] spatialSplit`,
): Layer[] {
  if (!spec.layers.length)
    throw new Error(`${name}: has no layers; list the convolution and pooling layers to split under layers:`);
  let shape = inputShape;
  return spec.layers.map((inner, k) => {
    const layer = buildLayer(
      backend,
      inner,
      index,
      shape,
      `model.layers[${index}].spatialSplit.layers[${k}] ${inner.type}`,
    );
    checkOutputShape(layer, shape);
    shape = layer.outputShape;
    return layer;
  });
}
