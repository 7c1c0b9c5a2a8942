import { Tensor } from '../tensor/tensor.ts';
import { formatShape, VARIABLE } from '../tensor/shape.ts';
import type { Backend } from '../kernels/backend.ts';
import { BaseLayer, type ForwardContext, type ParamSpec } from './layer.ts';
import { isSequenceShape, keepLengths } from './sequence.ts';
import { EMBEDDING_INIT_STD } from './embedding.ts';

/** Where a position's vector comes from: a trained table (GPT-2's wpe) or Vaswani et al.'s fixed one. */
export type PositionEncodingKind = 'learned' | 'sinusoidal';

/**
 * Vaswani et al.'s table [frames, dim]: PE[t, 2i] = sin(t / 10000^(2i/dim)), PE[t, 2i+1] = cos of the
 * same angle: PyTorch's tutorial formula (exp(−2i·ln 10000 / dim)), in float64 then rounded to float32.
 */
export function sinusoidalTable(frames: number, dim: number): Float32Array {
  const table = new Float32Array(frames * dim);
  for (let t = 0; t < frames; t++) {
    for (let i = 0; i < dim; i += 2) {
      const angle = t * Math.exp((-i * Math.log(10000)) / dim);
      table[t * dim + i] = Math.sin(angle);
      if (i + 1 < dim) table[t * dim + i + 1] = Math.cos(angle);
    }
  }
  return table;
}

/**
 * Adds a vector per position to a sequence [N, T, D]: a parameter `weight` [T, D] (learned, init
 * N(0, 0.02²)) or the sinusoidal table (no parameters). Positions past a sample's length stay zero
 * and take no part in the learned table's gradient.
 */
export class PositionEncoding extends BaseLayer {
  readonly outputShape: readonly number[];
  readonly dim: number;
  private w: Float32Array | null = null;
  private dw: Float32Array | null = null;
  private table: Float32Array = new Float32Array(0);
  private lengths: Int32Array | undefined;
  /** one whole-array row, for copyRows */
  private readonly whole = new Int32Array(1);

  constructor(
    backend: Backend,
    name: string,
    inputShape: readonly number[],
    readonly kind: PositionEncodingKind,
  ) {
    super(backend, name, inputShape);
    if (!isSequenceShape(inputShape)) {
      throw this.error(
        `adds a vector per position to a sequence [positions, features], but receives ${formatShape(inputShape)}; put it after an embedding layer`,
      );
    }
    if (kind === 'learned' && inputShape[0] === VARIABLE) {
      throw this.error(
        'a learned encoding holds one vector per position, so the positions must be fixed; give model.input a fixed length, or use type: sinusoidal',
      );
    }
    this.outputShape = inputShape;
    this.dim = inputShape[1]!;
  }

  override params(): ParamSpec[] {
    if (this.kind === 'sinusoidal') return [];
    const [T, D] = this.inputShape as [number, number];
    return [{ name: 'weight', shape: [T, D], init: 'normal', std: EMBEDDING_INIT_STD, fanIn: T, fanOut: D }];
  }

  override bind(params: Float32Array[], grads: Float32Array[]): void {
    if (this.kind === 'sinusoidal') return;
    this.w = params[0]!;
    this.dw = grads[0]!;
  }

  /**
   * The vectors of positions 0..frames−1: the learned weight, or the sinusoidal table (grown when
   * needed; a host array, which a GPU backend copies in with each forward: frames·dim floats).
   */
  private vectors(frames: number): Float32Array {
    if (this.w) return this.w;
    if (this.table.length < frames * this.dim) this.table = sinusoidalTable(frames, this.dim);
    return this.table.subarray(0, frames * this.dim);
  }

  forward(x: Tensor, ctx: ForwardContext): Tensor {
    const [N, T] = [x.shape[0]!, x.shape[1]!],
      D = this.dim;
    const y = new Tensor(x.shape, this.buffer('y', x.size));
    // each sample is one row of T·D values, the position vectors its bias
    this.backend.biasAdd(x.data, this.vectors(T), y.data, N, T * D);
    this.lengths = keepLengths(this.pool, ctx.lengths);
    if (this.lengths) this.backend.zeroPadding(y.data, N, T, D, this.lengths);
    return y;
  }

  /** dx = dy (padding zeroed); the learned table gets the sum over samples of each valid position's gradient. */
  backward(dy: Tensor): Tensor {
    const [N, T] = [dy.shape[0]!, dy.shape[1]!],
      D = this.dim;
    let dx = dy;
    if (this.lengths) {
      // padded positions' outputs are constant zeros: their gradient is dropped
      dx = new Tensor(dy.shape, this.buffer('dx', dy.size));
      this.backend.copyRows(dy.data, this.whole, dx.data, this.whole, 1, dy.size, false);
      this.backend.zeroPadding(dx.data, N, T, D, this.lengths);
    }
    // the column sums over samples: padded positions add their zeros
    if (this.dw) this.backend.biasGrad(dx.data, this.dw, N, T * D);
    return dx;
  }
}
