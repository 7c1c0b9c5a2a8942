/**
 * Inverted dropout on the GPU with the CPU backends' masks (src/kernels/js/dropout.ts is the
 * definition): element j keeps where word counter + j of the Philox4x32-10 stream keyed (k0, k1),
 * as a uniform in [0, 1), is below `keep`. One thread per counter block of four words.
 */
import { bindArrays, cachedShader, linearGroups, linearMain } from './arrayBindings.ts';
import type { GpuArray } from './gpuArray.ts';
import type { GpuContext } from './gpuContext.ts';
import { PHILOX_WGSL } from './philox.ts';

const TWO_32 = 4294967296;

const FORWARD = `${PHILOX_WGSL}
${linearMain(
  'p.blocks',
  /* wgsl */ `
  // block firstBlock + i, a 64-bit counter in two words
  let lo = p.firstLo + i;
  let hi = p.firstHi + select(0u, 1u, lo < p.firstLo);
  let words = philox4x32(vec4u(lo, hi, 0u, 0u), vec2u(p.k0, p.k1));
  for (var w = 0u; w < 4u; w++) {
    let at = 4u * i + w;
    if (at < p.skip || at - p.skip >= p.n) { continue; }
    let j = at - p.skip;
    let x = ld_x(j);
    if (words[w] < p.threshold || p.keepAll != 0u) {
      st_mask(j, p.scaleHi);
      // x·(scaleHi + scaleLo) rounded once where fma is fused, as the CPU backends round x·scale;
      // ±Inf and NaN (all exponent bits set) skip it: ∞·scaleLo could be 0·∞ or ∞ − ∞
      let finite = (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u;
      st_y(j, select(x * p.scaleHi, fma(x, p.scaleHi, x * p.scaleLo), finite));
    } else {
      // a zero from Params: the compiler would fold x·0.0 to 0, losing NaN and −0
      st_mask(j, p.dropped);
      st_y(j, x * p.dropped);
    }
  }`,
)}`;

const BACKWARD = linearMain('p.n', '  st_dx(i, ld_dy(i) * ld_mask(i));');

/**
 * Records the forward of ElementwiseKernels.dropoutForward: mask[j] = scale where draw counter + j
 * is below keep, else 0; y[j] = x[j]·mask[j]. The masks equal the CPU backends' bit for bit, and so
 * does y where the scale is a float32 (keep 0.5, 0.8); otherwise y is within 1 ulp of theirs, which
 * round x·scale from float64 (GPUs with a fused fma nearly always match).
 */
export function dropoutForward(
  ctx: GpuContext,
  k0: number,
  k1: number,
  counter: number,
  n: number,
  keep: number,
  scale: number,
  x: GpuArray,
  mask: GpuArray,
  y: GpuArray,
): void {
  if (!Number.isInteger(counter) || counter < 0 || counter + n > Number.MAX_SAFE_INTEGER)
    throw new RangeError(`dropoutForward: counter ${counter} must be an integer in [0, 2^53 − n)`);
  if (!Number.isInteger(n) || n < 0 || n > 2 ** 31)
    throw new RangeError(`dropoutForward: n must be an integer in [0, 2^31], got ${n}`);
  if (x.length < n || mask.length < n || y.length < n)
    throw new RangeError(`dropoutForward: n = ${n} but x has ${x.length}, mask ${mask.length}, y ${y.length}`);
  if (n === 0) return;
  const first = Math.floor(counter / 4),
    skip = counter % 4;
  const blocks = Math.ceil((skip + n) / 4);
  // draw u/2³² < keep ⇔ u < ⌈keep·2³²⌉ for an integer u; keep ≥ 1 keeps every word (the bound is 2³²)
  const bound32 = keep > 0 ? Math.ceil(keep * TWO_32) : 0;
  const scaleHi = Math.fround(scale);
  const bound = bindArrays(
    [
      { name: 'x', array: x },
      { name: 'mask', array: mask, write: true },
      { name: 'y', array: y, write: true },
    ],
    'n: u32, blocks: u32, firstLo: u32, firstHi: u32, skip: u32, threshold: u32, keepAll: u32, ' +
      'k0: u32, k1: u32, scaleHi: f32, scaleLo: f32, dropped: f32',
  );
  const shader = cachedShader('dropoutForward', bound, () => FORWARD);
  bound.params
    .u32(n)
    .u32(blocks)
    .u32(first >>> 0)
    .u32(Math.floor(first / TWO_32) >>> 0)
    .u32(skip)
    .u32(Math.min(bound32, TWO_32 - 1))
    .u32(+(bound32 >= TWO_32))
    .u32(k0 >>> 0)
    .u32(k1 >>> 0)
    .f32(scaleHi)
    .f32(scale - scaleHi)
    .f32(0);
  ctx.dispatch({ shader, arrays: bound.arrays, params: bound.params, groups: linearGroups(blocks) });
}

/** Records dx = dy·mask over n elements (dx may be dy): ElementwiseKernels.dropoutBackward. */
export function dropoutBackward(ctx: GpuContext, dy: GpuArray, mask: GpuArray, dx: GpuArray, n: number): void {
  if (dy.length < n || mask.length < n || dx.length < n)
    throw new RangeError(`dropoutBackward: n = ${n} but dy has ${dy.length}, mask ${mask.length}, dx ${dx.length}`);
  if (n === 0) return;
  const bound = bindArrays(
    [
      { name: 'dy', array: dy },
      { name: 'mask', array: mask },
      { name: 'dx', array: dx, write: true },
    ],
    'n: u32',
  );
  const shader = cachedShader('dropoutBackward', bound, () => BACKWARD);
  bound.params.u32(n);
  ctx.dispatch({ shader, arrays: bound.arrays, params: bound.params, groups: linearGroups(n) });
}
