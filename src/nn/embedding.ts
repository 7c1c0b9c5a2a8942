import { Tensor } from '../tensor/tensor.ts';
import { formatShape } from '../tensor/shape.ts';
import type { Backend } from '../kernels/backend.ts';
import { BaseLayer, type ForwardContext, type ParamSpec } from './layer.ts';
import { keepLengths, validFrames } from './sequence.ts';

/** GPT-2's (and nanoGPT's) initialisation of token and position embeddings: N(0, 0.02²). */
export const EMBEDDING_INIT_STD = 0.02;

/** A layer spec's vocabulary size, which must be set before the layer is built (`name` in the error). */
export function knownVocab(name: string, vocab: number | undefined): number {
  if (vocab === undefined) {
    throw new Error(
      `${name}: vocab is not set; set embedding: { vocab: <the dataset's vocabulary size>, dim } ` +
        "(a run names the size of its dataset; a tiedEmbedding takes the embedding's)",
    );
  }
  return vocab;
}

/**
 * Token embedding (PyTorch's nn.Embedding(vocab, dim)): the input [N, T] holds token ids as floats,
 * the output [N, T, dim] the rows of `weight` [vocab, dim] they select. Ids have no gradient (the
 * layer comes first); backward adds each position's output gradient into its token's row, so only
 * the rows of the batch's tokens are touched. Positions past a sample's length (ForwardContext.lengths)
 * give zeros and take no part in the gradient; their ids are not read.
 */
export class Embedding extends BaseLayer {
  readonly outputShape: readonly number[];
  private w!: Float32Array;
  private dw!: Float32Array;
  /** per position of the last forward: its token's row start in `weight`, −1 at padding */
  private rows: Int32Array | null = null;

  constructor(
    backend: Backend,
    name: string,
    inputShape: readonly number[],
    readonly vocab: number,
    readonly dim: number,
  ) {
    super(backend, name, inputShape);
    if (inputShape.length !== 1 || !(inputShape[0]! >= 1)) {
      throw this.error(
        `takes the token ids of a window, [positions] per sample, but receives ${formatShape(inputShape)}; ` +
          'set model.input: [contextLength] and make the embedding the first layer',
      );
    }
    if (!Number.isInteger(vocab) || vocab < 1)
      throw this.error(`vocab must be a positive integer (the tokens of the dataset's vocabulary), got ${vocab}`);
    if (!Number.isInteger(dim) || dim < 1) throw this.error(`dim must be a positive integer, got ${dim}`);
    this.outputShape = [inputShape[0]!, dim];
  }

  override params(): ParamSpec[] {
    return [
      {
        name: 'weight',
        shape: [this.vocab, this.dim],
        init: 'normal',
        std: EMBEDDING_INIT_STD,
        fanIn: this.vocab,
        fanOut: this.dim,
      },
    ];
  }

  override bind(params: Float32Array[], grads: Float32Array[]): void {
    this.w = params[0]!;
    this.dw = grads[0]!;
  }

  /** The weight [vocab, dim] and its gradient, which a tied output projection shares (tiedEmbedding.ts). */
  get weight(): Float32Array {
    return this.w;
  }
  get weightGrad(): Float32Array {
    return this.dw;
  }

  forward(x: Tensor, ctx: ForwardContext): Tensor {
    const N = x.batch,
      T = this.inputShape[0]!,
      D = this.dim;
    const rows = (this.rows = this.tokenRows(x, ctx));
    const positions = this.pool.i32('positions', N * T);
    for (let p = 0; p < N * T; p++) positions[p] = p * D;
    const y = new Tensor([N, T, D], this.buffer('y', N * T * D));
    // a gather of rows; a start of −1 (padding) writes zeros
    this.backend.copyRows(this.w, rows, y.data, positions, N * T, D, false);
    return y;
  }

  /** Each position's row start in `weight` (−1 at padding), refusing an id that is no token. */
  private tokenRows(x: Tensor, ctx: ForwardContext): Int32Array {
    const N = x.batch,
      T = this.inputShape[0]!,
      D = this.dim;
    const lengths = keepLengths(this.pool, ctx.lengths);
    const rows = this.pool.i32('rows', N * T);
    for (let n = 0; n < N; n++) {
      const valid = validFrames(lengths, n, T);
      for (let t = 0; t < T; t++) {
        const p = n * T + t;
        if (t >= valid) {
          rows[p] = -1;
          continue;
        }
        const id = x.data[p]!;
        if (!(Number.isInteger(id) && id >= 0 && id < this.vocab)) {
          throw this.error(
            `sample ${n} of the batch holds ${id} at position ${t}; token ids must be integers in 0..${this.vocab - 1} ` +
              `(vocab ${this.vocab}): raise vocab to the dataset's vocabulary size, or feed this layer token ids`,
          );
        }
        rows[p] = id * D;
      }
    }
    return rows;
  }

  savedForBackward(): readonly ArrayBufferView[] {
    return this.rows ? [this.rows] : [];
  }

  /** Adds each position's gradient into its token's row; the ids have no gradient (returns null). */
  backward(dy: Tensor): null {
    if (!this.rows) throw this.error('backward before forward');
    const count = this.rows.length,
      D = this.dim;
    // a scatter-add: dweight[id] += dy[position]; padding (−1) is skipped
    const from = this.pool.i32('from', count);
    const to = this.pool.i32('to', count);
    let k = 0;
    for (let p = 0; p < count; p++) {
      if (this.rows[p]! < 0) continue;
      from[k] = p * D;
      to[k++] = this.rows[p]!;
    }
    this.backend.copyRows(dy.data, from, this.dw, to, k, D, true);
    return null;
  }
}
