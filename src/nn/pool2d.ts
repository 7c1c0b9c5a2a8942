import { Tensor } from '../tensor/tensor.ts';
import type { Backend } from '../kernels/backend.ts';
import type { Pool2DGeometry } from '../kernels/poolKernels.ts';
import { BaseLayer, type BufferPool, type ForwardContext } from './layer.ts';
import type { Padding } from './spec.ts';
import { windowGeometry } from './windowGeometry.ts';
import { activationOf, markGradThroughActivation, type ActivationOutput } from './activationFusion.ts';
import type { Conv2D } from './conv2d.ts';

/** Max or average pooling over NHWC images. */
export class Pool2D extends BaseLayer {
  readonly outputShape: readonly number[];
  readonly geometry: Omit<Pool2DGeometry, 'N'>;
  private argmax: Int32Array = new Int32Array(0);
  /** the activation whose backward this max pool takes over (activationFusion.ts), its output x, and this pool's y */
  private absorbed: { act: ActivationOutput; x: Tensor; y: Tensor } | null = null;

  constructor(
    backend: Backend,
    name: string,
    inputShape: readonly number[],
    readonly mode: 'max' | 'avg',
    poolSize: [number, number],
    strides: [number, number],
    padding: Padding,
    tile?: { geometry: Omit<Pool2DGeometry, 'N'>; pool: BufferPool },
  ) {
    super(backend, name, inputShape, tile?.pool);
    this.geometry =
      tile?.geometry ?? windowGeometry(inputShape, poolSize, strides, padding, 'pool window', (m) => this.error(m));
    this.outputShape = [this.geometry.OH, this.geometry.OW, this.geometry.C];
  }

  /** The same pooling on a spatial tile (its own input size, leading padding and output size), see Conv2D.tile. */
  tile(geometry: Omit<Pool2DGeometry, 'N'>, pool: BufferPool): Pool2D {
    const { KH, KW, strideH, strideW, H, W, C } = geometry;
    return new Pool2D(this.backend, this.name, [H, W, C], this.mode, [KH, KW], [strideH, strideW], 'valid', {
      geometry,
      pool,
    });
  }

  /** Windows that tile the input exactly (stride = window, no padding): what convPool.ts fuses. */
  get tiles(): boolean {
    const g = this.geometry;
    return this.mode === 'max' && g.strideH === g.KH && g.strideW === g.KW && g.padTop === 0 && g.padLeft === 0;
  }

  /**
   * `conv`'s forward and this pool's in one backend pass (Conv2D.forwardPooled), or null when the
   * backend does not fuse them (nothing computed). Then backwardBefore is its backward.
   */
  forwardAfter(conv: Conv2D, x: Tensor): Tensor | null {
    const g = { ...this.geometry, N: x.batch };
    const size = g.N * g.OH * g.OW * g.C;
    const y = new Tensor([g.N, g.OH, g.OW, g.C], this.buffer('y', size));
    const argmax = this.pool.i32('argmax', size);
    if (!conv.forwardPooled(x, g, y.data, argmax)) return null;
    this.argmax = argmax;
    this.absorbed = { act: { kind: conv.activation }, x, y };
    return y;
  }

  /** Backward after forwardAfter: this pool's and `conv`'s, the activation's on this pool's output (activationFusion.ts). */
  backwardBefore(conv: Conv2D, dy: Tensor, needInputGrad: boolean): Tensor | null {
    const g = { ...this.geometry, N: dy.batch };
    // a first layer: its filter gradient from dy directly, the activation's backward inside the same pass
    if (
      !needInputGrad &&
      conv.activation !== 'linear' &&
      conv.filterGradThrough(dy.data, this.absorbed!.y.data, this.argmax, g)
    )
      return null;
    let dyAct = dy.data;
    if (conv.activation !== 'linear') {
      dyAct = this.buffer('dyAct', dy.size);
      this.backend.activationBackward(conv.activation, this.absorbed!.y.data, dy.data, dyAct);
    }
    return conv.backwardPooled(dyAct, this.argmax, g, needInputGrad);
  }

  forward(x: Tensor, _ctx: ForwardContext): Tensor {
    const g = { ...this.geometry, N: x.batch };
    const size = g.N * g.OH * g.OW * g.C;
    const y = new Tensor([g.N, g.OH, g.OW, g.C], this.buffer('y', size));
    if (this.mode === 'max') {
      this.argmax = this.pool.i32('argmax', size);
      this.backend.maxPoolForward(x.data, y.data, this.argmax, g);
      // windows that do not overlap: the input's activation backward can run on y (see activationFusion.ts)
      const act = g.strideH >= g.KH && g.strideW >= g.KW ? activationOf(x) : undefined;
      this.absorbed = act ? { act, x, y } : null;
    } else {
      this.backend.avgPoolForward(x.data, y.data, g);
    }
    return y;
  }

  savedForBackward(): readonly ArrayBufferView[] {
    if (this.mode !== 'max') return [];
    return this.absorbed ? [this.argmax, this.absorbed.y.data] : [this.argmax];
  }

  backward(dy: Tensor, needInputGrad = true): Tensor | null {
    if (!needInputGrad) return null;
    const g = { ...this.geometry, N: dy.batch };
    const dx = new Tensor([g.N, g.H, g.W, g.C], this.buffer('dx', g.N * g.H * g.W * g.C));
    if (this.mode === 'avg') this.backend.avgPoolBackward(dy.data, dx.data, g);
    else if (!this.absorbed) this.backend.maxPoolBackward(dy.data, this.argmax, dx.data, g);
    else {
      const { act, x, y } = this.absorbed;
      const dyAct = this.buffer('dyAct', dy.size);
      this.backend.activationBackward(act.kind, y.data, dy.data, dyAct, act.cap);
      this.backend.maxPoolBackward(dyAct, this.argmax, dx.data, g);
      markGradThroughActivation(dx, x);
    }
    return dx;
  }
}
