/**
 * The `wasm` backend: AssemblyScript SIMD128 kernels (assembly/ → build/kernels*.wasm).
 *
 * Each backend owns one module instance and one shared WebAssembly.Memory (so every array from
 * `alloc` is SharedArrayBuffer-backed and stays valid when the memory grows). Kernels read and
 * write wasm memory directly: arrays from `alloc` are used in place; any other array (a dataset
 * batch, a plain Float32Array) is copied into temporary wasm blocks and, for outputs, copied back.
 * Arrays are never freed unless `free` is called. One backend per thread: instances share nothing.
 */
import {
  activationParam,
  type ActivationKind,
  type AdamParams,
  type Backend,
  type Conv2DGeometry,
  type PackedMatrix,
  type Pool2DGeometry,
  type SgdParams,
} from '../backend.ts';
import { WasmHeap, type HeapSource, type WasmArray } from './heap.ts';
import { loadKernels, type KernelExports } from './loader.ts';
import * as rnn from './recurrent.ts';
import { checkRows } from '../js/rows.ts';

export interface WasmBackend extends Backend {
  /** True when the relaxed-SIMD (fused multiply-add) build is in use. */
  readonly relaxed: boolean;
  /** This backend's memory (shared). */
  readonly memory: WebAssembly.Memory;
  /** A zeroed Int32Array in wasm memory (e.g. max-pool argmax, labels), used without copies. */
  allocInt32(length: number): Int32Array;
  /** Give back an array from `alloc`/`allocInt32` for reuse by a later allocation of the same size. */
  free(a: WasmArray): void;
  /** True when `a` lives in this backend's memory (kernels then use it without copying). */
  owns(a: WasmArray): boolean;
  /** Tuning hooks for benchmarks: gemm blocking and the im2col chunk size in bytes. */
  tune(opts: { mc?: number; kc?: number; nc?: number; convChunkBytes?: number }): void;
}

const ACTIVATIONS: Record<ActivationKind, number> = {
  relu: 0,
  clippedRelu: 1,
  tanh: 2,
  sigmoid: 3,
  linear: 4,
  gelu: 5,
  leakyRelu: 6,
};
/** Minimum im2col scratch; conv chunks aim at 256 KiB (see assembly/conv.ts). */
const MIN_COL_BYTES = 1 << 20;

interface Staged {
  arr: WasmArray;
  ptr: number;
  bytes: number;
  back: boolean;
}

function need(what: string, name: string, a: { length: number }, n: number): void {
  if (a.length < n) throw new RangeError(`${what}: ${name} has ${a.length} values, needs ${n}`);
}

function checkGeometry(what: string, g: Conv2DGeometry | Pool2DGeometry): void {
  for (const [k, v] of Object.entries(g)) {
    if (!Number.isInteger(v) || v < 0)
      throw new RangeError(`${what}: geometry field ${k} must be a non-negative integer, got ${v}`);
  }
  if (g.strideH < 1 || g.strideW < 1) throw new RangeError(`${what}: strides must be ≥ 1`);
}

class WasmKernels implements WasmBackend, rnn.WasmAccess {
  readonly name = 'wasm';
  readonly relaxed: boolean;
  readonly memory: WebAssembly.Memory;
  // e, heap, ptr and done are what the kernels in ./recurrent.ts use (rnn.WasmAccess)
  readonly e: KernelExports;
  readonly heap: WasmHeap;
  private colPtr = 0;
  private colBytes = 0;
  private readonly staged: Staged[] = [];

  constructor(e: KernelExports, memory: WebAssembly.Memory, relaxed: boolean, source?: HeapSource) {
    this.e = e;
    this.memory = memory;
    this.relaxed = relaxed;
    this.heap = new WasmHeap(memory, e.heapBase(), source);
    e.setGemmScratch(this.heap.allocBytes(e.gemmScratchBytes()));
    this.ensureCol(MIN_COL_BYTES);
  }

  // ------------------------------------------------------------------ memory

  alloc = (length: number, _shared?: boolean): Float32Array => this.heap.allocF32(length);
  allocInt32 = (length: number): Int32Array => this.heap.allocI32(length);
  free = (a: WasmArray): void => this.heap.free(a);
  owns = (a: WasmArray): boolean => this.heap.owns(a);

