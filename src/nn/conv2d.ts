import { Tensor } from '../tensor/tensor.ts';
import { backwardReadsInput, type ActivationKind } from '../kernels/activation.ts';
import type { Backend } from '../kernels/backend.ts';
import type { Conv2DGeometry } from '../kernels/convKernels.ts';
import type { Pool2DGeometry } from '../kernels/poolKernels.ts';
import { BaseLayer, type BufferPool, type ForwardContext, type ParamSpec } from './layer.ts';
import type { Padding } from './spec.ts';
import { windowGeometry } from './windowGeometry.ts';
import { gradThroughActivation, markActivationOutput } from './activationFusion.ts';

/** A window geometry without the batch: what a spatial tile changes (H, W, padding, output size). */
export type ConvGeometry = Omit<Conv2DGeometry, 'N'>;

/** 2-D convolution over NHWC images with weights [KH, KW, C, F], optional bias, fused activation. */
export class Conv2D extends BaseLayer {
  readonly outputShape: readonly number[];
  readonly geometry: ConvGeometry;
  private w!: Float32Array;
  private b: Float32Array | null = null;
  private dw!: Float32Array;
  private db: Float32Array | null = null;
  private x: Tensor | null = null;
  /** what the activation's backward reads: the output, or for gelu the pre-activation */
  private y: Tensor | null = null;
  private get keepsZ(): boolean {
    return backwardReadsInput(this.activation);
  }

  constructor(
    backend: Backend,
    name: string,
    inputShape: readonly number[],
    readonly filters: number,
    kernelSize: [number, number],
    strides: [number, number],
    padding: Padding,
    readonly activation: ActivationKind,
    readonly useBias: boolean,
    tile?: { geometry: ConvGeometry; pool: BufferPool },
  ) {
    super(backend, name, inputShape, tile?.pool);
    const g =
      tile?.geometry ?? windowGeometry(inputShape, kernelSize, strides, padding, 'kernel', (m) => this.error(m));
    this.geometry = { ...g, F: filters };
    this.outputShape = [g.OH, g.OW, filters];
  }

  /**
   * The same convolution on a spatial tile: `geometry` gives the tile's input size, its own leading
   * padding and output size; weights and gradients are this layer's (gradients accumulate), and
   * scratch arrays come from `pool` (tiles run one after another may share one).
   */
  tile(geometry: ConvGeometry, pool: BufferPool): Conv2D {
    const { KH, KW, strideH, strideW, H, W, C } = geometry;
    const t = new Conv2D(
      this.backend,
      this.name,
      [H, W, C],
      this.filters,
      [KH, KW],
      [strideH, strideW],
      'valid',
      this.activation,
      this.useBias,
      { geometry, pool },
    );
    t.w = this.w;
    t.b = this.b;
    t.dw = this.dw;
    t.db = this.db;
    return t;
  }

