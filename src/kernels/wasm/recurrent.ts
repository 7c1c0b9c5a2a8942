/**
 * The wasm backend's recurrent kernels (assembly/recurrent.ts, assembly/gemm.ts gemmPacked): packed
 * recurrent weights and the fused cell steps. Arguments are checked here, then passed as addresses
 * (arrays outside wasm memory are staged by the backend, as for every kernel).
 */
import type { PackedMatrix } from '../matrixKernels.ts';
import type { RecurrentKernels } from '../recurrentKernels.ts';
import { need, type WasmAccess } from './access.ts';
import type { WasmHeap } from './heap.ts';

/** op(B) packed in wasm memory as gemmPacked's micro-panels (assembly/gemm.ts). */
class WasmPacked implements PackedMatrix {
  readonly backend = 'wasm';
  constructor(
    readonly K: number,
    readonly N: number,
    readonly heap: WasmHeap,
    readonly ptr: number,
    readonly bytes: number,
    public kcb: number,
    public ncb: number,
  ) {}
}

function checkStep(what: string, t: number, N: number, H: number): void {
  if (!(Number.isInteger(t) && t >= 0 && Number.isInteger(N) && N >= 0 && Number.isInteger(H) && H >= 0)) {
    throw new RangeError(`${what}: t, N and H must be non-negative integers, got ${t}, ${N}, ${H}`);
  }
}

export function packB(
  k: WasmAccess,
  transB: boolean,
  K: number,
  N: number,
  B: Float32Array,
  into?: PackedMatrix | null,
): PackedMatrix {
  need('packB', 'B', B, K * N);
  let p: WasmPacked;
  if (into instanceof WasmPacked && into.heap === k.heap && into.K === K && into.N === N) p = into;
  else {
    // a pack of another size is replaced: its memory goes back to the heap
    if (into instanceof WasmPacked && into.heap === k.heap) k.heap.freeBytes(into.ptr, into.bytes);
    const bytes = Math.max(1, K * Math.ceil(N / 8) * 8) * 4;
    p = new WasmPacked(K, N, k.heap, k.heap.allocBytes(bytes), bytes, 0, 0);
  }
  p.kcb = k.e.kSlice(K);
  p.ncb = k.e.packedNc();
  if (K === 0 || N === 0) return p;
  try {
    k.e.packBFull(transB ? 1 : 0, k.ptr(B, false), transB ? K : N, K, N, p.kcb, p.ncb, p.ptr);
  } finally {
    k.done();
  }
  return p;
}

export function gemmPacked(
  k: WasmAccess,
  transA: boolean,
  M: number,
  N: number,
  K: number,
  alpha: number,
  A: Float32Array,
  P: PackedMatrix,
  beta: number,
  C: Float32Array,
  aOffset = 0,
  cOffset = 0,
): void {
  if (!(P instanceof WasmPacked) || P.heap !== k.heap)
    throw new Error(`gemmPacked: the pack was made by another backend (${P.backend}), not this wasm backend`);
  if (P.K !== K || P.N !== N)
    throw new RangeError(`gemmPacked: the pack is ${P.K}×${P.N}, the product needs ${K}×${N}`);
  need('gemmPacked', 'A', A, aOffset + M * K);
  need('gemmPacked', 'C', C, cOffset + M * N);
  if (M === 0 || N === 0) return;
  try {
    k.e.gemmPacked(
      transA ? 1 : 0,
      M,
      N,
      K,
      alpha,
      k.ptr(A, false) + 4 * aOffset,
      transA ? M : K,
      P.ptr,
      P.kcb,
      P.ncb,
      beta,
      k.ptr(C, true) + 4 * cOffset,
      N,
    );
  } finally {
    k.done();
  }
}

export function lstmCellForward(
  k: WasmAccess,
  t: number,
  N: number,
  H: number,
  gates: Float32Array,
  c: Float32Array,
  h: Float32Array,
  lengths: Int32Array,
): void {
  const f = 'lstmCellForward';
  checkStep(f, t, N, H);
  need(f, 'gates', gates, (t + 1) * N * 4 * H);
  need(f, 'c', c, (t + 2) * N * H);
  need(f, 'h', h, (t + 2) * N * H);
  need(f, 'lengths', lengths, N);
  try {
    k.e.lstmCellForward(t, N, H, k.ptr(gates, true), k.ptr(c, true), k.ptr(h, true), k.ptr(lengths, false));
  } finally {
    k.done();
  }
}

