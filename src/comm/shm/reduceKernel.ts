/**
 * The one reduction kernel of the shm transport: WebAssembly SIMD (f32x4) over the world's shared
 * wasm memory (the arena), so it reads and writes every rank's arena data directly.
 *
 * reduce(table, nsrc, ndst, n, div): with `table` holding nsrc source byte addresses followed by
 * ndst destination byte addresses (u32, in the arena), for every i < n:
 *   acc = src[0][i]; acc = f32(acc + src[k][i]) for k = 1..nsrc-1 (in this order);
 *   if div != 0: acc = f32(acc / div);  dst[d][i] = acc for every d.
 * IEEE float32 arithmetic in a fixed source order: the result is bit-identical to a serial
 * float32 sum over ranks 0..G-1, whichever rank computes it. Processes 64 bytes per step,
 * then 16, then 4. Sources and destinations may coincide (each step loads before it stores).
 *
 * The bytes below are `wasm-as --enable-simd --enable-threads` (binaryen, a devDependency) of
 * the WAT text kept beside this file in reduceKernel.wat.
 */
import { TABLE_BYTES } from './layout.ts';

const WASM_BASE64 =
  'AGFzbQEAAAABCQFgBX9/f399AAISAQNlbnYGbWVtb3J5AgMAgIAEAwIBAAcKAQZyZWR1Y2UAAAr0BAHxBAMIfwV7AX0gACABQQJ0aiEFIANBAnQhBiAGQUBxIQcgBkFwcSEIIAT9EyERIARDAAAAAFwhDAJAA0AgCSAHTw0BIAAoAgAgCWohCyAL/QAEACENIAv9AAQQIQ4gC/0ABCAhDyAL/QAEMCEQQQEhCgJAA0AgCiABTw0BIAAgCkECdGooAgAgCWohCyANIAv9AAQA/eQBIQ0gDiAL/QAEEP3kASEOIA8gC/0ABCD95AEhDyAQIAv9AAQw/eQBIRAgCkEBaiEKDAALAAsgDARAIA0gEf3nASENIA4gEf3nASEOIA8gEf3nASEPIBAgEf3nASEQC0EAIQoCQANAIAogAk8NASAFIApBAnRqKAIAIAlqIQsgCyAN/QsEACALIA79CwQQIAsgD/0LBCAgCyAQ/QsEMCAKQQFqIQoMAAsACyAJQcAAaiEJDAALAAsCQANAIAkgCE8NASAAKAIAIAlq/QAEACENQQEhCgJAA0AgCiABTw0BIA0gACAKQQJ0aigCACAJav0ABAD95AEhDSAKQQFqIQoMAAsACyAMBEAgDSAR/ecBIQ0LQQAhCgJAA0AgCiACTw0BIAUgCkECdGooAgAgCWogDf0LBAAgCkEBaiEKDAALAAsgCUEQaiEJDAALAAsCQANAIAkgBk8NASAAKAIAIAlqKgIAIRJBASEKAkADQCAKIAFPDQEgEiAAIApBAnRqKAIAIAlqKgIAkiESIApBAWohCgwACwALIAwEQCASIASVIRILQQAhCgJAA0AgCiACTw0BIAUgCkECdGooAgAgCWogEjgCACAKQQFqIQoMAAsACyAJQQRqIQkMAAsACws=';

let cachedModule: WebAssembly.Module | undefined;
function kernelModule(): WebAssembly.Module {
  cachedModule ??= new WebAssembly.Module(Buffer.from(WASM_BASE64, 'base64'));
  return cachedModule;
}

type ReduceFn = (table: number, nsrc: number, ndst: number, n: number, div: number) => void;

export class ReduceKernel {
  private readonly fn: ReduceFn;
  private readonly table: Uint32Array;
  private readonly maxEntries: number;

  /** `tableByte`: this thread's own TABLE_BYTES scratch in the arena for the address table. */
  constructor(memory: WebAssembly.Memory, private readonly tableByte: number) {
    const instance = new WebAssembly.Instance(kernelModule(), { env: { memory } });
    this.fn = instance.exports.reduce as ReduceFn;
    this.table = new Uint32Array(memory.buffer, tableByte, TABLE_BYTES / 4);
    this.maxEntries = TABLE_BYTES / 4;
  }

  /** See the file comment. Addresses are arena byte offsets; `div` 0 means no division. */
  reduce(srcs: ArrayLike<number>, dsts: ArrayLike<number>, n: number, div = 0): void {
    if (n <= 0) return;
    const ns = srcs.length, nd = dsts.length;
    if (ns < 1 || ns + nd > this.maxEntries) throw new RangeError(`reduce kernel: bad source/destination count ${ns}/${nd}`);
    const t = this.table;
    for (let k = 0; k < ns; k++) t[k] = srcs[k]!;
    for (let k = 0; k < nd; k++) t[ns + k] = dsts[k]!;
    this.fn(this.tableByte, ns, nd, n, div);
  }
}
