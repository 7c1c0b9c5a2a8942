import { Tensor } from '../tensor/tensor.ts';
import { formatShape, VARIABLE } from '../tensor/shape.ts';
import type { Backend } from '../kernels/backend.ts';
import { BaseLayer, type ForwardContext, type ParamSpec } from './layer.ts';
import { isSequenceShape, keepLengths, validFrames, zeroPadding } from './sequence.ts';
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

  /** The vectors of positions 0..frames−1: the learned weight, or the sinusoidal table (grown when needed). */
  private vectors(frames: number): Float32Array {
    if (this.w) return this.w;
    if (this.table.length < frames * this.dim) this.table = sinusoidalTable(frames, this.dim);
    return this.table;
  }

  forward(x: Tensor, ctx: ForwardContext): Tensor {
    const [N, T] = [x.shape[0]!, x.shape[1]!],
      D = this.dim;
    const pe = this.vectors(T);
    const y = new Tensor(x.shape, this.buffer('y', x.size));
    for (let n = 0; n < N; n++) {
      const base = n * T * D;
      for (let j = 0; j < T * D; j++) y.data[base + j] = x.data[base + j]! + pe[j]!;
    }
    this.lengths = keepLengths(this.pool, ctx.lengths);
    zeroPadding(y.data, N, T, D, this.lengths);
    return y;
  }

  /** dx = dy (padding zeroed); the learned table gets the sum over samples of each valid position's gradient. */
  backward(dy: Tensor): Tensor {
    const [N, T] = [dy.shape[0]!, dy.shape[1]!],
      D = this.dim;
    if (this.dw) {
      for (let n = 0; n < N; n++) {
        const base = n * T * D,
          end = validFrames(this.lengths, n, T) * D;
        for (let j = 0; j < end; j++) this.dw[j] = this.dw[j]! + dy.data[base + j]!;
      }
    }
    if (!this.lengths) return dy;
    // padded positions' outputs are constant zeros: their gradient is dropped
    const dx = new Tensor(dy.shape, this.buffer('dx', dy.size));
    dx.data.set(dy.data);
    zeroPadding(dx.data, N, T, D, this.lengths);
    return dx;
  }
}
