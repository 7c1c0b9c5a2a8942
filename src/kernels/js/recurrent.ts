/**
 * The reference recurrent kernels (see Backend: lstmCellForward … gruCellBackward, packB, gemmPacked):
 * plain loops in float64 arithmetic over the time-major run buffers, stored as float32. The wasm
 * kernels (assembly/recurrent.ts) are tested against these.
 */
import type { PackedMatrix } from '../matrixKernels.ts';
import { gemm } from './gemm.ts';

const sigmoid = (v: number): number => 1 / (1 + Math.exp(-v));

/** The js "pack": op(B) is B itself, read through gemm's own packing on every call. */
class JsPacked implements PackedMatrix {
  readonly backend = 'js';
  constructor(
    readonly K: number,
    readonly N: number,
    public transB: boolean,
    public B: Float32Array,
  ) {}
}

export function packB(
  transB: boolean,
  K: number,
  N: number,
  B: Float32Array,
  into?: PackedMatrix | null,
): PackedMatrix {
  if (B.length < K * N) throw new RangeError(`packB: B has ${B.length} values, needs ${K * N}`);
  if (into instanceof JsPacked && into.K === K && into.N === N) {
    into.transB = transB;
    into.B = B;
    return into;
  }
  return new JsPacked(K, N, transB, B);
}

export function gemmPacked(
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
  if (!(P instanceof JsPacked)) throw new Error(`gemmPacked: the pack was made by the ${P.backend} backend, not js`);
  if (P.K !== K || P.N !== N)
    throw new RangeError(`gemmPacked: the pack is ${P.K}×${P.N}, the product needs ${K}×${N}`);
  gemm(
    transA,
    P.transB,
    M,
    N,
    K,
    alpha,
    A.subarray(aOffset, aOffset + M * K),
    P.B,
    beta,
    C.subarray(cOffset, cOffset + M * N),
  );
}

export function lstmCellForward(
  t: number,
  N: number,
  H: number,
  gates: Float32Array,
  c: Float32Array,
  h: Float32Array,
  lengths: Int32Array,
): void {
  const NH = N * H,
    G4 = 4 * H;
  for (let n = 0; n < N; n++) {
    const prev = t * NH + n * H,
      out = prev + NH;
    if (t >= lengths[n]!) {
      h.fill(0, out, out + H);
      c.fill(0, out, out + H);
      continue;
    }
    const gb = (t * N + n) * G4;
    for (let j = 0; j < H; j++) {
      const i = sigmoid(gates[gb + j]!),
        f = sigmoid(gates[gb + H + j]!);
      const g = Math.tanh(gates[gb + 2 * H + j]!),
        o = sigmoid(gates[gb + 3 * H + j]!);
      gates[gb + j] = i;
      gates[gb + H + j] = f;
      gates[gb + 2 * H + j] = g;
      gates[gb + 3 * H + j] = o;
      const cv = f * c[prev + j]! + i * g;
      c[out + j] = cv;
      h[out + j] = o * Math.tanh(cv);
    }
  }
}

export function lstmCellBackward(
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
  const NH = N * H,
    G4 = 4 * H;
  for (let n = 0; n < N; n++) {
    const zb = (t * N + n) * G4,
      dcb = n * H;
    if (t >= lengths[n]!) {
      dz.fill(0, zb, zb + G4);
      dc.fill(0, dcb, dcb + H);
      continue;
    }
    const prev = t * NH + n * H,
      cur = prev + NH;
    for (let j = 0; j < H; j++) {
      const i = gates[zb + j]!,
        f = gates[zb + H + j]!,
        g = gates[zb + 2 * H + j]!,
        o = gates[zb + 3 * H + j]!;
      const dhv = dh[cur + j]!,
        tc = Math.tanh(c[cur + j]!);
      const dcv = dc[dcb + j]! + dhv * o * (1 - tc * tc);
      dz[zb + j] = dcv * g * i * (1 - i);
      dz[zb + H + j] = dcv * c[prev + j]! * f * (1 - f);
      dz[zb + 2 * H + j] = dcv * i * (1 - g * g);
      dz[zb + 3 * H + j] = dhv * tc * o * (1 - o);
      dc[dcb + j] = dcv * f;
    }
  }
}

export function gruCellForward(
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
  const NH = N * H,
    G3 = 3 * H;
  for (let n = 0; n < N; n++) {
    const prev = t * NH + n * H,
      out = prev + NH;
    if (t >= lengths[n]!) {
      h.fill(0, out, out + H);
      continue;
    }
    const gb = (t * N + n) * G3,
      rb = n * G3;
    for (let j = 0; j < H; j++) {
      const r = sigmoid(gates[gb + j]! + rec[rb + j]! + bhh[j]!);
      const z = sigmoid(gates[gb + H + j]! + rec[rb + H + j]! + bhh[H + j]!);
      const hnv = rec[rb + 2 * H + j]! + bhh[2 * H + j]!;
      const nv = Math.tanh(gates[gb + 2 * H + j]! + r * hnv);
      gates[gb + j] = r;
      gates[gb + H + j] = z;
      gates[gb + 2 * H + j] = nv;
      hn[prev + j] = hnv;
      h[out + j] = (1 - z) * nv + z * h[prev + j]!;
    }
  }
}

export function gruCellBackward(
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
  const NH = N * H,
    G3 = 3 * H;
  for (let n = 0; n < N; n++) {
    const zb = (t * N + n) * G3;
    if (t >= lengths[n]!) {
      dzx.fill(0, zb, zb + G3);
      dzh.fill(0, zb, zb + G3);
      continue;
    }
    const prev = t * NH + n * H,
      cur = prev + NH;
    for (let j = 0; j < H; j++) {
      const r = gates[zb + j]!,
        z = gates[zb + H + j]!,
        nv = gates[zb + 2 * H + j]!;
      const dhv = dh[cur + j]!,
        hp = h[prev + j]!;
      const dan = dhv * (1 - z) * (1 - nv * nv);
      const dar = dan * hn[prev + j]! * r * (1 - r);
      const daz = dhv * (hp - nv) * z * (1 - z);
      dzx[zb + j] = dar;
      dzx[zb + H + j] = daz;
      dzx[zb + 2 * H + j] = dan;
      dzh[zb + j] = dar;
      dzh[zb + H + j] = daz;
      dzh[zb + 2 * H + j] = dan * r;
      dh[prev + j] = dh[prev + j]! + dhv * z;
    }
  }
}
