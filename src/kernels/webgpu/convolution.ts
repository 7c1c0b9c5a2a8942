/**
 * The Backend's convolution kernels (src/kernels/convKernels.ts) on the GPU, as implicit gemms:
 * each product's tiles are gathered straight from the image or the output gradient
 * (convShaders.ts), so no im2col matrix is ever stored. The filter gradient, a short and deep
 * product (KH·KW·C × F over every output pixel), splits its depth over workgroups and adds the
 * slices in order; with the bias gradient it is ACCUMULATED into dw and db.
 */
import type { Conv2DGeometry } from '../convKernels.ts';
import type { ArrayUse } from './arrayBindings.ts';
import { addSlices, columnSums } from './columnSums.ts';
import { BACKWARD_DATA, CONV_FIELDS, filterOperands, forwardOperands } from './convShaders.ts';
import { checkLengths, type GpuArray } from './gpuArray.ts';
import type { GpuContext } from './gpuContext.ts';
import { gatheredGemm, splitK } from './implicitGemm.ts';
import type { Params } from './params.ts';
import { scratchArray } from './scratch.ts';

function geometryFields(g: Conv2DGeometry): (p: Params) => void {
  return (p) =>
    p
      .u32(g.H)
      .u32(g.W)
      .u32(g.C)
      .u32(g.KH)
      .u32(g.KW)
      .u32(g.F)
      .u32(g.strideH)
      .u32(g.strideW)
      .u32(g.padTop)
      .u32(g.padLeft)
      .u32(g.OH)
      .u32(g.OW);
}

function checkSizes(g: Conv2DGeometry, arrays: [string, GpuArray | null, number][]): void {
  checkLengths(
    'conv2d',
    `the geometry N${g.N} ${g.H}×${g.W}×${g.C} k${g.KH}×${g.KW} F${g.F} → ${g.OH}×${g.OW}`,
    arrays,
  );
}

/**
 * Records y[N,OH,OW,F] = conv(x[N,H,W,C], w[KH,KW,C,F]) (+ bias[F] when given); y overwritten.
 * `rowsPerDispatch` (output pixels per dispatch, a multiple of 64) exists for tests.
 */
export function conv2dForward(
  ctx: GpuContext,
  x: GpuArray,
  w: GpuArray,
  bias: GpuArray | null,
  y: GpuArray,
  g: Conv2DGeometry,
  rowsPerDispatch?: number,
): void {
  const P = g.N * g.OH * g.OW;
  checkSizes(g, [
    ['x', x, g.N * g.H * g.W * g.C],
    ['w', w, g.KH * g.KW * g.C * g.F],
    ['bias', bias, g.F],
    ['y', y, P * g.F],
  ]);
  const uses: ArrayUse[] = [
    { name: 'x', array: x },
    { name: 'w', array: w },
    ...(bias ? [{ name: 'bias', array: bias }] : []),
    { name: 'c', array: y, write: true },
  ];
  gatheredGemm(
    ctx,
    {
      name: bias ? 'convForwardBias' : 'convForward',
      operands: forwardOperands(!!bias),
      uses,
      fields: CONV_FIELDS,
      setFields: geometryFields(g),
      M: P,
      N: g.F,
      K: g.KH * g.KW * g.C,
    },
    rowsPerDispatch,
  );
}

/** Records dx[N,H,W,C] = the gradient of the convolution w.r.t. its input; dx overwritten. */
export function conv2dBackwardData(ctx: GpuContext, dy: GpuArray, w: GpuArray, dx: GpuArray, g: Conv2DGeometry): void {
  checkSizes(g, [
    ['dy', dy, g.N * g.OH * g.OW * g.F],
    ['w', w, g.KH * g.KW * g.C * g.F],
    ['dx', dx, g.N * g.H * g.W * g.C],
  ]);
  gatheredGemm(ctx, {
    name: 'convBackwardData',
    operands: BACKWARD_DATA,
    uses: [
      { name: 'dy', array: dy },
      { name: 'w', array: w },
      { name: 'c', array: dx, write: true },
    ],
    fields: CONV_FIELDS,
    setFields: geometryFields(g),
    M: g.N * g.H * g.W,
    N: g.C,
    K: g.KH * g.KW * g.F,
  });
}

/** Records dw[KH,KW,C,F] += the gradient w.r.t. the filter, and db[F] += Σ dy when db is given. */
export function conv2dBackwardFilter(
  ctx: GpuContext,
  x: GpuArray,
  dy: GpuArray,
  dw: GpuArray,
  db: GpuArray | null,
  g: Conv2DGeometry,
): void {
  const P = g.N * g.OH * g.OW;
  const M = g.KH * g.KW * g.C;
  checkSizes(g, [
    ['x', x, g.N * g.H * g.W * g.C],
    ['dy', dy, P * g.F],
    ['dw', dw, M * g.F],
    ['db', db, g.F],
  ]);
  if (P === 0) return;
  const { splits, kChunk } = splitK(Math.ceil(M / 64) * Math.ceil(g.F / 64), P);
  const direct = splits === 1;
  const into = direct ? dw : scratchArray(ctx, splits * M * g.F);
  gatheredGemm(ctx, {
    name: direct ? 'convFilterAccumulate' : 'convFilterSlices',
    operands: filterOperands(direct),
    uses: [
      { name: 'x', array: x },
      { name: 'dy', array: dy },
      { name: 'c', array: into, write: true },
    ],
    fields: CONV_FIELDS,
    setFields: geometryFields(g),
    M,
    N: g.F,
    K: P,
    splits,
    kChunk,
  });
  if (!direct) addSlices(ctx, into, splits, dw, M * g.F, true);
  if (db)
    columnSums(
      ctx,
      {
        name: 'sum',
        inputs: [{ name: 'v', array: dy }],
        term: '  return vec2f(ld_v(i), 0.0);',
        terms: 1,
        out: db,
        accumulate: true,
      },
      P,
      g.F,
    );
}
