/**
 * A tiled product C[M×N] = A[M×K]·B[K×N] whose operands are not matrices in memory but functions
 * `opA(m, k)`, `opB(k, n)` that gather their elements (a convolution's receptive fields, read
 * straight from the image: no im2col buffer). The tiling is gemm.ts's: 64×64 blocks of C per
 * workgroup of 16×16 threads, each thread 4×4, K in steps of 16 through workgroup memory, tiles
 * loaded along each operand's contiguous dimension. Workgroup z takes K's slice
 * [z·kChunk, (z + 1)·kChunk) and writes its product at z·cStride (split-K, for a short, deep C).
 */
import type { ArrayUse } from './arrayBindings.ts';
import { bindArrays, cachedShader } from './arrayBindings.ts';
import type { GpuContext } from './gpuContext.ts';
import type { Params } from './params.ts';

export interface GatheredOperands {
  /** WGSL body of `fn opA(m: u32, k: u32) -> f32`, called with m < p.M and k < p.K only */
  opA: string;
  /** WGSL body of `fn opB(k: u32, n: u32) -> f32`, likewise with n < p.N */
  opB: string;
  /** neighbouring memory holds neighbouring k (else neighbouring m / n) */
  aAlongK: boolean;
  bAlongK: boolean;
  /** WGSL expression for C's element `at` (= z·cStride + m·N + n) from the product `v`: `v`, `v + ld_bias(n)`, … */
  store: string;
}

/** The Params fields the shader reads first, before the operands' own: set them in this order. */
export const GEMM_FIELDS = 'mStart: u32, M: u32, N: u32, K: u32, kChunk: u32, cStride: u32';

/** The shader (after a bindArrays header declaring `st_c` and GEMM_FIELDS). */
export function implicitGemmShader(o: GatheredOperands): string {
  const aLoad = o.aAlongK ? 'let kk = idx % 16u; let mm = idx / 16u;' : 'let kk = idx / 64u; let mm = idx % 64u;';
  const bLoad = o.bAlongK ? 'let kk = idx % 16u; let nn = idx / 16u;' : 'let kk = idx / 64u; let nn = idx % 64u;';
  return /* wgsl */ `
fn opA(m: u32, k: u32) -> f32 {
${o.opA}
}
fn opB(k: u32, n: u32) -> f32 {
${o.opB}
}
var<workgroup> As: array<array<f32, 64>, 16>;
var<workgroup> Bs: array<array<f32, 64>, 16>;

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let m0 = p.mStart + wg.y * 64u;
  let n0 = wg.x * 64u;
  let kBegin = wg.z * p.kChunk;
  let kEnd = min(p.K, kBegin + p.kChunk);
  let tid = l.y * 16u + l.x;
  var acc: array<array<f32, 4>, 4>;
  for (var k0 = kBegin; k0 < kEnd; k0 += 16u) {
    for (var i = 0u; i < 4u; i++) {
      let idx = tid + i * 256u;
      {
        ${aLoad}
        let m = m0 + mm;
        let k = k0 + kk;
        var v = 0.0;
        if (m < p.M && k < kEnd) { v = opA(m, k); }
        As[kk][mm] = v;
      }
      {
        ${bLoad}
        let n = n0 + nn;
        let k = k0 + kk;
        var v = 0.0;
        if (n < p.N && k < kEnd) { v = opB(k, n); }
        Bs[kk][nn] = v;
      }
    }
    workgroupBarrier();
    for (var kk = 0u; kk < 16u; kk++) {
      var av: array<f32, 4>;
      var bv: array<f32, 4>;
      for (var i = 0u; i < 4u; i++) { av[i] = As[kk][l.y * 4u + i]; bv[i] = Bs[kk][l.x * 4u + i]; }
      for (var i = 0u; i < 4u; i++) {
        for (var j = 0u; j < 4u; j++) { acc[i][j] = fma(av[i], bv[j], acc[i][j]); }
      }
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < 4u; i++) {
    let m = m0 + l.y * 4u + i;
    if (m >= p.M) { break; }
    for (var j = 0u; j < 4u; j++) {
      let n = n0 + l.x * 4u + j;
      if (n >= p.N) { break; }
      let at = wg.z * p.cStride + m * p.N + n;
      let v = acc[i][j];
      st_c(at, ${o.store});
    }
  }
}`;
}

/** Rows of C per dispatch: 65535 workgroups of 64 rows (the limit on workgroups per dimension). */
const ROWS_PER_DISPATCH = 65535 * 64;

export interface GatheredProduct {
  /** shader cache name of `operands` */
  name: string;
  operands: GatheredOperands;
  /** the arrays the operands read, and `c` (written) */
  uses: ArrayUse[];
  /** the operands' own Params fields ("H: u32, …", or none) and a function writing them in order */
  fields: string;
  setFields: (p: Params) => void;
  M: number;
  N: number;
  K: number;
  /** K in `splits` slices of `kChunk` (a multiple of 16), slice z's product at z·M·N of c */
  splits?: number;
  kChunk?: number;
}

/** Records the product, in as many dispatches as M's workgroups need (`rowsPerDispatch`, a multiple of 64, is for tests). */
export function gatheredGemm(ctx: GpuContext, g: GatheredProduct, rowsPerDispatch = ROWS_PER_DISPATCH): void {
  const { M, N, K } = g;
  if (M === 0 || N === 0) return;
  const splits = g.splits ?? 1;
  for (let mStart = 0; mStart < M; mStart += rowsPerDispatch) {
    const bound = bindArrays(g.uses, g.fields ? `${GEMM_FIELDS}, ${g.fields}` : GEMM_FIELDS);
    const shader = cachedShader(`gemm.${g.name}`, bound, () => implicitGemmShader(g.operands));
    bound.params
      .u32(mStart)
      .u32(M)
      .u32(N)
      .u32(K)
      .u32(g.kChunk ?? Math.max(K, 1))
      .u32(M * N);
    g.setFields(bound.params);
    const rows = Math.min(rowsPerDispatch, M - mStart);
    ctx.dispatch({
      shader,
      arrays: bound.arrays,
      params: bound.params,
      groups: [Math.ceil(N / 64), Math.ceil(rows / 64), splits],
    });
  }
}

/** K's slices for a product of `tiles` 64×64 blocks: enough workgroups to fill a GPU, each slice ≥ 256 deep. */
export function splitK(tiles: number, K: number): { splits: number; kChunk: number } {
  if (K === 0) return { splits: 1, kChunk: 16 };
  const wanted = Math.max(1, Math.min(Math.ceil(K / 256), Math.ceil(256 / tiles), 65535));
  const kChunk = Math.ceil(Math.ceil(K / wanted) / 16) * 16;
  return { splits: Math.max(1, Math.ceil(K / kChunk)), kChunk };
}
