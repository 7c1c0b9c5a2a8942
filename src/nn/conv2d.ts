import { Tensor } from '../tensor/tensor.ts';
import type { ActivationKind, Backend, Conv2DGeometry } from '../kernels/backend.ts';
import { BaseLayer, type ForwardContext, type ParamSpec } from './layer.ts';
import type { Padding } from './spec.ts';
import { windowGeometry } from './windowGeometry.ts';

/** 2-D convolution over NHWC images with weights [KH, KW, C, F], optional bias, fused activation. */
export class Conv2D extends BaseLayer {
  readonly outputShape: readonly number[];
  private readonly geometry: Omit<Conv2DGeometry, 'N'>;
  private w!: Float32Array; private b: Float32Array | null = null;
  private dw!: Float32Array; private db: Float32Array | null = null;
  private x: Tensor | null = null;
  private y: Tensor | null = null;

  constructor(backend: Backend, name: string, inputShape: readonly number[], readonly filters: number,
              kernelSize: [number, number], strides: [number, number], padding: Padding,
              readonly activation: ActivationKind, readonly useBias: boolean) {
    super(backend, name, inputShape);
    const g = windowGeometry(inputShape, kernelSize, strides, padding, 'kernel', (m) => this.error(m));
    this.geometry = { ...g, F: filters };
    this.outputShape = [g.OH, g.OW, filters];
  }

  override params(): ParamSpec[] {
    const { KH, KW, C, F } = this.geometry;
    const fanIn = KH * KW * C, fanOut = KH * KW * F;
    const kernel: ParamSpec = {
      name: 'kernel', shape: [KH, KW, C, F],
      init: this.activation === 'relu' || this.activation === 'clippedRelu' ? 'heNormal' : 'glorotUniform',
      fanIn, fanOut,
    };
    return this.useBias ? [kernel, { name: 'bias', shape: [F], init: 'zeros', fanIn, fanOut }] : [kernel];
  }

  override bind(params: Float32Array[], grads: Float32Array[]): void {
    this.w = params[0]!; this.dw = grads[0]!;
    if (this.useBias) { this.b = params[1]!; this.db = grads[1]!; }
  }

  forward(x: Tensor, _ctx: ForwardContext): Tensor {
    const g = { ...this.geometry, N: x.batch };
    const y = new Tensor([g.N, g.OH, g.OW, g.F], this.buffer('y', g.N * g.OH * g.OW * g.F));
    this.backend.conv2dForward(x.data, this.w, this.b, y.data, g);
    if (this.activation !== 'linear') this.backend.activationForward(this.activation, y.data, y.data);
    this.x = x; this.y = y;
    return y;
  }

  backward(dy: Tensor, needInputGrad = true): Tensor | null {
    const g = { ...this.geometry, N: dy.batch };
    let dz = dy.data;
    if (this.activation !== 'linear') {
      dz = this.buffer('dz', dy.size);
      this.backend.activationBackward(this.activation, this.y!.data, dy.data, dz);
    }
    this.backend.conv2dBackwardFilter(this.x!.data, dz, this.dw, this.db, g);
    if (!needInputGrad) return null;
    const dx = new Tensor([g.N, g.H, g.W, g.C], this.buffer('dx', g.N * g.H * g.W * g.C));
    this.backend.conv2dBackwardData(dz, this.w, dx.data, g);
    return dx;
  }
}
