import type { ActivationKind } from '../kernels/activation.ts';

/** Normalised layer descriptions (defaults filled in), as the config loader produces them. */
export type Padding = 'valid' | 'same';

export interface Conv2DSpec {
  type: 'conv2d';
  filters: number;
  kernelSize: [number, number];
  strides: [number, number];
  padding: Padding;
  activation: ActivationKind;
  useBias: boolean;
  /**
   * 'model' splits the layer's filters (output channels) across devices inside the model-parallel
   * section ("one weird trick", channel split); absent means data-parallel
   */
  parallel?: 'model';
}
export interface Pool2DSpec {
  type: 'maxPool2d' | 'avgPool2d';
  poolSize: [number, number];
  strides: [number, number];
  padding: Padding;
}
export interface DenseSpec {
  type: 'dense';
  units: number;
  activation: ActivationKind;
  useBias: boolean;
  /** 'model' splits the layer's output units across devices ("one weird trick") */
  parallel: 'data' | 'model';
}
export interface FlattenSpec {
  type: 'flatten';
}
export interface ActivationSpec {
  type: 'relu' | 'tanh' | 'sigmoid' | 'gelu';
}
export interface ClippedReluSpec {
  type: 'clippedRelu';
  cap: number;
}
/** max(x, 0) + slope·min(x, 0); slope ≥ 0 (backward reads the output's sign) */
export interface LeakyReluSpec {
  type: 'leakyRelu';
  slope: number;
}
/** softmax over the last axis: an output layer for probabilities (not with softmaxCrossEntropy, which includes it) */
export interface SoftmaxSpec {
  type: 'softmax';
}
/** y = activation(layers(x) + shortcut(x)); an empty shortcut is the identity (nn/addBlock.ts) */
export interface ResidualSpec {
  type: 'residual';
  layers: LayerSpec[];
  shortcut: LayerSpec[];
  activation: ActivationKind;
}
/** y = activation(Σ branches(x)); an empty branch is the identity */
export interface AddSpec {
  type: 'add';
  branches: LayerSpec[][];
  activation: ActivationKind;
}
/** How dropout masks are keyed: per replica (default) or per global sample (split-invariant). */
export type DropoutMasks = 'per-replica' | 'per-sample';
export interface DropoutSpec {
  type: 'dropout';
  rate: number;
  masks: DropoutMasks;
}
export interface BatchNormSpec {
  type: 'batchNorm';
  momentum: number;
  epsilon: number;
}

/** How a bidirectional recurrent layer joins its two directions' outputs (absent: one direction). */
export type BidirectionalMerge = 'concat' | 'sum';
/** lstm / gru over a sequence [T, F]; weights in PyTorch's layout (docs/speech.md). */
export interface RecurrentSpec {
  type: 'lstm' | 'gru';
  units: number;
  /** true: every frame's output [T, units]; false: each sample's final state [units] */
  returnSequences: boolean;
  bidirectional?: BidirectionalMerge;
  /** LSTM only (absent for a GRU): added at initialisation to the forget-gate part of bias_ih */
  forgetBias?: number;
}
/** Convolution over time of a sequence [T, C] with weights [K, C, filters]. */
export interface Conv1DSpec {
  type: 'conv1d';
  filters: number;
  kernelSize: number;
  strides: number;
  padding: Padding;
  activation: ActivationKind;
  useBias: boolean;
}
/** Normalisation over the last axis with gamma/beta (per frame of a sequence). */
export interface LayerNormSpec {
  type: 'layerNorm';
  epsilon: number;
}
/** Multi-head self-attention over a sequence [T, D], PyTorch's nn.MultiheadAttention (nn/attention.ts). */
export interface AttentionSpec {
  type: 'attention';
  heads: number;
  /** frame t attends to frames 0…t only */
  causal: boolean;
  /** dropout on the attention weights while training */
  dropout: number;
}
/**
 * GPT-2's pre-norm block on [T, D]: x + attention(layerNorm(x)), then x + dense(gelu(dense(layerNorm(x))))
 * (nn/transformerBlock.ts: two residual blocks); `mlp` absent: 4·D hidden units.
 */
