import { Tensor } from '../tensor/tensor.ts';
import type { Backend, Pool2DGeometry } from '../kernels/backend.ts';
import { BaseLayer, type ForwardContext } from './layer.ts';
import type { Padding } from './spec.ts';
import { windowGeometry } from './windowGeometry.ts';

/** Max or average pooling over NHWC images. */
export class Pool2D extends BaseLayer {
  readonly outputShape: readonly number[];
  private readonly geometry: Omit<Pool2DGeometry, 'N'>;
  private argmax: Int32Array = new Int32Array(0);

  constructor(backend: Backend, name: string, inputShape: readonly number[], readonly mode: 'max' | 'avg',
              poolSize: [number, number], strides: [number, number], padding: Padding) {
    super(backend, name, inputShape);
    this.geometry = windowGeometry(inputShape, poolSize, strides, padding, 'pool window', (m) => this.error(m));
    this.outputShape = [this.geometry.OH, this.geometry.OW, this.geometry.C];
  }

  forward(x: Tensor, _ctx: ForwardContext): Tensor {
    const g = { ...this.geometry, N: x.batch };
    const size = g.N * g.OH * g.OW * g.C;
    const y = new Tensor([g.N, g.OH, g.OW, g.C], this.buffer('y', size));
    if (this.mode === 'max') {
      if (this.argmax.length !== size) this.argmax = new Int32Array(size);
      this.backend.maxPoolForward(x.data, y.data, this.argmax, g);
    } else {
      this.backend.avgPoolForward(x.data, y.data, g);
    }
    return y;
  }

  backward(dy: Tensor, needInputGrad = true): Tensor | null {
    if (!needInputGrad) return null;
    const g = { ...this.geometry, N: dy.batch };
    const dx = new Tensor([g.N, g.H, g.W, g.C], this.buffer('dx', g.N * g.H * g.W * g.C));
    if (this.mode === 'max') this.backend.maxPoolBackward(dy.data, this.argmax, dx.data, g);
    else this.backend.avgPoolBackward(dy.data, dx.data, g);
    return dx;
  }
}