export function lstmCellBackward(
  k: WasmAccess,
  t: number,
  N: number,
  H: number,
  gates: Float32Array,
  c: Float32Array,
  dh: Float32Array,
  dc: Float32Array,
  dz: Float32Array,
  lengths: Int32Array,
): void {
  const f = 'lstmCellBackward';
  checkStep(f, t, N, H);
  need(f, 'gates', gates, (t + 1) * N * 4 * H);
  need(f, 'c', c, (t + 2) * N * H);
  need(f, 'dh', dh, (t + 2) * N * H);
  need(f, 'dc', dc, N * H);
  need(f, 'dz', dz, (t + 1) * N * 4 * H);
  need(f, 'lengths', lengths, N);
  try {
    k.e.lstmCellBackward(
      t,
      N,
      H,
      k.ptr(gates, false),
      k.ptr(c, false),
      k.ptr(dh, false),
      k.ptr(dc, true),
      k.ptr(dz, true),
      k.ptr(lengths, false),
    );
  } finally {
    k.done();
  }
}

export function gruCellForward(
  k: WasmAccess,
  t: number,
  N: number,
  H: number,
  gates: Float32Array,
  rec: Float32Array,
  bhh: Float32Array,
  hn: Float32Array,
  h: Float32Array,
  lengths: Int32Array,
): void {
  const f = 'gruCellForward';
  checkStep(f, t, N, H);
  need(f, 'gates', gates, (t + 1) * N * 3 * H);
  need(f, 'rec', rec, N * 3 * H);
  need(f, 'bhh', bhh, 3 * H);
  need(f, 'hn', hn, (t + 1) * N * H);
  need(f, 'h', h, (t + 2) * N * H);
  need(f, 'lengths', lengths, N);
  try {
    k.e.gruCellForward(
      t,
      N,
      H,
      k.ptr(gates, true),
      k.ptr(rec, false),
      k.ptr(bhh, false),
      k.ptr(hn, true),
      k.ptr(h, true),
      k.ptr(lengths, false),
    );
  } finally {
    k.done();
  }
}

export function gruCellBackward(
  k: WasmAccess,
  t: number,
  N: number,
  H: number,
  gates: Float32Array,
  hn: Float32Array,
  h: Float32Array,
  dh: Float32Array,
  dzx: Float32Array,
  dzh: Float32Array,
  lengths: Int32Array,
): void {
  const f = 'gruCellBackward';
  checkStep(f, t, N, H);
  need(f, 'gates', gates, (t + 1) * N * 3 * H);
  need(f, 'hn', hn, (t + 1) * N * H);
  need(f, 'h', h, (t + 1) * N * H);
  need(f, 'dh', dh, (t + 2) * N * H);
  need(f, 'dzx', dzx, (t + 1) * N * 3 * H);
  need(f, 'dzh', dzh, (t + 1) * N * 3 * H);
  need(f, 'lengths', lengths, N);
  try {
    k.e.gruCellBackward(
      t,
      N,
      H,
      k.ptr(gates, false),
      k.ptr(hn, false),
      k.ptr(h, false),
      k.ptr(dh, true),
      k.ptr(dzx, true),
      k.ptr(dzh, true),
      k.ptr(lengths, false),
    );
  } finally {
    k.done();
  }
}

/** The cell steps as the backend's RecurrentKernels (packB and gemmPacked serve its matrix kernels, ./gemm.ts). */
export function wasmRecurrentKernels(k: WasmAccess): RecurrentKernels {
  return {
    lstmCellForward: (t, N, H, gates, c, h, lengths) => lstmCellForward(k, t, N, H, gates, c, h, lengths),
    lstmCellBackward: (t, N, H, gates, c, dh, dc, dz, lengths) =>
      lstmCellBackward(k, t, N, H, gates, c, dh, dc, dz, lengths),
    gruCellForward: (t, N, H, gates, rec, bhh, hn, h, lengths) =>
      gruCellForward(k, t, N, H, gates, rec, bhh, hn, h, lengths),
    gruCellBackward: (t, N, H, gates, hn, h, dh, dzx, dzh, lengths) =>
      gruCellBackward(k, t, N, H, gates, hn, h, dh, dzx, dzh, lengths),
  };
}
