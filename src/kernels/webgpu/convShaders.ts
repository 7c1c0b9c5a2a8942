/**
 * The gathers that make a convolution's three products implicit gemms (convolution.ts), over NHWC
 * images and [KH, KW, C, F] weights. A receptive field's column k is ordered (kh, kw, c), the
 * row-major order of the weight, as im2col's (src/kernels/js/im2col.ts).
 */
import type { GatheredOperands } from './implicitGemm.ts';

/** The convolution's geometry as Params fields (after the gemm's), written by convolution.ts. */
export const CONV_FIELDS =
  'H: u32, W: u32, C: u32, KH: u32, KW: u32, F: u32, sH: u32, sW: u32, padT: u32, padL: u32, OH: u32, OW: u32';

/** x's element in column k of output pixel `pix`'s receptive field (0 in the padding). */
function receptiveField(pix: string, k: string): string {
  return /* wgsl */ `
  let ohw = p.OH * p.OW;
  let n = ${pix} / ohw;
  let r = ${pix} % ohw;
  let oh = r / p.OW;
  let ow = r % p.OW;
  let kwc = p.KW * p.C;
  let kh = ${k} / kwc;
  let kr = ${k} % kwc;
  let kw = kr / p.C;
  let c = kr % p.C;
  let ih = i32(oh * p.sH + kh) - i32(p.padT);
  let iw = i32(ow * p.sW + kw) - i32(p.padL);
  if (ih < 0 || ih >= i32(p.H) || iw < 0 || iw >= i32(p.W)) { return 0.0; }
  return ld_x(((n * p.H + u32(ih)) * p.W + u32(iw)) * p.C + c);`;
}

/** y[P, F] = field(x)[P, KH·KW·C] · w[KH·KW·C, F] (+ bias): reads x, w (and bias), writes c = y. */
export function forwardOperands(bias: boolean): GatheredOperands {
  return {
    opA: receptiveField('m', 'k'),
    opB: '  return ld_w(k * p.N + n);',
    aAlongK: true,
    bAlongK: false,
    store: bias ? 'v + ld_bias(n)' : 'v',
  };
}

/**
 * dx[N·H·W, C] = dy'[N·H·W, KH·KW·F] · w'[KH·KW·F, C], where row (n, ih, iw) of dy' holds, for
 * each tap (kh, kw), dy at the output pixel whose window puts that tap on (ih, iw) (0 where none
 * does: off the stride or past the output), and w' is w with C and F swapped. Reads dy, w; writes c = dx.
 */
export const BACKWARD_DATA: GatheredOperands = {
  opA: /* wgsl */ `
  let hw = p.H * p.W;
  let n = m / hw;
  let r = m % hw;
  let ih = r / p.W;
  let iw = r % p.W;
  let tap = k / p.F;
  let f = k % p.F;
  let th = i32(ih + p.padT) - i32(tap / p.KW);
  let tw = i32(iw + p.padL) - i32(tap % p.KW);
  if (th < 0 || tw < 0) { return 0.0; }
  if (u32(th) % p.sH != 0u || u32(tw) % p.sW != 0u) { return 0.0; }
  let oh = u32(th) / p.sH;
  let ow = u32(tw) / p.sW;
  if (oh >= p.OH || ow >= p.OW) { return 0.0; }
  return ld_dy(((n * p.OH + oh) * p.OW + ow) * p.F + f);`,
  opB: /* wgsl */ `
  let tap = k / p.F;
  return ld_w((tap * p.C + n) * p.F + k % p.F);`,
  aAlongK: true,
  bAlongK: true,
  store: 'v',
};

/**
 * dw[KH·KW·C, F] = field(x)ᵀ[KH·KW·C, P] · dy[P, F]: reads x, dy; writes c, which is dw itself
 * (`accumulate`: added to it) or a slice of partial products.
 */
export function filterOperands(accumulate: boolean): GatheredOperands {
  return {
    opA: receptiveField('k', 'm'),
    opB: '  return ld_dy(k * p.N + n);',
    aAlongK: false,
    bAlongK: false,
    store: accumulate ? 'ld_c(at) + v' : 'v',
  };
}
