import { Tensor } from '../tensor/tensor.ts';
import { formatShape } from '../tensor/shape.ts';
import type { Backend } from '../kernels/backend.ts';
import { allLayers, BaseLayer, type ForwardContext, type Layer } from './layer.ts';
import { isSequenceShape, keepLengths } from './sequence.ts';
import { Embedding } from './embedding.ts';

/**
 * The output projection that shares the model's embedding weight W [vocab, dim] (GPT-2's tied
 * lm_head): logits [N, T, vocab] = h [N, T, dim] · Wᵀ, no bias. It has no parameters of its own:
 * its backward ADDS dlogitsᵀ·h into the embedding's gradient view, so the one tensor
 * `layers.<embedding>.weight` is what the optimizer updates and checkpoints save. The embedding
 * comes before it, so backward reaches the embedding (which adds its rows and then announces its
 * range as ready: nn/model.ts) after this layer's share is in.
 */
export class TiedEmbedding extends BaseLayer {
  readonly outputShape: readonly number[];
  readonly dim: number;
  private embedding: Embedding | null = null;
  private x: Tensor | null = null;
  private lengths: Int32Array | undefined;
  /** one whole-array row, for copyRows */
  private readonly whole = new Int32Array(1);

  constructor(
    backend: Backend,
    name: string,
    inputShape: readonly number[],
    readonly vocab: number,
  ) {
    super(backend, name, inputShape);
    if (!isSequenceShape(inputShape)) {
      throw this.error(
        `projects a sequence [positions, dim] onto the vocabulary, but receives ${formatShape(inputShape)}; use it on the output of the transformer layers`,
      );
    }
    if (!Number.isInteger(vocab) || vocab < 1)
      throw this.error(`vocab must be a positive integer (the model's embedding's), got ${vocab}`);
    this.dim = inputShape[1]!;
    this.outputShape = [inputShape[0]!, vocab];
  }

  /** Shares `embedding`'s weight and gradient (tieEmbeddings does this for a model's layers). */
  tie(embedding: Embedding): void {
    if (embedding.vocab !== this.vocab || embedding.dim !== this.dim) {
      throw this.error(
        `shares the weight [${embedding.vocab}, ${embedding.dim}] of ${embedding.name}, so it needs an input of ${embedding.dim} features ` +
          `and gives ${embedding.vocab} scores, but it receives ${this.dim} features and gives ${this.vocab}; ` +
          `make the layer before it ${embedding.dim} wide`,
      );
    }
    this.embedding = embedding;
  }

  private shared(): Embedding {
    if (!this.embedding)
      throw this.error('is not tied to an embedding layer; build it inside a model whose first layer is an embedding');
    return this.embedding;
  }

  forward(x: Tensor, ctx: ForwardContext): Tensor {
    const W = this.shared().weight;
    const rows = x.size / this.dim,
      V = this.vocab;
    const y = new Tensor([...x.shape.slice(0, -1), V], this.buffer('y', rows * V));
    this.backend.gemm(false, true, rows, V, this.dim, 1, x.data, W, 0, y.data);
    this.lengths = x.shape.length === 3 ? keepLengths(this.pool, ctx.lengths) : undefined;
    if (this.lengths) this.backend.zeroPadding(y.data, x.shape[0]!, x.shape[1]!, V, this.lengths);
    this.x = x;
    return y;
  }

  savedForBackward(): readonly ArrayBufferView[] {
    return this.x ? [this.x.data] : [];
  }

  backward(dy: Tensor, needInputGrad = true): Tensor | null {
    if (!this.x) throw this.error('backward before forward');
    const { weight: W, weightGrad: dW } = this.shared();
    const V = this.vocab,
      D = this.dim,
      rows = dy.size / V;
    let g = dy.data;
    if (this.lengths) {
      // padded positions' logits are constant zeros: their gradient is dropped
      g = this.buffer('dz', dy.size);
      this.backend.copyRows(dy.data, this.whole, g, this.whole, 1, dy.size, false);
      this.backend.zeroPadding(g, dy.shape[0]!, dy.shape[1]!, V, this.lengths);
    }
    // the embedding's gradient: dW [V, D] += gᵀ [V, rows] · h [rows, D]
    this.backend.gemm(true, false, V, D, rows, 1, g, this.x.data, 1, dW);
    if (!needInputGrad) return null;
    const dx = new Tensor([...dy.shape.slice(0, -1), D], this.buffer('dx', rows * D));
    this.backend.gemm(false, false, rows, D, V, 1, g, W, 0, dx.data);
    return dx;
  }
}

/**
 * Ties every tiedEmbedding among `layers` (nested ones too) to the model's one embedding, which
 * must come before it in the model's top-level order. Errors name the tied layer and the fix.
 */
export function tieEmbeddings(layers: readonly Layer[]): void {
  const found = layers.map((l) => allLayers([l]));
  const embeddings = found.flatMap((ls, i) => ls.filter((l) => l instanceof Embedding).map((e) => ({ e, i })));
  found.forEach((ls, i) => {
    for (const tied of ls) {
      if (!(tied instanceof TiedEmbedding)) continue;
      if (embeddings.length !== 1) {
        throw new Error(
          `${tied.name}: shares the weights of the model's embedding layer, but the model has ${embeddings.length === 0 ? 'none' : `${embeddings.length} (${embeddings.map(({ e }) => e.name).join(', ')})`}; ` +
            `use it in a model with one embedding layer, or project with dense: { units: ${tied.vocab} } instead`,
        );
      }
      const [{ e, i: at }] = embeddings as [{ e: Embedding; i: number }];
      if (at >= i)
        throw new Error(`${tied.name}: comes before ${e.name}, whose weights it shares; put the embedding first`);
      tied.tie(e);
    }
  });
}
