import { Tensor } from '../tensor/tensor.ts';
import type { Backend, Pool2DGeometry } from '../kernels/backend.ts';
import { BaseLayer, BufferPool, type ForwardContext } from './layer.ts';
import type { Padding } from './spec.ts';
import { windowGeometry } from './windowGeometry.ts';

/** Max or average pooling over NHWC images. */
export class Pool2D extends BaseLayer {
  readonly outputShape: readonly number[];
  readonly geometry: Omit<Pool2DGeometry, 'N'>;
  private argmax: Int32Array = new Int32Array(0);

  constructor(backend: Backend, name: string, inputShape: readonly number[], readonly mode: 'max' | 'avg',
              poolSize: [number, number], strides: [number, number], padding: Padding,
              tile?: { geometry: Omit<Pool2DGeometry, 'N'>; pool: BufferPool }) {
    super(backend, name, inputShape, tile?.pool);
    this.geometry = tile?.geometry ?? windowGeometry(inputShape, poolSize, strides, padding, 'pool window', (m) => this.error(m));
    this.outputShape = [this.geometry.OH, this.geometry.OW, this.geometry.C];
  }

  /** The same pooling on a spatial tile (its own input size, leading padding and output size), see Conv2D.tile. */
  tile(geometry: Omit<Pool2DGeometry, 'N'>, pool: BufferPool): Pool2D {
    const { KH, KW, strideH, strideW, H, W, C } = geometry;
    return new Pool2D(this.backend, this.name, [H, W, C], this.mode, [KH, KW], [strideH, strideW], 'valid', { geometry, pool });
  }

  forward(x: Tensor, _ctx: ForwardContext): Tensor {
    const g = { ...this.geometry, N: x.batch };
    const size = g.N * g.OH * g.OW * g.C;
    const y = new Tensor([g.N, g.OH, g.OW, g.C], this.buffer('y', size));
    if (this.mode === 'max') {
      this.argmax = this.pool.i32('argmax', size);
      this.backend.maxPoolForward(x.data, y.data, this.argmax, g);
    } else {
      this.backend.avgPoolForward(x.data, y.data, g);
    }
    return y;
  }

  savedForBackward(): readonly ArrayBufferView[] {
    return this.mode === 'max' ? [this.argmax] : [];
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