  tune = (opts: { mc?: number; kc?: number; nc?: number; convChunkBytes?: number }): void => {
    if (opts.mc !== undefined || opts.kc !== undefined || opts.nc !== undefined) {
      this.e.setBlocking(opts.mc ?? 128, opts.kc ?? 384, opts.nc ?? 1024);
    }
    if (opts.convChunkBytes !== undefined) {
      this.e.setConvChunkBytes(opts.convChunkBytes);
      this.ensureCol(opts.convChunkBytes * 2);
    }
  };

  private ensureCol(bytes: number): void {
    if (bytes <= this.colBytes) return;
    if (this.colBytes > 0) this.heap.freeBytes(this.colPtr, this.colBytes);
    this.colBytes = Math.max(bytes, MIN_COL_BYTES);
    this.colPtr = this.heap.allocBytes(this.colBytes);
  }

  /** Wasm address of `a`: itself when it lives in wasm memory, else a staged copy (copied back after when `back`). */
  ptr(a: WasmArray, back: boolean): number {
    if (this.heap.owns(a)) return a.byteOffset;
    for (const s of this.staged) {
      if (s.arr === a) {
        s.back ||= back;
        return s.ptr;
      }
    }
    const bytes = a.length * 4;
    const ptr = this.heap.allocBytes(bytes);
    const view = a instanceof Int32Array ? this.heap.i32(ptr, a.length) : this.heap.f32(ptr, a.length);
    view.set(a as never);
    this.staged.push({ arr: a, ptr, bytes, back });
    return ptr;
  }

  /** Copies staged outputs back and releases the staging blocks. */
  done(): void {
    if (this.staged.length === 0) return;
    for (const s of this.staged) {
      if (s.back) {
        const view =
          s.arr instanceof Int32Array ? this.heap.i32(s.ptr, s.arr.length) : this.heap.f32(s.ptr, s.arr.length);
        s.arr.set(view as never);
      }
      this.heap.freeBytes(s.ptr, s.bytes);
    }
    this.staged.length = 0;
  }

  /** Runs `fn`, always releasing staging (also when it throws). */
  run<T>(fn: () => T): T {
    try {
      return fn();
    } finally {
      this.done();
    }
  }

  // ------------------------------------------------------------------ kernels

  gemm = (
    transA: boolean,
    transB: boolean,
    M: number,
    N: number,
    K: number,
    alpha: number,
    A: Float32Array,
    B: Float32Array,
    beta: number,
    C: Float32Array,
  ): void => {
    need('gemm', 'A', A, M * K);
    need('gemm', 'B', B, K * N);
    need('gemm', 'C', C, M * N);
    if (M === 0 || N === 0) return;
    this.run(() =>
      this.e.gemm(
        transA ? 1 : 0,
        transB ? 1 : 0,
        M,
        N,
        K,
        alpha,
        this.ptr(A, false),
        this.ptr(B, false),
        beta,
        this.ptr(C, true),
      ),
    );
  };

  packB = (transB: boolean, K: number, N: number, B: Float32Array, into?: PackedMatrix | null): PackedMatrix =>
    rnn.packB(this, transB, K, N, B, into);

  gemmPacked = (
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
  ): void => rnn.gemmPacked(this, transA, M, N, K, alpha, A, P, beta, C, aOffset, cOffset);

  lstmCellForward = (
    t: number,
    N: number,
    H: number,
    gates: Float32Array,
    c: Float32Array,
    h: Float32Array,
    lengths: Int32Array,
  ): void => rnn.lstmCellForward(this, t, N, H, gates, c, h, lengths);

  lstmCellBackward = (
    t: number,
    N: number,
    H: number,
    gates: Float32Array,
    c: Float32Array,
    dh: Float32Array,
    dc: Float32Array,
    dz: Float32Array,
    lengths: Int32Array,
  ): void => rnn.lstmCellBackward(this, t, N, H, gates, c, dh, dc, dz, lengths);

  gruCellForward = (
    t: number,
    N: number,
    H: number,
    gates: Float32Array,
    rec: Float32Array,
    bhh: Float32Array,
    hn: Float32Array,
    h: Float32Array,
    lengths: Int32Array,
  ): void => rnn.gruCellForward(this, t, N, H, gates, rec, bhh, hn, h, lengths);

  gruCellBackward = (
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
  ): void => rnn.gruCellBackward(this, t, N, H, gates, hn, h, dh, dzx, dzh, lengths);

