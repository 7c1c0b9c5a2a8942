/**
 * The run that test/nn/transformer-torch.test.ts holds against PyTorch: a 2-block GPT (token
 * embedding, learned positions, 2 pre-norm transformer blocks, a final layerNorm, the output
 * projection tied to the embedding) built and initialised by paratrain, trained a few AdamW steps on
 * fixed batches of synthetic token ids. fixtures/transformer-torch-inputs.ts writes what PyTorch
 * needs (the config, the initial weights, the batches); fixtures/transformer-torch.py adds PyTorch's
 * losses and final weights.
 */
import type { Backend } from '../../src/kernels/backend.ts';
import { resolveConfig, type ConfigInput } from '../../src/config/index.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';
import { Replica } from '../../src/runtime/device/replica.ts';
import { hashInts } from '../../src/tensor/rng.ts';
import { transformerResiduals } from '../../src/nn/transformerBlock.ts';
import type { LayerNormSpec } from '../../src/nn/spec.ts';

export const VOCAB = 13;
export const DIM = 16;
export const FRAMES = 8;
export const HEADS = 2;
export const BLOCKS = 2;
/** samples per batch */
export const BATCH = 3;
export const STEPS = 4;

/** paratrain's config form of the model; AdamW with weight decay, so the decoupled decay is checked too. */
export const CONFIG: ConfigInput = {
  model: {
    input: [FRAMES],
    layers: [
      { embedding: { vocab: VOCAB, dim: DIM } },
      { positionEncoding: { encoding: 'learned' } },
      ...Array.from({ length: BLOCKS }, () => ({ transformerBlock: { heads: HEADS } })),
      { layerNorm: {} },
      { tiedEmbedding: {} },
    ],
  },
  loss: 'tokenCrossEntropy',
  // lr 1e-2 so that 4 steps move every weight well past float32 rounding. eps 1e-4, not PyTorch's
  // 1e-8: Adam's step lr·m̂/(√v̂ + eps) passes a near-zero gradient's rounding on with a gain up to
  // lr/eps, and in_proj_bias's key third has no gradient at all in exact arithmetic (softmax ignores a
  // constant added to a query's scores). With 1e-8, float32's rounding of 1e-10 there moves those
  // biases by 2e-4, far past 1e-5 of any tensor, on any float32 implementation; 1e-4 caps the gain at
  // 100, and being the size of many gradients here it also checks where eps enters the step.
  optimizer: { adamw: { lr: 0.01, weightDecay: 0.1, eps: 1e-4 } },
  train: { seed: 20240611 },
};

export interface Batch {
  /** [BATCH·FRAMES] token ids */
  ids: number[];
  /** [BATCH·FRAMES] the next token at every position */
  labels: number[];
}

/** Step s's batch: windows of FRAMES + 1 pseudo-random tokens; the ids are a window's first FRAMES, the labels its last. */
export function batches(): Batch[] {
  return Array.from({ length: STEPS }, (_, s) => {
    const ids: number[] = [],
      labels: number[] = [];
    for (let i = 0; i < BATCH; i++) {
      const window = Array.from({ length: FRAMES + 1 }, (_, t) => hashInts(s, i, t) % VOCAB);
      ids.push(...window.slice(0, FRAMES));
      labels.push(...window.slice(1));
    }
    return { ids, labels };
  });
}

export interface Tensors {
  name: string;
  shape: number[];
  values: number[];
}

/** Every parameter tensor of the replica's model, by its checkpoint name. */
function tensorsOf(replica: Replica): Tensors[] {
  const { params, paramEntries } = replica.model;
  return paramEntries.map((e) => ({
    name: e.name,
    shape: [...e.shape],
    values: Array.from(params.subarray(e.offset, e.offset + e.size)),
  }));
}

export interface ParatrainRun {
  config: RunConfig;
  initial: Tensors[];
  /** each step's mean cross-entropy over the batch's N·T positions, before the step's update */
  losses: number[];
  final: Tensors[];
}

/** paratrain's own training loop, reduced to one replica: zero, gradients of the mean loss, a local AdamW step. */
export async function paratrainRun(backend: Backend): Promise<ParatrainRun> {
  const config = resolveConfig(CONFIG, 'transformer-torch');
  const replica = new Replica(backend, config);
  const initial = tensorsOf(replica);
  const losses: number[] = [];
  for (const [s, b] of batches().entries()) {
    replica.zeroGrads();
    const ctx = { training: true, seed: config.train.seed, step: s, sampleOffset: s * BATCH };
    const result = await replica.computeGradientsAsync(
      Float32Array.from(b.ids),
      Int32Array.from(b.labels),
      ctx,
      1 / BATCH,
      undefined,
      BATCH,
    );
    losses.push(result.lossSum / BATCH);
    replica.view().localStep(config.optimizer.lr);
  }
  return { config, initial, losses, final: tensorsOf(replica) };
}

/** float32 to 9 significant digits: the shortest form that always reads back as the same float32. */
const float32Text = (v: number) => Number(v.toPrecision(9));

/**
 * What PyTorch is given: the model as paratrain expands it (each block's heads, causal mask, MLP
 * width and layerNorm epsilon from transformerResiduals), the optimizer, paratrain's initial
 * weights (float32, to 9 digits) and the batches.
 */
export function torchInputs(run: ParatrainRun) {
  const layers = run.config.model.layers;
  const blocks = layers.flatMap((l) => {
    if (l.type !== 'transformerBlock') return [];
    const { attn, mlp } = transformerResiduals(l, DIM);
    const [norm, attention] = attn.layers;
    const [, hidden] = mlp.layers;
    if (norm?.type !== 'layerNorm' || attention?.type !== 'attention' || hidden?.type !== 'dense')
      throw new Error(
        'transformerTorchRun: a transformerBlock is no longer [layerNorm, attention] + [layerNorm, dense, dense]',
      );
    return [
      {
        heads: attention.heads,
        causal: attention.causal,
        dropout: l.dropout,
        mlp: hidden.units,
        activation: hidden.activation,
        layerNormEpsilon: norm.epsilon,
      },
    ];
  });
  const final = layers.find((l): l is LayerNormSpec => l.type === 'layerNorm');
  return {
    model: { vocab: VOCAB, dim: DIM, frames: FRAMES, blocks, finalLayerNormEpsilon: final?.epsilon },
    optimizer: run.config.optimizer,
    batchSize: BATCH,
    params: run.initial.map((t) => ({ ...t, values: t.values.map(float32Text) })),
    batches: batches(),
  };
}
