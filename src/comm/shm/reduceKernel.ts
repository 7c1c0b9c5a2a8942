/**
 * The shm transport's portable reduction kernel: WebAssembly SIMD (f32x4) over the world's shared
 * wasm memory (the arena), so it reads and writes every rank's arena data directly. Where the
 * native reduction is built it takes the registered buffers instead (nativeReduce.ts), with the
 * same arithmetic in the same order.
 *
 * reduce(table, nsrc, ndst, n, div): with `table` holding nsrc source byte addresses followed by
 * ndst destination byte addresses (u32, in the arena), for every i < n:
 *   acc = src[0][i]; acc = f32(acc + src[k][i]) for k = 1..nsrc-1 (in this order);
 *   if div != 0: acc = f32(acc / div);  dst[d][i] = acc for every d.
 * IEEE float32 arithmetic in a fixed source order: the result is bit-identical to a serial
 * float32 sum over ranks 0..G-1, whichever rank computes it. Processes 64 bytes per step,
 * then 16, then 4. Sources and destinations may coincide (each step loads before it stores).
 * Two sources (2 ranks: the common case) take `reduce2`, which keeps the addresses in locals rather
 * than reloading the table every step and does 128 bytes per step: about twice as fast on data in
 * cache (`npm run bench -- allreduce` shows what it does to the collective).
 *
 * The bytes below are binaryen's binary of the WAT text kept beside this file in reduceKernel.wat
 * (a devDependency; `test/comm/shm-primitives.test.ts` checks the two agree).
 */
import { TABLE_BYTES } from './layout.ts';

export const REDUCE_KERNEL_WASM_BASE64 =
  'AGFzbQEAAAABFAJgBX9/f399AGAHf39/f39/fQF/AhIBA2VudgZtZW1vcnkCAwCAgAQDAwIAAQcUAgZyZWR1Y2UAAAdyZWR1Y2UyAAEKrQgC8QQDCH8FewF9IAAgAUECdGohBSADQQJ0IQYgBkFAcSEHIAZBcHEhCCAE/RMhESAEQwAAAABcIQwCQANAIAkgB08NASAAKAIAIAlqIQsgC/0ABAAhDSAL/QAEECEOIAv9AAQgIQ8gC/0ABDAhEEEBIQoCQANAIAogAU8NASAAIApBAnRqKAIAIAlqIQsgDSAL/QAEAP3kASENIA4gC/0ABBD95AEhDiAPIAv9AAQg/eQBIQ8gECAL/QAEMP3kASEQIApBAWohCgwACwALIAwEQCANIBH95wEhDSAOIBH95wEhDiAPIBH95wEhDyAQIBH95wEhEAtBACEKAkADQCAKIAJPDQEgBSAKQQJ0aigCACAJaiELIAsgDf0LBAAgCyAO/QsEECALIA/9CwQgIAsgEP0LBDAgCkEBaiEKDAALAAsgCUHAAGohCQwACwALAkADQCAJIAhPDQEgACgCACAJav0ABAAhDUEBIQoCQANAIAogAU8NASANIAAgCkECdGooAgAgCWr9AAQA/eQBIQ0gCkEBaiEKDAALAAsgDARAIA0gEf3nASENC0EAIQoCQANAIAogAk8NASAFIApBAnRqKAIAIAlqIA39CwQAIApBAWohCgwACwALIAlBEGohCQwACwALAkADQCAJIAZPDQEgACgCACAJaioCACESQQEhCgJAA0AgCiABTw0BIBIgACAKQQJ0aigCACAJaioCAJIhEiAKQQFqIQoMAAsACyAMBEAgEiAElSESC0EAIQoCQANAIAogAk8NASAFIApBAnRqKAIAIAlqIBI4AgAgCkEBaiEKDAALAAsgCUEEaiEJDAALAAsLtwMCBX8JeyAFQQJ0QYB/cSEIIAb9EyEUIAZDAAAAAFwhCwJAA0AgByAITw0BIAAgB2ohCSABIAdqIQogCf0ABAAgCv0ABAD95AEhDCAJ/QAEECAK/QAEEP3kASENIAn9AAQgIAr9AAQg/eQBIQ4gCf0ABDAgCv0ABDD95AEhDyAJ/QAEQCAK/QAEQP3kASEQIAn9AARQIAr9AARQ/eQBIREgCf0ABGAgCv0ABGD95AEhEiAJ/QAEcCAK/QAEcP3kASETIAsEQCAMIBT95wEhDCANIBT95wEhDSAOIBT95wEhDiAPIBT95wEhDyAQIBT95wEhECARIBT95wEhESASIBT95wEhEiATIBT95wEhEwsgAiAHaiEJIAkgDP0LBAAgCSAN/QsEECAJIA79CwQgIAkgD/0LBDAgCSAQ/QsEQCAJIBH9CwRQIAkgEv0LBGAgCSAT/QsEcCAEQQJGBEAgAyAHaiEJIAkgDP0LBAAgCSAN/QsEECAJIA79CwQgIAkgD/0LBDAgCSAQ/QsEQCAJIBH9CwRQIAkgEv0LBGAgCSAT/QsEcAsgB0GAAWohBwwACwALIAhBAnYL';

let cachedModule: WebAssembly.Module | undefined;
function kernelModule(): WebAssembly.Module {
  cachedModule ??= new WebAssembly.Module(Buffer.from(REDUCE_KERNEL_WASM_BASE64, 'base64'));
  return cachedModule;
}

type ReduceFn = (table: number, nsrc: number, ndst: number, n: number, div: number) => void;
type Reduce2Fn = (s0: number, s1: number, d0: number, d1: number, nd: number, n: number, div: number) => number;

export class ReduceKernel {
  private readonly fn: ReduceFn;
  private readonly fn2: Reduce2Fn;
  private readonly table: Uint32Array;
  private readonly maxEntries: number;

  /** `tableByte`: this thread's own TABLE_BYTES scratch in the arena for the address table. */
  constructor(
    memory: WebAssembly.Memory,
    private readonly tableByte: number,
  ) {
    const instance = new WebAssembly.Instance(kernelModule(), { env: { memory } });
    this.fn = instance.exports.reduce as ReduceFn;
    this.fn2 = instance.exports.reduce2 as Reduce2Fn;
    this.table = new Uint32Array(memory.buffer, tableByte, TABLE_BYTES / 4);
    this.maxEntries = TABLE_BYTES / 4;
  }

  /** See the file comment. Addresses are arena byte offsets; `div` 0 means no division. */
  reduce(srcs: ArrayLike<number>, dsts: ArrayLike<number>, n: number, div = 0): void {
    if (n <= 0) return;
    const ns = srcs.length,
      nd = dsts.length;
    if (ns < 1 || ns + nd > this.maxEntries)
      throw new RangeError(`reduce kernel: bad source/destination count ${ns}/${nd}`);
    let done = 0;
    if (ns === 2 && (nd === 1 || nd === 2)) {
      done = this.fn2(srcs[0]!, srcs[1]!, dsts[0]!, nd === 2 ? dsts[1]! : 0, nd, n, div);
      if (done === n) return;
    }
    const t = this.table,
      skip = done * 4;
    for (let k = 0; k < ns; k++) t[k] = srcs[k]! + skip;
    for (let k = 0; k < nd; k++) t[ns + k] = dsts[k]! + skip;
    this.fn(this.tableByte, ns, nd, n - done, div);
  }
}