  private convChecks(what: string, g: Conv2DGeometry): number {
    checkGeometry(what, g);
    const K = g.KH * g.KW * g.C;
    this.ensureCol(Math.max(K * 4 * 16, g.F * 8));
    return K;
  }

  conv2dForward = (
    x: Float32Array,
    w: Float32Array,
    bias: Float32Array | null,
    y: Float32Array,
    g: Conv2DGeometry,
  ): void => {
    const K = this.convChecks('conv2dForward', g);
    need('conv2dForward', 'x', x, g.N * g.H * g.W * g.C);
    need('conv2dForward', 'w', w, K * g.F);
    need('conv2dForward', 'y', y, g.N * g.OH * g.OW * g.F);
    if (bias) need('conv2dForward', 'bias', bias, g.F);
    this.run(() =>
      this.e.conv2dForward(
        this.ptr(x, false),
        this.ptr(w, false),
        bias ? this.ptr(bias, false) : 0,
        this.ptr(y, true),
        g.N,
        g.H,
        g.W,
        g.C,
        g.KH,
        g.KW,
        g.F,
        g.strideH,
        g.strideW,
        g.padTop,
        g.padLeft,
        g.OH,
        g.OW,
        this.colPtr,
        this.colBytes,
      ),
    );
  };

  conv2dBackwardData = (dy: Float32Array, w: Float32Array, dx: Float32Array, g: Conv2DGeometry): void => {
    const K = this.convChecks('conv2dBackwardData', g);
    need('conv2dBackwardData', 'dy', dy, g.N * g.OH * g.OW * g.F);
    need('conv2dBackwardData', 'w', w, K * g.F);
    need('conv2dBackwardData', 'dx', dx, g.N * g.H * g.W * g.C);
    this.run(() =>
      this.e.conv2dBackwardData(
        this.ptr(dy, false),
        this.ptr(w, false),
        this.ptr(dx, true),
        g.N,
        g.H,
        g.W,
        g.C,
        g.KH,
        g.KW,
        g.F,
        g.strideH,
        g.strideW,
        g.padTop,
        g.padLeft,
        g.OH,
        g.OW,
        this.colPtr,
        this.colBytes,
      ),
    );
  };

  conv2dBackwardFilter = (
    x: Float32Array,
    dy: Float32Array,
    dw: Float32Array,
    db: Float32Array | null,
    g: Conv2DGeometry,
  ): void => {
    const K = this.convChecks('conv2dBackwardFilter', g);
    need('conv2dBackwardFilter', 'x', x, g.N * g.H * g.W * g.C);
    need('conv2dBackwardFilter', 'dy', dy, g.N * g.OH * g.OW * g.F);
    need('conv2dBackwardFilter', 'dw', dw, K * g.F);
    if (db) need('conv2dBackwardFilter', 'db', db, g.F);
    this.run(() => {
      const pdy = this.ptr(dy, false);
      this.e.conv2dBackwardFilter(
        this.ptr(x, false),
        pdy,
        this.ptr(dw, true),
        g.N,
        g.H,
        g.W,
        g.C,
        g.KH,
        g.KW,
        g.F,
        g.strideH,
        g.strideW,
        g.padTop,
        g.padLeft,
        g.OH,
        g.OW,
        this.colPtr,
        this.colBytes,
      );
      if (db) this.e.biasGrad(pdy, this.ptr(db, true), g.N * g.OH * g.OW, g.F, this.colPtr);
    });
  };

  maxPoolForward = (x: Float32Array, y: Float32Array, argmax: Int32Array, g: Pool2DGeometry): void => {
    checkGeometry('maxPoolForward', g);
    const out = g.N * g.OH * g.OW * g.C;
    need('maxPoolForward', 'x', x, g.N * g.H * g.W * g.C);
    need('maxPoolForward', 'y', y, out);
    need('maxPoolForward', 'argmax', argmax, out);
    this.run(() =>
      this.e.maxPoolForward(
        this.ptr(x, false),
        this.ptr(y, true),
        this.ptr(argmax, true),
        g.N,
        g.H,
        g.W,
        g.C,
        g.KH,
        g.KW,
        g.strideH,
        g.strideW,
        g.padTop,
        g.padLeft,
        g.OH,
        g.OW,
      ),
    );
  };

