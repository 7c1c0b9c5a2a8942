/**
 * C[M×N] = alpha·op(A)·op(B) + beta·C on the GPU: 64×64 blocks of C per workgroup of 16×16
 * threads, each thread 4×4 of them, K in steps of 16 through workgroup memory. Tiles are loaded
 * along each operand's contiguous dimension, so either transpose reads memory in order. A batch of
 * equally shaped products at fixed strides (attention's per-(sample, head) blocks) is one dispatch,
 * one product per workgroup z.
 */
import type { GpuContext } from './gpuContext.ts';
import type { GpuArray } from './gpuArray.ts';
import { Params } from './params.ts';

const TILE = 64;

function gemmShader(transA: boolean, transB: boolean): string {
  // (k, m) of the A tile loaded by load index `idx` (0…1023), contiguous in memory for neighbours
  const aLoad = transA ? 'let kk = idx / 64u; let mm = idx % 64u;' : 'let kk = idx % 16u; let mm = idx / 16u;';
  const bLoad = transB ? 'let kk = idx % 16u; let nn = idx / 16u;' : 'let kk = idx / 64u; let nn = idx % 64u;';
  return /* wgsl */ `
struct Params { M: u32, N: u32, K: u32, aOff: u32, bOff: u32, cOff: u32, alpha: f32, beta: f32,
                 aStride: u32, bStride: u32, cStride: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> A: array<f32>;
@group(0) @binding(2) var<storage, read> B: array<f32>;
@group(0) @binding(3) var<storage, read_write> C: array<f32>;
var<workgroup> As: array<array<f32, 64>, 16>;
var<workgroup> Bs: array<array<f32, 64>, 16>;
// this workgroup's product of the batch: where its A and B start
var<private> aBase: u32;
var<private> bBase: u32;

fn a(m: u32, k: u32) -> f32 {
  if (m >= p.M || k >= p.K) { return 0.0; }
  return A[aBase + ${transA ? 'k * p.M + m' : 'm * p.K + k'}];
}
fn b(k: u32, n: u32) -> f32 {
  if (k >= p.K || n >= p.N) { return 0.0; }
  return B[bBase + ${transB ? 'n * p.K + k' : 'k * p.N + n'}];
}

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  aBase = p.aOff + wg.z * p.aStride;
  bBase = p.bOff + wg.z * p.bStride;
  let m0 = wg.y * 64u;
  let n0 = wg.x * 64u;
  let tid = l.y * 16u + l.x;
  var acc: array<array<f32, 4>, 4>;
  for (var k0 = 0u; k0 < p.K; k0 += 16u) {
    for (var i = 0u; i < 4u; i++) {
      let idx = tid + i * 256u;
      { ${aLoad} As[kk][mm] = a(m0 + mm, k0 + kk); }
      { ${bLoad} Bs[kk][nn] = b(k0 + kk, n0 + nn); }
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
      let c = p.cOff + wg.z * p.cStride + m * p.N + n;
      // beta = 0 ignores C, as BLAS does (C may hold anything, NaN included)
      var prior = 0.0;
      if (p.beta != 0.0) { prior = p.beta * C[c]; }
      C[c] = p.alpha * acc[i][j] + prior;
    }
  }
}`;
}

const shaders = new Map<string, string>();

/** `count` products, product b on A, B and C from elements b·a, b·b and b·c past their arrays' offsets. */
export interface GemmBatch {
  count: number;
  a: number;
  b: number;
  c: number;
}

/** At most this many workgroups per dimension (WebGPU's limit): a longer batch takes several dispatches. */
const MAX_GROUPS = 65535;

/**
 * Records C = alpha·op(A)·op(B) + beta·C; op(A) is M×K (A stored K×M when transA), op(B) is K×N.
 * With `batch`, records its `count` such products, each on the arrays' blocks at its strides.
 */
export function gemm(
  ctx: GpuContext,
  transA: boolean,
  transB: boolean,
  M: number,
  N: number,
  K: number,
  alpha: number,
  A: GpuArray,
  B: GpuArray,
  beta: number,
  C: GpuArray,
  batch: GemmBatch = { count: 1, a: 0, b: 0, c: 0 },
): void {
  if (M === 0 || N === 0 || batch.count === 0) return;
  const key = `${+transA}${+transB}`;
  let shader = shaders.get(key);
  if (!shader) shaders.set(key, (shader = gemmShader(transA, transB)));
  for (let first = 0; first < batch.count; first += MAX_GROUPS) {
    const params = new Params()
      .u32(M)
      .u32(N)
      .u32(K)
      .u32(A.offset + first * batch.a)
      .u32(B.offset + first * batch.b)
      .u32(C.offset + first * batch.c)
      .f32(alpha)
      .f32(beta)
      .u32(batch.a)
      .u32(batch.b)
      .u32(batch.c);
    const groups = Math.min(batch.count - first, MAX_GROUPS);
    ctx.dispatch({ shader, arrays: [A, B, C], params, groups: [Math.ceil(N / TILE), Math.ceil(M / TILE), groups] });
  }
}
