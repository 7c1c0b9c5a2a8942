import { Tensor } from '../tensor/tensor.ts';
import { formatShape, VARIABLE } from '../tensor/shape.ts';
import type { ActivationKind } from '../kernels/activation.ts';
import type { Backend } from '../kernels/backend.ts';
import { BaseLayer, type ForwardContext, type ParamSpec } from './layer.ts';
import type { Padding } from './spec.ts';
import { checkLengths, isSequenceShape, keepLengths, sequenceDims, validFrames } from './sequence.ts';

/**
 * Convolution over time of a sequence [N, T, C] with weights [K, C, F] (paratrain's conv layout,
 * like conv2d's [KH, KW, C, F]), optional bias, fused activation. Output frame o reads input
 * frames o·stride − padBefore + k, k < K; frames outside [0, length) of ITS sample read as 0, so
 * padding never changes a result. `same`: padBefore = ⌊(K − 1)/2⌋ and ⌈length/stride⌉ output
 * frames (a fixed offset, unlike TensorFlow's, so it does not depend on the batch's padded T);
 * `valid`: no padding, ⌊(length − K)/stride⌋ + 1 frames. With `same` and stride 1 this is
 * DeepSpeech's context window (K = 2·context + 1) fused with its first dense layer.
 * Computed as an im2col of the windows (one row per output frame, gathered by Backend.copyRows)
 * and one gemm; only the row starts are computed on the host, so the arrays may live on a device.
 */
export class Conv1D extends BaseLayer {
  readonly outputShape: readonly number[];
  readonly channels: number;
  private readonly padBefore: number;
  private w!: Float32Array;
  private b: Float32Array | null = null;
  private dw!: Float32Array;
  private db: Float32Array | null = null;
  private col: Float32Array | null = null;
  private y: Tensor | null = null;
  private inDims: [number, number, number] = [0, 0, 0];
  private inLengths: Int32Array | undefined;
  /** the output's valid frames per sample of the last forward (undefined without lengths) */
  private outLengths: Int32Array | undefined;

  constructor(
    backend: Backend,
    name: string,
    inputShape: readonly number[],
    readonly filters: number,
    readonly kernelSize: number,
    readonly stride: number,
    readonly padding: Padding,
    readonly activation: ActivationKind,
    readonly useBias: boolean,
  ) {
    super(backend, name, inputShape);
    if (!isSequenceShape(inputShape)) {
      throw this.error(
        `expects a sequence [frames, channels] but receives ${formatShape(inputShape)}; ` +
          'conv1d convolves over time (use conv2d for images)',
      );
    }
    this.channels = inputShape[1]!;
    this.padBefore = padding === 'same' ? Math.floor((kernelSize - 1) / 2) : 0;
    const T = inputShape[0]!;
    this.outputShape = [T === VARIABLE ? VARIABLE : this.outFrames(T), filters];
  }

  /** Output frames of a sequence of `length` input frames. */
  outFrames(length: number): number {
    if (this.padding === 'same') return Math.ceil(length / this.stride);
    return length >= this.kernelSize ? Math.floor((length - this.kernelSize) / this.stride) + 1 : 0;
  }

  outputLengths(lengths: Int32Array): Int32Array {
    return this.mapLengths(lengths, new Int32Array(lengths.length));
  }

  private mapLengths(lengths: Int32Array, out: Int32Array): Int32Array {
    for (let n = 0; n < lengths.length; n++) out[n] = this.outFrames(lengths[n]!);
    return out;
  }

  override params(): ParamSpec[] {
    const K = this.kernelSize,
      C = this.channels,
      F = this.filters;
    const fanIn = K * C,
      fanOut = K * F;
    const kernel: ParamSpec = {
      name: 'kernel',
      shape: [K, C, F],
      init: this.activation === 'relu' || this.activation === 'clippedRelu' ? 'heNormal' : 'glorotUniform',
      fanIn,
      fanOut,
    };
    return this.useBias ? [kernel, { name: 'bias', shape: [F], init: 'zeros', fanIn, fanOut }] : [kernel];
  }

  override bind(params: Float32Array[], grads: Float32Array[]): void {
    this.w = params[0]!;
    this.dw = grads[0]!;
    if (this.useBias) {
      this.b = params[1]!;
      this.db = grads[1]!;
    }
  }