  maxPoolBackward = (dy: Float32Array, argmax: Int32Array, dx: Float32Array, g: Pool2DGeometry): void => {
    checkGeometry('maxPoolBackward', g);
    const out = g.N * g.OH * g.OW * g.C,
      inp = g.N * g.H * g.W * g.C;
    need('maxPoolBackward', 'dy', dy, out);
    need('maxPoolBackward', 'argmax', argmax, out);
    need('maxPoolBackward', 'dx', dx, inp);
    this.run(() => this.e.maxPoolBackward(this.ptr(dy, false), this.ptr(argmax, false), this.ptr(dx, true), out, inp));
  };

  avgPoolForward = (x: Float32Array, y: Float32Array, g: Pool2DGeometry): void => {
    checkGeometry('avgPoolForward', g);
    need('avgPoolForward', 'x', x, g.N * g.H * g.W * g.C);
    need('avgPoolForward', 'y', y, g.N * g.OH * g.OW * g.C);
    this.run(() =>
      this.e.avgPoolForward(
        this.ptr(x, false),
        this.ptr(y, true),
        g.N,
        g.H,
        g.W,
        g.C,
        g.KH,
        g.KW,
        g.strideH,
        g.strideW,
        g.padTop,
        g.padLeft,
        g.OH,
        g.OW,
      ),
    );
  };

  avgPoolBackward = (dy: Float32Array, dx: Float32Array, g: Pool2DGeometry): void => {
    checkGeometry('avgPoolBackward', g);
    need('avgPoolBackward', 'dy', dy, g.N * g.OH * g.OW * g.C);
    need('avgPoolBackward', 'dx', dx, g.N * g.H * g.W * g.C);
    this.run(() =>
      this.e.avgPoolBackward(
        this.ptr(dy, false),
        this.ptr(dx, true),
        g.N,
        g.H,
        g.W,
        g.C,
        g.KH,
        g.KW,
        g.strideH,
        g.strideW,
        g.padTop,
        g.padLeft,
        g.OH,
        g.OW,
      ),
    );
  };

  biasAdd = (x: Float32Array, bias: Float32Array, y: Float32Array, rows: number, cols: number): void => {
    need('biasAdd', 'x', x, rows * cols);
    need('biasAdd', 'bias', bias, cols);
    need('biasAdd', 'y', y, rows * cols);
    this.run(() => this.e.biasAdd(this.ptr(x, false), this.ptr(bias, false), this.ptr(y, true), rows, cols));
  };

  biasGrad = (dy: Float32Array, db: Float32Array, rows: number, cols: number): void => {
    need('biasGrad', 'dy', dy, rows * cols);
    need('biasGrad', 'db', db, cols);
    this.ensureCol(cols * 8);
    this.run(() => this.e.biasGrad(this.ptr(dy, false), this.ptr(db, true), rows, cols, this.colPtr));
  };

  dropoutForward = (
    k0: number,
    k1: number,
    counter: number,
    n: number,
    keep: number,
    scale: number,
    x: Float32Array,
    mask: Float32Array,
    y: Float32Array,
  ): void => {
    need('dropoutForward', 'x', x, n);
    need('dropoutForward', 'mask', mask, n);
    need('dropoutForward', 'y', y, n);
    this.run(() =>
      this.e.dropoutForward(
        k0,
        k1,
        counter,
        n,
        keep,
        scale,
        this.ptr(x, false),
        this.ptr(mask, true),
        this.ptr(y, true),
      ),
    );
  };

  dropoutBackward = (dy: Float32Array, mask: Float32Array, dx: Float32Array, n: number): void => {
    need('dropoutBackward', 'dy', dy, n);
    need('dropoutBackward', 'mask', mask, n);
    need('dropoutBackward', 'dx', dx, n);
    this.run(() => this.e.dropoutBackward(this.ptr(dy, false), this.ptr(mask, false), this.ptr(dx, true), n));
  };

  copyRows = (
    from: Float32Array,
    fromStarts: Int32Array,
    to: Float32Array,
    toStarts: Int32Array,
    count: number,
    width: number,
    add: boolean,
  ): void => {
    checkRows('copyRows', from, fromStarts, to, toStarts, count, width);
    this.run(() =>
      this.e.copyRows(
        this.ptr(from, false),
        this.ptr(fromStarts, false),
        this.ptr(to, true),
        this.ptr(toStarts, false),
        count,
        width,
        add ? 1 : 0,
      ),
    );
  };

