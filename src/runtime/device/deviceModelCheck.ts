import type { RunConfig } from '../../config/runConfig.ts';

/** The layers whose passes are all kernels, so they run where the backend's arrays live. */
const DEVICE_LAYERS = new Set([
  'dense',
  'conv2d',
  'batchNorm',
  'maxPool2d',
  'avgPool2d',
  'flatten',
  'relu',
  'tanh',
  'sigmoid',
  'gelu',
  'leakyRelu',
  'clippedRelu',
  'dropout',
  'layerNorm',
  'conv1d',
  'lstm',
  'gru',
  'residual',
  'add',
  'softmax',
  'attention',
  'transformerBlock',
  'embedding',
  'positionEncoding',
  'tiedEmbedding',
]);

/**
 * A model a GPU backend can train: every layer's passes in kernels (the others still compute on the
 * host between kernels). Layers marked `parallel: model` and train.syncBatchNorm run too: what they
 * exchange between devices crosses to the host at the exchange alone.
 */
export function checkDeviceModel(config: RunConfig): void {
  for (const [i, layer] of config.model.layers.entries()) {
    const kind = layer.type;
    if (!DEVICE_LAYERS.has(kind))
      throw new Error(
        `model.layers[${i}] (${kind}): not yet on the webgpu backend, which runs ${[...DEVICE_LAYERS].join(', ')}; use --backend auto for this model`,
      );
  }
}
