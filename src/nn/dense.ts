import { Tensor } from '../tensor/tensor.ts';
import { backwardReadsInput, type ActivationKind } from '../kernels/activation.ts';
import type { Backend } from '../kernels/backend.ts';
import { BaseLayer, type ForwardContext, type ParamSpec } from './layer.ts';
import { isSequenceShape, keepLengths } from './sequence.ts';
import type { RowBlockSource } from './residency.ts';
import { backwardInRowBlocks, forwardInRowBlocks } from './denseRowBlocks.ts';

/**
 * y = act(x·W + b) with W stored [in, out]. On a sequence [T, F] it applies per frame: the N·T
 * frames are the rows of one gemm, and frames past a sample's length (ForwardContext.lengths) give 0.
 */
export class Dense extends BaseLayer {
  readonly outputShape: readonly number[];
  readonly inFeatures: number;
  private w!: Float32Array;
  private b: Float32Array | null = null;
  private dw!: Float32Array;
  private db: Float32Array | null = null;
  private x: Tensor | null = null;
  /** what the activation's backward reads: the output, or for gelu the pre-activation */
  private y: Tensor | null = null;
  private lengths: Int32Array | undefined;
  private get keepsZ(): boolean {
    return backwardReadsInput(this.activation);
  }

  constructor(
    backend: Backend,
    name: string,
    inputShape: readonly number[],
    readonly units: number,
    readonly activation: ActivationKind,
    readonly useBias: boolean,
  ) {
    super(backend, name, inputShape);
    if (inputShape.length !== 1 && !isSequenceShape(inputShape)) {
      throw this.error(
        `expects a flat input but receives shape [${inputShape.join(', ')}]; add a flatten layer before it ` +
          '(a sequence [frames, features] is accepted too: dense then applies per frame)',
      );
    }
    this.inFeatures = inputShape[inputShape.length - 1]!;
    this.outputShape = inputShape.length === 1 ? [units] : [inputShape[0]!, units];
  }

  override params(): ParamSpec[] {
    const kernel: ParamSpec = {
      name: 'kernel',
      shape: [this.inFeatures, this.units],
      init: this.activation === 'relu' || this.activation === 'clippedRelu' ? 'heNormal' : 'glorotUniform',
      fanIn: this.inFeatures,
      fanOut: this.units,
    };
    return this.useBias
      ? [kernel, { name: 'bias', shape: [this.units], init: 'zeros', fanIn: this.inFeatures, fanOut: this.units }]
      : [kernel];
  }

  override bind(params: Float32Array[], grads: Float32Array[]): void {
    this.w = params[0]!;
    this.dw = grads[0]!;
    if (this.useBias) {
      this.b = params[1]!;
      this.db = grads[1]!;
    }
  }

  /**
   * The kernel gathered a block of rows at a time (ZeRO stage 3's `rowBlockBytes`,
   * denseRowBlocks.ts): the async passes then run this layer through them; null: bound whole.
   */
  useRowBlocks(blocks: RowBlockSource | null): void {
    this.rowBlocks = blocks;
  }
  private rowBlocks: RowBlockSource | null = null;

  get needsAsync(): boolean {
    return this.rowBlocks !== null;
  }

  forward(x: Tensor, ctx: ForwardContext): Tensor {
    if (this.rowBlocks) throw this.error('its weights are gathered in row blocks: run the model asynchronously');
    const z = this.preActivation(x);
    this.backend.gemm(false, false, z.size / this.units, this.units, this.inFeatures, 1, x.data, this.w, 0, z.data);
    if (this.b) this.backend.biasAdd(z.data, this.b, z.data, z.size / this.units, this.units);
    return this.activate(x, z, ctx);
  }

  async forwardAsync(x: Tensor, ctx: ForwardContext): Promise<Tensor> {
    if (!this.rowBlocks) return this.forward(x, ctx);
    const z = this.preActivation(x),
      n = z.size / this.units;
    await forwardInRowBlocks(this.backend, this.rowBlocks, x.data, n, this.inFeatures, this.units, z.data, (len) =>
      this.buffer('xBlock', len),
    );
    return this.activate(x, z, ctx);
  }

  /** The array z = x·W + b is computed into (rows: samples, or every frame of every sample of a sequence batch). */
  private preActivation(x: Tensor): Tensor {
    const n = x.size / this.inFeatures;
    // gelu's backward reads the pre-activation z, so it gets its own array; otherwise y = act(z) in place
    return new Tensor([...x.shape.slice(0, -1), this.units], this.buffer(this.keepsZ ? 'z' : 'y', n * this.units));
  }

  /** y = act(z), padded frames zeroed; what backward reads kept. */
  private activate(x: Tensor, z: Tensor, ctx: ForwardContext): Tensor {
    const y = this.keepsZ ? new Tensor(z.shape, this.buffer('y', z.size)) : z;
    if (this.activation !== 'linear') this.backend.activationForward(this.activation, z.data, y.data);
    this.lengths = x.shape.length === 3 ? keepLengths(this.pool, ctx.lengths) : undefined;
    if (this.lengths) this.backend.zeroPadding(y.data, x.shape[0]!, x.shape[1]!, this.units, this.lengths);
    this.x = x;
    this.y = this.keepsZ ? z : y;
    return y;
  }

  savedForBackward(): readonly ArrayBufferView[] {
    const saved: ArrayBufferView[] = this.x ? [this.x.data] : [];
    if (this.y && this.activation !== 'linear') saved.push(this.y.data);
    return saved;
  }

  backward(dy: Tensor, needInputGrad = true): Tensor | null {
    if (this.rowBlocks) throw this.error('its weights are gathered in row blocks: run the model asynchronously');
    const n = dy.size / this.units;
    const dz = this.preActivationGrad(dy);
    this.backend.gemm(true, false, this.inFeatures, this.units, n, 1, this.x!.data, dz, 1, this.dw);
    if (this.db) this.backend.biasGrad(dz, this.db, n, this.units);
    if (!needInputGrad) return null;
    const dx = new Tensor([...dy.shape.slice(0, -1), this.inFeatures], this.buffer('dx', n * this.inFeatures));
    this.backend.gemm(false, true, n, this.inFeatures, this.units, 1, dz, this.w, 0, dx.data);
    return dx;
  }

  async backwardAsync(dy: Tensor, needInputGrad = true): Promise<Tensor | null> {
    if (!this.rowBlocks) return this.backward(dy, needInputGrad);
    const n = dy.size / this.units;
    const dz = this.preActivationGrad(dy);
    const dx = needInputGrad
      ? new Tensor([...dy.shape.slice(0, -1), this.inFeatures], this.buffer('dx', n * this.inFeatures))
      : null;
    await backwardInRowBlocks(
      this.backend,
      this.rowBlocks,
      this.x!.data,
      dz,
      n,
      this.inFeatures,
      this.units,
      dx?.data ?? null,
      (key, len) => this.buffer(key === 'x' ? 'xBlock' : 'dxBlock', len),
    );
    return dx;
  }

  /** dL/dz from dL/dy: the activation's backward, padded frames' gradient dropped (their outputs are constant zeros). */
  private preActivationGrad(dy: Tensor): Float32Array {
    if (this.activation === 'linear' && !this.lengths) return dy.data;
    const dz = this.buffer('dz', dy.size);
    this.backend.activationBackward(this.activation, this.y!.data, dy.data, dz);
    if (this.lengths) this.backend.zeroPadding(dz, dy.shape[0]!, dy.shape[1]!, this.units, this.lengths);
    return dz;
  }
}
