import type { Backend } from '../../kernels/backend.ts';
import { formatShape, VARIABLE } from '../../tensor/shape.ts';
import { allLayers, BufferPool, type Layer } from '../../nn/layer.ts';
import { buildLayer } from '../../nn/buildLayer.ts';
import type { ModelSpec } from '../../nn/spec.ts';
import { Sequential, type FlatEntry } from '../../nn/model.ts';
import { initializeLayer, initializeState, planFlatLayout, type FlatLayout } from '../../nn/flatLayout.ts';
import { Embedding } from '../../nn/embedding.ts';
import { TiedEmbedding } from '../../nn/tiedEmbedding.ts';
import { partitionLayers, parameterCosts, type StageRange } from './partition.ts';
import { StageInput } from './stageInput.ts';

/** How a model is cut into pipeline stages. */
export interface PipelinePartition {
  stages: number;
  /** each stage's first layer after stage 0; absent: balanced by parameter count (partition.ts) */
  boundaries?: readonly number[];
}

/** The unsplit model's layers (shapes, costs, initialisation), built once. */
export function unsplitLayers(backend: Backend, spec: ModelSpec): Layer[] {
  const layers: Layer[] = [];
  let shape: readonly number[] = spec.input;
  spec.layers.forEach((l, i) => {
    const layer = buildLayer(backend, l, i, shape);
    layers.push(layer);
    shape = layer.outputShape;
  });
  return layers;
}

/** Each stage's layer range for `spec` (balanced, or the user's boundaries), with what a pipeline cannot cut refused. */
export function planStages(layers: readonly Layer[], partition: PipelinePartition): StageRange[] {
  const ranges = partitionLayers(parameterCosts(layers), partition.stages, partition.boundaries);
  const stageOf = (i: number) => ranges.findIndex((r) => i >= r.start && i < r.end);
  for (const [i, layer] of layers.entries()) {
    const inner = allLayers([layer]);
    if (inner.some((l) => l.needsAsync))
      throw new Error(
        `parallel.pipeline: ${layer.name} communicates across devices in training (syncBatchNorm), which a pipeline stage cannot; set train.syncBatchNorm: false`,
      );
    if (inner.some((l) => l instanceof TiedEmbedding)) {
      const at = layers.findIndex((l) => allLayers([l]).some((x) => x instanceof Embedding));
      if (at >= 0 && stageOf(at) !== stageOf(i))
        throw new Error(
          `parallel.pipeline: ${layer.name} shares the weights of ${layers[at]!.name}, which stage ${stageOf(at)} holds, not stage ${stageOf(i)}; ` +
            'put both on one stage with parallel.pipeline.boundaries, or project with a dense layer',
        );
    }
  }
  for (const r of ranges.slice(1)) {
    const shape = layers[r.start]!.inputShape;
    if (shape.includes(VARIABLE))
      throw new Error(
        `parallel.pipeline: the activation between layers ${r.start - 1} and ${r.start} has a variable shape ${formatShape(shape)}; ` +
          'a pipeline sends fixed-size activations between stages (use fixed-length inputs, or move the boundary)',
      );
  }
  return ranges;
}

/**
 * One device's stage of a pipelined model: layers [start, end) of the unsplit model as a
 * Sequential over ONE set of flat buffers, in `copies` copies that share them — one per
 * micro-batch in flight, since a layer keeps its last forward's activations for its backward.
 * After stage 0 each copy starts with a StageInput, which catches dL/d(stage input) for the stage
 * before. Tensor names are the unsplit model's (`layers.<global index>.<name>`), so a checkpoint
 * gathered from the stages is the unsplit model's.
 */
export class PipelineStage {
  readonly range: StageRange;
  readonly copies: Sequential[];
  readonly params: Float32Array;
  readonly grads: Float32Array;
  readonly state: Float32Array;
  /** this stage's tensors, named as in the unsplit model, at offsets into params (and grads) */
  readonly paramEntries: FlatEntry[];
  readonly stateEntries: FlatEntry[];
  /** per-sample shapes of what the stage receives and sends */
  readonly inputShape: readonly number[];
  readonly outputShape: readonly number[];
  /** the copies' StageInput layers (stages after 0) */
  readonly inputs: (StageInput | null)[];
  /** the received activations and gradients, kept across steps (one each per copy: an activation lives until its backward) */
  readonly pool: BufferPool;

  constructor(
    readonly backend: Backend,
    readonly spec: ModelSpec,
    readonly ranges: readonly StageRange[],
    readonly stage: number,
    copies: number,
    options: { shared?: boolean } = {},
  ) {
    const unsplit = unsplitLayers(backend, spec);
    this.unsplit = unsplit;
    const range = ranges[stage];
    if (!range) throw new Error(`PipelineStage: stage ${stage} is not one of 0 … ${ranges.length - 1}`);
    this.range = range;
    this.inputShape = unsplit[range.start]!.inputShape;
    this.outputShape = unsplit[range.end - 1]!.outputShape;
    const build = (copy: number): Layer[] => {
      const own = unsplit.slice(range.start, range.end);
      const layers =
        copy === 0
          ? own
          : own.map((l, k) => buildLayer(backend, spec.layers[range.start + k]!, range.start + k, l.inputShape));
      return stage > 0 ? [new StageInput(backend, stage, this.inputShape), ...layers] : layers;
    };
    const first = new Sequential(backend, build(0), this.inputShape, options);
    this.copies = [first];
    for (let c = 1; c < copies; c++)
      this.copies.push(new Sequential(backend, build(c), this.inputShape, { buffers: first }));
    this.pool = new BufferPool(backend);
    this.inputs = this.copies.map((c) => (stage > 0 ? (c.layers[0] as StageInput) : null));
    ({ params: this.params, grads: this.grads, state: this.state } = first);
    // Sequential names its layers by position; the same layout under the unsplit model's names
    // (a StageInput has no parameters, so the offsets agree)
    const layout = stageLayout(unsplit, range);
    this.paramEntries = layout.params.flat();
    this.stateEntries = layout.state.flat();
  }
  private readonly unsplit: Layer[];

  /**
   * The unsplit model's initialisation (same seed, each parameter's index in the whole model), of
   * which this stage keeps its layers': a pipelined run starts where one device would.
   */
  initialize(seed: number): void {
    let index = 0;
    const views = (entries: FlatEntry[], buf: Float32Array, i: number) =>
      entries.filter((e) => e.name.startsWith(`layers.${i}.`)).map((e) => buf.subarray(e.offset, e.offset + e.size));
    for (const [i, layer] of this.unsplit.entries()) {
      if (i < this.range.start || i >= this.range.end) {
        index += layer.params().length;
        continue;
      }
      index = initializeLayer(layer, views(this.paramEntries, this.params, i), seed, index);
      initializeState(layer, views(this.stateEntries, this.state, i));
    }
  }

  /** Number of trainable values on this stage. */
  get parameterCount(): number {
    return this.paramEntries.reduce((n, e) => n + e.size, 0);
  }

  zeroGrads(): void {
    this.grads.fill(0);
  }
}

/** The flat layout of a stage's buffers, its tensors named as in the unsplit model (any rank can plan any stage's). */
export function stageLayout(unsplit: readonly Layer[], range: StageRange): FlatLayout {
  return planFlatLayout(unsplit.slice(range.start, range.end).map((layer, k) => ({ index: range.start + k, layer })));
}