  forward(x: Tensor, ctx: ForwardContext): Tensor {
    if (x.shape.length !== 3 || x.shape[2] !== this.channels) {
      throw this.error(`expects input [batch, frames, ${this.channels}], got ${formatShape(x.shape)}`);
    }
    const [N, T, C] = (this.inDims = sequenceDims(x));
    const OT = this.outFrames(T),
      K = this.kernelSize,
      F = this.filters,
      KC = K * C;
    if (OT < 1)
      throw this.error(
        `the batch's ${T} frames are fewer than kernelSize ${K} (padding valid); use padding: same or longer inputs`,
      );
    if (ctx.lengths) checkLengths(ctx.lengths, N, T, this.name);
    this.inLengths = keepLengths(this.pool, ctx.lengths);
    this.outLengths = this.inLengths && this.mapLengths(this.inLengths, this.pool.i32('outLengths', N));
    const col = (this.col = this.buffer('col', N * OT * KC));
    // window row (n, o) holds input frames o·stride − padBefore + k, k < K: C values each, 0 outside the sample
    const from = this.pool.i32('colFrom', N * OT * K),
      to = this.pool.i32('colTo', N * OT * K);
    for (let n = 0, i = 0; n < N; n++) {
      const len = validFrames(this.inLengths, n, T),
        outLen = this.outFrames(len);
      for (let o = 0; o < OT; o++) {
        for (let k = 0; k < K; k++, i++) {
          const t = o * this.stride - this.padBefore + k;
          from[i] = o < outLen && t >= 0 && t < len ? (n * T + t) * C : -1;
          to[i] = i * C;
        }
      }
    }
    this.backend.copyRows(x.data, from, col, to, N * OT * K, C, false);
    const y = (this.y = new Tensor([N, OT, F], this.buffer('y', N * OT * F)));
    this.backend.gemm(false, false, N * OT, F, KC, 1, col, this.w, 0, y.data);
    if (this.b) this.backend.biasAdd(y.data, this.b, y.data, N * OT, F);
    if (this.activation !== 'linear') this.backend.activationForward(this.activation, y.data, y.data);
    if (this.outLengths) this.backend.zeroPadding(y.data, N, OT, F, this.outLengths);
    return y;
  }

  savedForBackward(): readonly ArrayBufferView[] {
    const saved: ArrayBufferView[] = this.col ? [this.col] : [];
    if (this.y && this.activation !== 'linear') saved.push(this.y.data);
    return saved;
  }

  backward(dy: Tensor, needInputGrad = true): Tensor | null {
    const [N, T, C] = this.inDims,
      K = this.kernelSize,
      F = this.filters,
      KC = K * C;
    const OT = this.outFrames(T),
      rows = N * OT;
    // outputs at padded frames are constant zeros: whatever gradient reaches them is dropped
    const dz = this.buffer('dz', dy.size);
    this.backend.activationBackward(this.activation, this.y!.data, dy.data, dz);
    if (this.outLengths) this.backend.zeroPadding(dz, N, OT, F, this.outLengths);
    this.backend.gemm(true, false, KC, F, rows, 1, this.col!, dz, 1, this.dw);
    if (this.db) this.backend.biasGrad(dz, this.db, rows, F);
    if (!needInputGrad) return null;
    const dcol = this.buffer('dcol', rows * KC);
    this.backend.gemm(false, true, rows, KC, F, 1, dz, this.w, 0, dcol);
    const dx = new Tensor([N, T, C], this.buffer('dx', N * T * C));
    this.backend.fill(dx.data, 0);
    // dx frame t sums the window rows that read it, in the order of their output frames: one
    // copyRows per tap k (its rows write distinct frames), the last tap first, as o rises when k falls
    const from = this.pool.i32('colFrom', rows),
      to = this.pool.i32('colTo', rows);
    for (let k = K - 1; k >= 0; k--) {
      let count = 0;
      for (let n = 0; n < N; n++) {
        const len = validFrames(this.inLengths, n, T),
          outLen = this.outFrames(len);
        for (let o = 0; o < outLen; o++) {
          const t = o * this.stride - this.padBefore + k;
          if (t < 0 || t >= len) continue;
          from[count] = (n * OT + o) * KC + k * C;
          to[count++] = (n * T + t) * C;
        }
      }
      this.backend.copyRows(dcol, from, dx.data, to, count, C, true);
    }
    return dx;
  }
}
