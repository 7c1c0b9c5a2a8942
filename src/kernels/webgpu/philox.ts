/**
 * Philox4x32-10 (src/tensor/rng.ts) in WGSL, for draws on the GPU that equal the CPU backends'
 * bit for bit: the same rounds, constants and key schedule, in u32 arithmetic that wraps.
 */
import { bindArrays, cachedShader, linearGroups, linearMain } from './arrayBindings.ts';
import type { GpuArray } from './gpuArray.ts';
import type { GpuContext } from './gpuContext.ts';

/** WGSL: `philox4x32(counter, key)`, the four outputs of one counter block. */
export const PHILOX_WGSL = /* wgsl */ `
// (high, low) 32 bits of the 64-bit product a·b: WGSL has no 32×32→64 multiply, so the high word
// is built from 16-bit halves, as rng.ts's mulhi does
fn mulHiLo(a: u32, b: u32) -> vec2u {
  let aLo = a & 0xffffu;
  let aHi = a >> 16u;
  let bLo = b & 0xffffu;
  let bHi = b >> 16u;
  let lo = aLo * bLo;
  let mid1 = aHi * bLo;
  let mid2 = aLo * bHi;
  let carry = ((lo >> 16u) + (mid1 & 0xffffu) + (mid2 & 0xffffu)) >> 16u;
  return vec2u(aHi * bHi + (mid1 >> 16u) + (mid2 >> 16u) + carry, a * b);
}

fn philox4x32(counter: vec4u, key: vec2u) -> vec4u {
  var c = counter;
  var k = key;
  for (var round = 0u; round < 10u; round++) {
    let p0 = mulHiLo(0xd2511f53u, c.x);
    let p1 = mulHiLo(0xcd9e8d57u, c.z);
    c = vec4u(p1.x ^ c.y ^ k.x, p1.y, p0.x ^ c.w ^ k.y, p0.y);
    k += vec2u(0x9e3779b9u, 0xbb67ae85u);
  }
  return c;
}
`;

const BLOCKS_BODY = `${PHILOX_WGSL}
${linearMain(
  'p.blocks',
  /* wgsl */ `
  let c = vec4u(bitcast<u32>(ld_counters(4u * i)), bitcast<u32>(ld_counters(4u * i + 1u)),
                bitcast<u32>(ld_counters(4u * i + 2u)), bitcast<u32>(ld_counters(4u * i + 3u)));
  let r = philox4x32(c, vec2u(p.k0, p.k1));
  for (var w = 0u; w < 4u; w++) { st_out(4u * i + w, bitcast<i32>(r[w])); }`,
)}`;

/**
 * Records out[4b … 4b+3] = Philox4x32-10 of the counter counters[4b … 4b+3] under key (k0, k1) for
 * every block b: raw random words for any counter, the generator dropout's masks draw from. Both
 * arrays hold uint32 bits (upload a Uint32Array through a Float32Array view of its buffer).
 */
export function philox4x32Blocks(ctx: GpuContext, counters: GpuArray, k0: number, k1: number, out: GpuArray): void {
  if (counters.length % 4 !== 0)
    throw new RangeError(`philox4x32Blocks: counters hold ${counters.length} words, not blocks of 4`);
  if (out.length < counters.length)
    throw new RangeError(`philox4x32Blocks: out has ${out.length} words, the counters ${counters.length}`);
  const blocks = counters.length / 4;
  if (blocks === 0) return;
  const bound = bindArrays(
    [
      { name: 'counters', array: counters, int: true },
      { name: 'out', array: out, write: true, int: true },
    ],
    'blocks: u32, k0: u32, k1: u32',
  );
  const shader = cachedShader('philox4x32Blocks', bound, () => BLOCKS_BODY);
  bound.params
    .u32(blocks)
    .u32(k0 >>> 0)
    .u32(k1 >>> 0);
  ctx.dispatch({ shader, arrays: bound.arrays, params: bound.params, groups: linearGroups(blocks) });
}