  channelCentredSquares = (x: Float32Array, mean: Float32Array, out: Float32Array, rows: number, C: number): void => {
    need('channelCentredSquares', 'x', x, rows * C);
    need('channelCentredSquares', 'mean', mean, C);
    need('channelCentredSquares', 'out', out, C);
    this.ensureCol(C * 8);
    this.run(() =>
      this.e.channelCentredSquares(
        this.ptr(x, false),
        this.ptr(mean, false),
        this.ptr(out, true),
        rows,
        C,
        this.colPtr,
      ),
    );
  };

  batchNormNormalise = (
    x: Float32Array,
    mean: Float32Array,
    invStd: Float32Array,
    gamma: Float32Array,
    beta: Float32Array,
    xhat: Float32Array,
    y: Float32Array,
    rows: number,
    C: number,
  ): void => {
    const fn = 'batchNormNormalise';
    need(fn, 'x', x, rows * C);
    need(fn, 'xhat', xhat, rows * C);
    need(fn, 'y', y, rows * C);
    need(fn, 'mean', mean, C);
    need(fn, 'invStd', invStd, C);
    need(fn, 'gamma', gamma, C);
    need(fn, 'beta', beta, C);
    this.run(() =>
      this.e.batchNormNormalise(
        this.ptr(x, false),
        this.ptr(mean, false),
        this.ptr(invStd, false),
        this.ptr(gamma, false),
        this.ptr(beta, false),
        this.ptr(xhat, true),
        this.ptr(y, true),
        rows,
        C,
      ),
    );
  };

  batchNormGradSums = (dy: Float32Array, xhat: Float32Array, out: Float32Array, rows: number, C: number): void => {
    need('batchNormGradSums', 'dy', dy, rows * C);
    need('batchNormGradSums', 'xhat', xhat, rows * C);
    need('batchNormGradSums', 'out', out, 2 * C);
    this.ensureCol(2 * C * 8);
    this.run(() =>
      this.e.batchNormGradSums(this.ptr(dy, false), this.ptr(xhat, false), this.ptr(out, true), rows, C, this.colPtr),
    );
  };

  batchNormInputGrad = (
    dy: Float32Array,
    xhat: Float32Array,
    gamma: Float32Array,
    invStd: Float32Array,
    sums: Float32Array,
    M: number,
    dx: Float32Array,
    rows: number,
    C: number,
  ): void => {
    const fn = 'batchNormInputGrad';
    need(fn, 'dy', dy, rows * C);
    need(fn, 'xhat', xhat, rows * C);
    need(fn, 'dx', dx, rows * C);
    need(fn, 'gamma', gamma, C);
    need(fn, 'invStd', invStd, C);
    need(fn, 'sums', sums, 2 * C);
    this.ensureCol(C * 8);
    this.run(() =>
      this.e.batchNormInputGrad(
        this.ptr(dy, false),
        this.ptr(xhat, false),
        this.ptr(gamma, false),
        this.ptr(invStd, false),
        this.ptr(sums, false),
        M,
        this.ptr(dx, true),
        rows,
        C,
        this.colPtr,
      ),
    );
  };

  activationForward = (kind: ActivationKind, x: Float32Array, y: Float32Array, param?: number): void => {
    const k = ACTIVATIONS[kind],
      cap = activationParam(kind, param);
    if (k === undefined) throw new Error(`activationForward: unknown activation '${String(kind)}'`);
    const n = x.length;
    need('activationForward', 'y', y, n);
    this.run(() => this.e.activationForward(k, this.ptr(x, false), this.ptr(y, true), n, cap));
  };

  activationBackward = (
    kind: ActivationKind,
    y: Float32Array,
    dy: Float32Array,
    dx: Float32Array,
    param?: number,
  ): void => {
    const k = ACTIVATIONS[kind],
      cap = activationParam(kind, param);
    if (k === undefined) throw new Error(`activationBackward: unknown activation '${String(kind)}'`);
    const n = y.length;
    need('activationBackward', 'dy', dy, n);
    need('activationBackward', 'dx', dx, n);
    this.run(() => this.e.activationBackward(k, this.ptr(y, false), this.ptr(dy, false), this.ptr(dx, true), n, cap));
  };

