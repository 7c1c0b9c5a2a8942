/**
 * The Backend's pooling kernels (src/kernels/poolKernels.ts) on the GPU, with the js backend's
 * semantics (src/kernels/js/pool.ts): windows clipped to the image, so padding never wins a max nor
 * counts in an average; max pool's ties go to the first cell in (kh, kw) order, NaN wins. The
 * argmax array holds i32 flat indices into x (−1 for a window wholly in the padding): a GpuArray
 * read back as Float32Array is viewed as Int32Array over the same bytes. The backward passes
 * gather rather than scatter: each input cell sums the outputs whose windows hold it, in output
 * order, so max pool's gradient adds in js's order (the same bits) and no atomics are needed.
 */
import type { Pool2DGeometry } from '../poolKernels.ts';
import { bindArrays, cachedShader, linearGroups, linearMain } from './arrayBindings.ts';
import { checkLengths, type GpuArray } from './gpuArray.ts';
import type { GpuContext } from './gpuContext.ts';

const POOL_FIELDS =
  'count: u32, H: u32, W: u32, C: u32, KH: u32, KW: u32, sH: u32, sW: u32, padT: u32, padL: u32, OH: u32, OW: u32';

/** The output pixel of thread i, its window clipped to the image: rows [hLo, hHi), columns [wLo, wHi). */
const OUTPUT_WINDOW = /* wgsl */ `
  let c = i % p.C;
  let pix = i / p.C;
  let ow = pix % p.OW;
  let oh = (pix / p.OW) % p.OH;
  let n = pix / (p.OW * p.OH);
  let ih0 = i32(oh * p.sH) - i32(p.padT);
  let iw0 = i32(ow * p.sW) - i32(p.padL);
  let hLo = u32(max(ih0, 0));
  let hHi = u32(clamp(ih0 + i32(p.KH), 0, i32(p.H)));
  let wLo = u32(max(iw0, 0));
  let wHi = u32(clamp(iw0 + i32(p.KW), 0, i32(p.W)));`;

/** The input cell of thread i and the outputs whose windows hold it: [ohLo, ohEnd) × [owLo, owEnd). */
const INPUT_WINDOWS = /* wgsl */ `
  let c = i % p.C;
  let pix = i / p.C;
  let iw = pix % p.W;
  let ih = (pix / p.W) % p.H;
  let n = pix / (p.W * p.H);
  let ohLo = u32(max(i32(ih + p.padT + p.sH) - i32(p.KH), 0)) / p.sH;
  let ohEnd = min((ih + p.padT) / p.sH + 1u, p.OH);
  let owLo = u32(max(i32(iw + p.padL + p.sW) - i32(p.KW), 0)) / p.sW;
  let owEnd = min((iw + p.padL) / p.sW + 1u, p.OW);`;

const MAX_FORWARD = linearMain(
  'p.count',
  /* wgsl */ `${OUTPUT_WINDOW}
  if (hLo >= hHi || wLo >= wHi) {
    st_y(i, 0.0);
    st_argmax(i, -1);
    return;
  }
  var at = ((n * p.H + hLo) * p.W + wLo) * p.C + c;
  var best = ld_x(at);
  for (var ih = hLo; ih < hHi; ih++) {
    for (var iw = wLo; iw < wHi; iw++) {
      let j = ((n * p.H + ih) * p.W + iw) * p.C + c;
      let v = ld_x(j);
      // strictly greater keeps the first of ties; NaN (tested by its bits) wins, as in PyTorch
      if (v > best || (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u) {
        best = v;
        at = j;
      }
    }
  }
  st_y(i, best);
  st_argmax(i, i32(at));`,
);

const MAX_BACKWARD = linearMain(
  'p.count',
  /* wgsl */ `${INPUT_WINDOWS}
  var s = 0.0;
  for (var oh = ohLo; oh < ohEnd; oh++) {
    for (var ow = owLo; ow < owEnd; ow++) {
      let o = ((n * p.OH + oh) * p.OW + ow) * p.C + c;
      if (ld_argmax(o) == i32(i)) { s += ld_dy(o); }
    }
  }
  st_dx(i, s);`,
);

const AVG_FORWARD = linearMain(
  'p.count',
  /* wgsl */ `${OUTPUT_WINDOW}
  var s = 0.0;
  for (var ih = hLo; ih < hHi; ih++) {
    for (var iw = wLo; iw < wHi; iw++) { s += ld_x(((n * p.H + ih) * p.W + iw) * p.C + c); }
  }
  if (hLo < hHi && wLo < wHi) { s *= 1.0 / f32((hHi - hLo) * (wHi - wLo)); }
  st_y(i, s);`,
);

