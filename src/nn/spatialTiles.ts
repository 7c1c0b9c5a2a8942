import type { Tensor } from '../tensor/tensor.ts';
import type { Backend } from '../kernels/backend.ts';
import { evenSlice } from '../tensor/shape.ts';
import { BufferPool, type ForwardContext, type Layer } from './layer.ts';
import { Conv2D, type ConvGeometry } from './conv2d.ts';
import { Pool2D } from './pool2d.ts';
import { ActivationLayer } from './activationLayer.ts';
import { tileWindowGeometry, type AxisRange } from './windowGeometry.ts';
import { convPoolPairs, type ConvPool } from './convPool.ts';

/**
 * Planning spatial tiles through a stack of convolution, pooling and activation layers: for the
 * output rows/columns a tile owns, the input range of every layer going backwards (the receptive
 * field, strides and 'same' padding included), so that a tile computed on its input range — its
 * own part plus the halo — gives exactly those outputs of the whole image.
 */

export interface TilePlan {
  /** tile index (row-major over the tilesH × tilesW grid) */
  index: number;
  /** rows and columns of the stack's output this tile computes */
  outRows: AxisRange;
  outCols: AxisRange;
  /** rows and columns of the stack's input it reads (own part plus halo) */
  inRows: AxisRange;
  inCols: AxisRange;
  /** per layer, what to build the tile's layer from */
  layers: ({ geometry: ConvGeometry } | { shape: [number, number, number] })[];
}

/** The layers a spatial split can cut: windows are local, activations pointwise. */
export function checkSpatialStack(layers: readonly Layer[]): void {
  if (layers.length === 0) throw new Error('spatial split: the stack has no layers');
  for (const l of layers) {
    if (!(l instanceof Conv2D || l instanceof Pool2D || l instanceof ActivationLayer) || l.inputShape.length !== 3) {
      throw new Error(
        `${l.name}: cannot be part of a spatially split stack; only conv2d, maxPool2d, avgPool2d and ` +
          `activation layers on images can (they read a bounded neighbourhood); end the split before this layer`,
      );
    }
  }
}

/**
 * Tiles of a grid `tilesH` × `tilesW` over the stack's output, as even as possible (the first
 * tiles get the extra row). Errors name the stack's last layer when a tile would be empty.
 */
export function planTiles(layers: readonly Layer[], tilesH: number, tilesW: number): TilePlan[] {
  checkSpatialStack(layers);
  const last = layers[layers.length - 1]!;
  const [OH, OW] = last.outputShape as [number, number, number];
  for (const [tiles, size, axis] of [
    [tilesH, OH, 'height'],
    [tilesW, OW, 'width'],
  ] as const) {
    if (!Number.isInteger(tiles) || tiles < 1)
      throw new Error(`${last.name}: the number of tiles along ${axis} must be a positive integer, got ${tiles}`);
    if (tiles > size) {
      throw new Error(
        `${last.name}: cannot split ${size} output ${axis === 'height' ? 'rows' : 'columns'} into ${tiles} tiles along ${axis}; ` +
          `use at most ${size} tiles (or devices) along ${axis}`,
      );
    }
  }
  const plans: TilePlan[] = [];
  for (let i = 0; i < tilesH; i++) {
    for (let j = 0; j < tilesW; j++) {
      const outRows = evenSlice(OH, tilesH, i),
        outCols = evenSlice(OW, tilesW, j);
      let rows = outRows,
        cols = outCols;
      const tileLayers: TilePlan['layers'] = [];
      for (let k = layers.length - 1; k >= 0; k--) {
        const l = layers[k]!;
        if (l instanceof Conv2D || l instanceof Pool2D) {
          const t = tileWindowGeometry(
            { ...l.geometry, F: l instanceof Conv2D ? l.filters : l.geometry.C },
            rows,
            cols,
          );
          tileLayers.unshift({ geometry: t.geometry });
          rows = t.inRows;
          cols = t.inCols;
        } else {
          tileLayers.unshift({ shape: [rows.end - rows.start, cols.end - cols.start, l.inputShape[2]!] });
        }
      }
      plans.push({ index: plans.length, outRows, outCols, inRows: rows, inCols: cols, layers: tileLayers });
    }
  }
  return plans;
}

/**
 * One tile's copy of the stack: the same weights and gradient views (gradients accumulate), the
 * tile's geometry, scratch arrays from `pools` (one per layer; tiles run one after another share).
 */
export class TileStack {
  readonly layers: Layer[];

  /** conv2d → max pool pairs the backend runs as one step, as in Sequential (convPool.ts) */
  private readonly pairs: (ConvPool | undefined)[];

  constructor(
    backend: Backend,
    stack: readonly Layer[],
    readonly plan: TilePlan,
    pools: BufferPool[],
  ) {
    this.layers = stack.map((l, k) => {
      const p = plan.layers[k]!;
      if (l instanceof Conv2D) return l.tile((p as { geometry: ConvGeometry }).geometry, pools[k]!);
      if (l instanceof Pool2D) return l.tile((p as { geometry: ConvGeometry }).geometry, pools[k]!);
      const a = l as ActivationLayer;
      return new ActivationLayer(backend, a.name, (p as { shape: number[] }).shape, a.kind, a.cap, pools[k]!);
    });
    this.pairs = convPoolPairs(backend, this.layers);
  }

  get inputShape(): readonly number[] {
    return this.layers[0]!.inputShape;
  }
  get outputShape(): readonly number[] {
    return this.layers[this.layers.length - 1]!.outputShape;
  }

  forward(x: Tensor, ctx: ForwardContext): Tensor {
    let h = x;
    for (let k = 0; k < this.layers.length; k++) {
      const pair = this.pairs[k];
      if (pair) {
        h = pair.forward(h, ctx);
        k++;
      } else h = this.layers[k]!.forward(h, ctx);
    }
    return h;
  }

  /** dL/d(tile input); parameter gradients accumulate into the stack's views. */
  backward(dy: Tensor): Tensor {
    let g: Tensor = dy;
    for (let k = this.layers.length - 1; k >= 0; k--) {
      const pair = k > 0 ? this.pairs[k - 1] : undefined;
      if (pair) {
        g = pair.backward(g, true)!;
        k--;
      } else g = this.layers[k]!.backward(g, true)!;
    }
    return g;
  }

  /** The distinct arrays this tile's forward keeps for backward. */
  savedArrays(): ArrayBufferView[] {
    const seen = new Set<ArrayBufferView>();
    for (const l of this.layers) for (const a of l.savedForBackward?.() ?? []) seen.add(a);
    return [...seen];
  }

  /** Bytes of the arrays this tile's forward keeps for backward (distinct arrays). */
  savedBytes(): number {
    return this.savedArrays().reduce((n, a) => n + a.byteLength, 0);
  }
}

/** One BufferPool per stack layer. */
export function layerPools(backend: Backend, count: number): BufferPool[] {
  return Array.from({ length: count }, () => new BufferPool(backend));
}