  override params(): ParamSpec[] {
    const { KH, KW, C, F } = this.geometry;
    const fanIn = KH * KW * C,
      fanOut = KH * KW * F;
    const kernel: ParamSpec = {
      name: 'kernel',
      shape: [KH, KW, C, F],
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

  forward(x: Tensor, _ctx: ForwardContext): Tensor {
    const g = { ...this.geometry, N: x.batch };
    const size = g.N * g.OH * g.OW * g.F;
    // gelu's backward reads the pre-activation z, so it gets its own array; otherwise y = act(z) in place
    const z = new Tensor([g.N, g.OH, g.OW, g.F], this.buffer(this.keepsZ ? 'z' : 'y', size));
    const y = this.keepsZ ? new Tensor(z.shape, this.buffer('y', size)) : z;
    // y = act(z) in the convolution's own pass where the backend fuses it (not when z is kept)
    const fused =
      !this.keepsZ &&
      this.activation !== 'linear' &&
      this.backend.conv2dForwardActivation?.(this.activation, x.data, this.w, this.b, y.data, g) === true;
    if (!fused) {
      this.backend.conv2dForward(x.data, this.w, this.b, z.data, g);
      if (this.activation !== 'linear') this.backend.activationForward(this.activation, z.data, y.data);
    }
    this.x = x;
    this.y = this.keepsZ ? z : y;
    markActivationOutput(y, this.activation);
    return y;
  }

  savedForBackward(): readonly ArrayBufferView[] {
    const saved: ArrayBufferView[] = this.x ? [this.x.data] : [];
    if (this.y && this.activation !== 'linear') saved.push(this.y.data);
    return saved;
  }

  backward(dy: Tensor, needInputGrad = true): Tensor | null {
    const g = { ...this.geometry, N: dy.batch };
    let dz = dy.data;
    // a max pool after this layer may have applied the activation's backward already (activationFusion.ts)
    if (this.activation !== 'linear' && !gradThroughActivation(dy, this.y)) {
      dz = this.buffer('dz', dy.size);
      this.backend.activationBackward(this.activation, this.y!.data, dy.data, dz);
    }
    return this.backwardFrom(dz, g, needInputGrad);
  }

  /**
   * This convolution, its activation and the max pool `pool` in one backend pass
   * (Backend.convPoolForward; the convolution's output is never written), into the pool's `y` and
   * `argmax`; false, computing nothing, when the backend does not fuse them. Its backward is then
   * backwardPooled (see convPool.ts).
   */
  forwardPooled(x: Tensor, pool: Pool2DGeometry, y: Float32Array, argmax: Int32Array): boolean {
    if (this.keepsZ || !this.backend.convPoolForward) return false;
    const g = { ...this.geometry, N: x.batch };
    if (!this.backend.convPoolForward(this.activation, x.data, this.w, this.b, y, argmax, g, pool)) return false;
    this.x = x;
    this.y = null;
    return true;
  }

  /**
   * As the first layer after forwardPooled (no input gradient): the filter gradient straight from
   * the pool's output gradient `dyPool`, this layer's activation backward applied inside on the
   * pool's output `yPool` (Backend.conv2dBackwardFilterPooled with `through`); false, computing
   * nothing, when the backend does not.
   */
  filterGradThrough(dyPool: Float32Array, yPool: Float32Array, argmax: Int32Array, pool: Pool2DGeometry): boolean {
    const g = { ...this.geometry, N: pool.N };
    return (
      this.backend.conv2dBackwardFilterPooled?.(this.x!.data, dyPool, argmax, this.dw, this.db, g, pool, {
        kind: this.activation,
        y: yPool,
      }) === true
    );
  }

  /**
   * Backward after forwardPooled, from the pool's output gradient already through this layer's
   * activation backward: the filter gradient straight from it where the backend can and no input
   * gradient is needed (a first layer), else through the convolution's output gradient.
   */
  backwardPooled(
    dyPool: Float32Array,
    argmax: Int32Array,
    pool: Pool2DGeometry,
    needInputGrad: boolean,
  ): Tensor | null {
    const g = { ...this.geometry, N: pool.N };
    if (
      !needInputGrad &&
      this.backend.conv2dBackwardFilterPooled?.(this.x!.data, dyPool, argmax, this.dw, this.db, g, pool)
    )
      return null;
    const dz = this.buffer('dz', g.N * g.OH * g.OW * g.F);
    this.backend.maxPoolBackward(dyPool, argmax, dz, pool);
    return this.backwardFrom(dz, g, needInputGrad);
  }

  /** The filter, bias and (when needed) input gradients from dz, the convolution's output gradient. */
  private backwardFrom(dz: Float32Array, g: Conv2DGeometry, needInputGrad: boolean): Tensor | null {
    this.backend.conv2dBackwardFilter(this.x!.data, dz, this.dw, this.db, g);
    if (!needInputGrad) return null;
    const dx = new Tensor([g.N, g.H, g.W, g.C], this.buffer('dx', g.N * g.H * g.W * g.C));
    this.backend.conv2dBackwardData(dz, this.w, dx.data, g);
    return dx;
  }
}