  softmaxCrossEntropy = (
    logits: Float32Array,
    labels: Int32Array,
    rows: number,
    classes: number,
    dlogits: Float32Array,
    gradScale: number,
  ): number => {
    need('softmaxCrossEntropy', 'logits', logits, rows * classes);
    need('softmaxCrossEntropy', 'labels', labels, rows);
    need('softmaxCrossEntropy', 'dlogits', dlogits, rows * classes);
    for (let r = 0; r < rows; r++) {
      const label = labels[r]!;
      if (!(label >= 0 && label < classes)) {
        throw new Error(`softmaxCrossEntropy: row ${r} has label ${label}, expected a class in 0..${classes - 1}`);
      }
    }
    return this.run(() =>
      this.e.softmaxCrossEntropy(
        this.ptr(logits, false),
        this.ptr(labels, false),
        rows,
        classes,
        this.ptr(dlogits, true),
        gradScale,
      ),
    );
  };

  axpy = (alpha: number, x: Float32Array, y: Float32Array): void => {
    need('axpy', 'y', y, x.length);
    this.run(() => this.e.axpy(alpha, this.ptr(x, false), this.ptr(y, true), x.length));
  };

  scale = (alpha: number, x: Float32Array): void => {
    this.run(() => this.e.scale(alpha, this.ptr(x, true), x.length));
  };

  adamStep = (params: Float32Array, grads: Float32Array, m: Float32Array, v: Float32Array, p: AdamParams): void => {
    const n = params.length;
    need('adamStep', 'grads', grads, n);
    need('adamStep', 'm', m, n);
    need('adamStep', 'v', v, n);
    const { lr, beta1, beta2, eps, weightDecay, decoupled, step } = p;
    if (!(step >= 1)) throw new Error(`adamStep: step must be 1-based, got ${step}`);
    const invBc1 = 1 / (1 - beta1 ** step);
    const invBc2 = 1 / (1 - beta2 ** step);
    const l2 = decoupled ? 0 : weightDecay;
    const shrink = decoupled ? 1 - lr * weightDecay : 1;
    this.run(() =>
      this.e.adamStep(
        this.ptr(params, true),
        this.ptr(grads, false),
        this.ptr(m, true),
        this.ptr(v, true),
        n,
        lr,
        beta1,
        beta2,
        1 - beta1,
        1 - beta2,
        eps,
        l2,
        shrink,
        invBc1,
        invBc2,
      ),
    );
  };

  sgdStep = (params: Float32Array, grads: Float32Array, velocity: Float32Array | null, p: SgdParams): void => {
    const n = params.length;
    need('sgdStep', 'grads', grads, n);
    if (p.momentum > 0) {
      if (!velocity) throw new Error('sgdStep: momentum > 0 needs a velocity buffer');
      need('sgdStep', 'velocity', velocity, n);
    }
    this.run(() =>
      this.e.sgdStep(
        this.ptr(params, true),
        this.ptr(grads, false),
        p.momentum > 0 ? this.ptr(velocity!, true) : 0,
        n,
        p.lr,
        p.momentum,
        p.nesterov ? 1 : 0,
        p.weightDecay,
      ),
    );
  };
}

/** This thread's shared heap for backends built without one (see `useSharedHeap`). */
let threadHeap: HeapSource | undefined;

/**
 * Makes every wasm-based backend this thread builds afterwards (wasm, and native and onednn, which
 * allocate through wasm) keep its memory in `source`: a device thread of a shm world passes its
 * communicator's `heapSource()`, so its flat buffers live in the world's arena and peers reduce
 * them in place. Call it before the thread's first `getBackend`.
 */
export function useSharedHeap(source: HeapSource): void {
  threadHeap = source;
}

/**
 * A new wasm backend (its own module instance and shared memory — or `heap`'s memory, by default
 * the thread's `useSharedHeap` one), or null when build/kernels.wasm is missing or this runtime lacks WebAssembly SIMD. The relaxed-SIMD build is preferred when it
 * works here; `{ relaxed: false }` (or PARATRAIN_WASM_RELAXED=0) forces the plain SIMD128 build.
 */
export async function createWasmBackend(
  opts: { relaxed?: boolean; heap?: HeapSource } = {},
): Promise<WasmBackend | null> {
  const source = opts.heap ?? threadHeap;
  let loaded;
  try {
    loaded = await loadKernels({ relaxed: opts.relaxed, memory: source?.memory });
  } catch (err) {
    if (process.env.PARATRAIN_WASM_RELAXED === '1') throw err;
    return null;
  }
  if (!loaded) return null;
  return new WasmKernels(loaded.exports, loaded.memory, loaded.relaxed, source);
}

export type { WasmArray, HeapSource };