/** An output window's in-image cells, for the average's backward pass. */
const WINDOW_CELLS = /* wgsl */ `
fn windowCells(oh: u32, ow: u32) -> u32 {
  let ih0 = i32(oh * p.sH) - i32(p.padT);
  let iw0 = i32(ow * p.sW) - i32(p.padL);
  let rows = clamp(ih0 + i32(p.KH), 0, i32(p.H)) - max(ih0, 0);
  let cols = clamp(iw0 + i32(p.KW), 0, i32(p.W)) - max(iw0, 0);
  return u32(max(rows, 0) * max(cols, 0));
}`;

const AVG_BACKWARD =
  WINDOW_CELLS +
  linearMain(
    'p.count',
    /* wgsl */ `${INPUT_WINDOWS}
  var s = 0.0;
  for (var oh = ohLo; oh < ohEnd; oh++) {
    for (var ow = owLo; ow < owEnd; ow++) {
      s += ld_dy(((n * p.OH + oh) * p.OW + ow) * p.C + c) * (1.0 / f32(windowCells(oh, ow)));
    }
  }
  st_dx(i, s);`,
  );

function checkSizes(g: Pool2DGeometry, what: string, arrays: [string, GpuArray, number][]): void {
  checkLengths(what, `the geometry N${g.N} ${g.H}×${g.W}×${g.C} k${g.KH}×${g.KW} → ${g.OH}×${g.OW}`, arrays);
}

function run(
  ctx: GpuContext,
  name: string,
  body: string,
  uses: Parameters<typeof bindArrays>[0],
  count: number,
  g: Pool2DGeometry,
): void {
  if (count === 0) return;
  const bound = bindArrays(uses, POOL_FIELDS);
  const shader = cachedShader(name, bound, () => body);
  bound.params
    .u32(count)
    .u32(g.H)
    .u32(g.W)
    .u32(g.C)
    .u32(g.KH)
    .u32(g.KW)
    .u32(g.strideH)
    .u32(g.strideW)
    .u32(g.padTop)
    .u32(g.padLeft)
    .u32(g.OH)
    .u32(g.OW);
  ctx.dispatch({ shader, arrays: bound.arrays, params: bound.params, groups: linearGroups(count) });
}

const inputSize = (g: Pool2DGeometry) => g.N * g.H * g.W * g.C;
const outputSize = (g: Pool2DGeometry) => g.N * g.OH * g.OW * g.C;

/** Records y = the max over each window and argmax (i32) = its flat index into x. */
export function maxPoolForward(ctx: GpuContext, x: GpuArray, y: GpuArray, argmax: GpuArray, g: Pool2DGeometry): void {
  const n = outputSize(g);
  checkSizes(g, 'maxPoolForward', [
    ['x', x, inputSize(g)],
    ['y', y, n],
    ['argmax', argmax, n],
  ]);
  const uses = [
    { name: 'x', array: x },
    { name: 'y', array: y, write: true },
    { name: 'argmax', array: argmax, write: true, int: true },
  ];
  run(ctx, 'maxPoolForward', MAX_FORWARD, uses, n, g);
}

/** Records dx (overwritten) = dy routed through argmax, as maxPoolForward wrote it; overlapping windows add. */
export function maxPoolBackward(
  ctx: GpuContext,
  dy: GpuArray,
  argmax: GpuArray,
  dx: GpuArray,
  g: Pool2DGeometry,
): void {
  const n = outputSize(g);
  checkSizes(g, 'maxPoolBackward', [
    ['dy', dy, n],
    ['argmax', argmax, n],
    ['dx', dx, inputSize(g)],
  ]);
  const uses = [
    { name: 'dy', array: dy },
    { name: 'argmax', array: argmax, int: true },
    { name: 'dx', array: dx, write: true },
  ];
  run(ctx, 'maxPoolBackward', MAX_BACKWARD, uses, inputSize(g), g);
}

/** Records y = the mean of each window's in-image cells (0 for a window wholly in the padding). */
export function avgPoolForward(ctx: GpuContext, x: GpuArray, y: GpuArray, g: Pool2DGeometry): void {
  checkSizes(g, 'avgPoolForward', [
    ['x', x, inputSize(g)],
    ['y', y, outputSize(g)],
  ]);
  const uses = [
    { name: 'x', array: x },
    { name: 'y', array: y, write: true },
  ];
  run(ctx, 'avgPoolForward', AVG_FORWARD, uses, outputSize(g), g);
}

/** Records dx (overwritten): each output's gradient shared equally by its window's in-image cells. */
export function avgPoolBackward(ctx: GpuContext, dy: GpuArray, dx: GpuArray, g: Pool2DGeometry): void {
  checkSizes(g, 'avgPoolBackward', [
    ['dy', dy, outputSize(g)],
    ['dx', dx, inputSize(g)],
  ]);
  const uses = [
    { name: 'dy', array: dy },
    { name: 'dx', array: dx, write: true },
  ];
  run(ctx, 'avgPoolBackward', AVG_BACKWARD, uses, inputSize(g), g);
}