export interface TransformerBlockSpec {
  type: 'transformerBlock';
  heads: number;
  mlp?: number;
  /** on the attention weights and on each residual branch's output, while training */
  dropout: number;
  causal: boolean;
  /**
   * 'model' splits the block Megatron-style inside the model-parallel section (heads and MLP
   * units across devices: parallel/modelParallel/tensorParallelBlock.ts); absent means data-parallel
   */
  parallel?: 'model';
}

/** What a spatial split may hold: each output pixel reads a bounded window of input pixels. */
export type SpatialLayerSpec = Conv2DSpec | Pool2DSpec | ActivationSpec | ClippedReluSpec | LeakyReluSpec;
export const SPATIAL_LAYER_TYPES = [
  'conv2d',
  'maxPool2d',
  'avgPool2d',
  'relu',
  'tanh',
  'sigmoid',
  'clippedRelu',
  'gelu',
  'leakyRelu',
] as const satisfies readonly SpatialLayerSpec['type'][];

/**
 * A stack of convolution/pooling/activation layers run tile after tile on one device (less
 * activation memory, a second forward in backward), or tiles across devices (`parallel: model`);
 * equal to the layers unsplit.
 */
export interface SpatialSplitSpec {
  type: 'spatialSplit';
  /** [rows, columns] of the tile grid over the stack's output */
  tiles: [number, number];
  layers: SpatialLayerSpec[];
  /**
   * 'model' runs the tiles on different devices inside the model-parallel section ("one weird
   * trick"): each device computes its tiles for the job's whole batch; absent means serial
   */
  parallel?: 'model';
}

export type LayerSpec =
  | Conv2DSpec
  | Pool2DSpec
  | DenseSpec
  | FlattenSpec
  | ActivationSpec
  | ClippedReluSpec
  | DropoutSpec
  | BatchNormSpec
  | SpatialSplitSpec
  | RecurrentSpec
  | Conv1DSpec
  | LayerNormSpec
  | LeakyReluSpec
  | SoftmaxSpec
  | ResidualSpec
  | AddSpec
  | AttentionSpec
  | TransformerBlockSpec
  | EmbeddingSpec
  | PositionEncodingSpec
  | TiedEmbeddingSpec;

/** Token ids [T] → vectors [T, dim] (nn/embedding.ts); `vocab` must be set before the model is built. */
export interface EmbeddingSpec {
  type: 'embedding';
  vocab?: number;
  dim: number;
}
/** Adds a vector per position to [T, D]: a learned table or the fixed sinusoidal one (nn/positionEncoding.ts). */
export interface PositionEncodingSpec {
  type: 'positionEncoding';
  encoding: 'learned' | 'sinusoidal';
}
/** Logits [T, vocab] from [T, D] with the model's embedding weight (nn/tiedEmbedding.ts); vocab is the embedding's. */
export interface TiedEmbeddingSpec {
  type: 'tiedEmbedding';
  vocab?: number;
}

export type LayerType = LayerSpec['type'];

export interface ModelSpec {
  /**
   * per-sample input shape: [H, W, C] for images, [features] for vectors, [frames, features] for
   * sequences (frames VARIABLE, −1, when each batch decides: `null` in a config)
   */
  input: number[];
  layers: LayerSpec[];
}

/**
 * The `loss:` field, normalised: softmax cross-entropy for classification (with label smoothing
 * ε: targets (1 − ε)·onehot + ε/K), mean squared error for regression, binary cross-entropy from
 * logits for multi-label data, CTC for speech transcription (nn/losses.ts).
 */
export type LossSpec =
  | { type: 'softmaxCrossEntropy'; labelSmoothing: number }
  | { type: 'meanSquaredError' }
  | { type: 'binaryCrossEntropy' }
  /** CTC over per-frame logits [T, C] of a speech model (nn/ctcSequenceLoss.ts; class `blank` is the blank) */
  | { type: 'ctc'; blank: number; reduction: 'mean' | 'sum' | 'batchMean'; zeroInfinity: boolean }
  /** softmax cross-entropy at every position of logits [T, vocab], the next token its label (nn/tokenCrossEntropy.ts) */
  | { type: 'tokenCrossEntropy' };
