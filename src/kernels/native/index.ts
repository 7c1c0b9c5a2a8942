/**
 * The optional `native` backend: the wasm backend with its matrix products routed to OpenBLAS.
 *
 * It is composed, not copied: the object `createWasmBackend()` returns is the prototype, and only
 * `gemm`, the recurrent layers' packed gemm (`packB`, `gemmPacked`) and the three convolutions are
 * overridden (and attention's passes, rebuilt over this gemm), by calls into the N-API addon (native/paratrain_native.c: cblas_sgemm, and
 * convolutions as im2col + sgemm in chunks of output pixels, one addon call per layer;
 * native/recurrent.c: a pre-packed gemm for the recurrent steps). Allocation therefore stays in the
 * wasm backend's shared memory and pooling, activations, the recurrent cells, softmax and the
 * optimizer steps stay SIMD. The addon reads and writes
 * any Float32Array in place — wasm memory, a SharedArrayBuffer, a plain array, at any byteOffset —
 * so nothing is staged through copies. When the wasm kernels are not built, the plain-JS backend is
 * the base instead.
 *
 * OpenBLAS runs on the calling thread only (see ./addon.ts); one backend per thread, like wasm.
 */
import type { Backend } from '../backend.ts';
import type { Conv2DGeometry } from '../convKernels.ts';
import type { PackedMatrix } from '../matrixKernels.ts';
import { jsBackend } from '../js/index.ts';
import { attentionKernels } from '../js/attention.ts';
import { createWasmBackend, type WasmBackend } from '../wasm/index.ts';
import { loadNativeAddon, type BlasInfo, type NativeAddon } from './addon.ts';

export { loadNativeAddon, nativeAddonPath, nativeUnavailableReason, type BlasInfo, type NativeAddon } from './addon.ts';

export interface NativeBackend extends Backend {
  /** What OpenBLAS reports about itself (build, CPU kernels, threads in use). */
  readonly blas: BlasInfo;
  /** The backend the non-BLAS kernels come from. */
  readonly base: 'wasm' | 'js';
  /**
   * The recurrent steps' packed gemm: 'avx512f' (native/recurrent.c's kernel) or null, when this
   * CPU lacks AVX-512F, the addon predates it, or PARATRAIN_NATIVE_PACKED=0 (cblas_sgemm per step).
   */
  readonly packedKernel: string | null;
  /** Target bytes of one im2col chunk of the native convolutions (benchmarks tune it). */
  setConvChunkBytes(bytes: number): void;
}

/**
 * op(B) packed by the addon (native/recurrent.c: its AVX-512 micro-kernel reads the panels), or,
 * without that kernel, a reference to B that cblas_sgemm packs on every call.
 */
class NativePacked implements PackedMatrix {
  readonly backend = 'native';
  constructor(
    readonly K: number,
    readonly N: number,
    public transB: boolean,
    public B: Float32Array,
    readonly panels: Float32Array | null,
  ) {}
}

/** The addon's packed gemm when this CPU runs it and PARATRAIN_NATIVE_PACKED is not 0. */
function packedGemm(addon: NativeAddon) {
  const { packedKernel, packedLength, packB, gemmPacked } = addon;
  if (process.env.PARATRAIN_NATIVE_PACKED === '0' || !packedKernel || !packedLength || !packB || !gemmPacked)
    return null;
  const kernel = packedKernel();
  return kernel ? { kernel, packedLength, packB, gemmPacked } : null;
}

function nativePacking(addon: NativeAddon): Pick<NativeBackend, 'packB' | 'gemmPacked' | 'packedKernel'> {
  const prepacked = packedGemm(addon);
  return {
    packedKernel: prepacked?.kernel ?? null,
    packB: (transB: boolean, K: number, N: number, B: Float32Array, into?: PackedMatrix | null): PackedMatrix => {
      if (B.length < K * N) throw new RangeError(`packB: B has ${B.length} values, needs ${K * N}`);
      const p =
        into instanceof NativePacked && into.K === K && into.N === N
          ? into
          : new NativePacked(K, N, transB, B, prepacked ? new Float32Array(prepacked.packedLength(K, N)) : null);
      p.transB = transB;
      p.B = B;
      if (prepacked && p.panels) prepacked.packB(transB, K, N, B, p.panels);
      return p;
    },
    gemmPacked: (
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
    ): void => {
      if (!(P instanceof NativePacked))
        throw new Error(`gemmPacked: the pack was made by the ${P.backend} backend, not native`);
      if (P.K !== K || P.N !== N)
        throw new RangeError(`gemmPacked: the pack is ${P.K}×${P.N}, the product needs ${K}×${N}`);
      if (prepacked && P.panels) {
        prepacked.gemmPacked(transA, M, N, K, alpha, A, aOffset, P.panels, beta, C, cOffset);
        return;
      }
      if (A.length < aOffset + M * K || C.length < cOffset + M * N)
        throw new RangeError(`gemmPacked: A or C is too short for ${M}×${N}×${K} at offsets ${aOffset}, ${cOffset}`);
      addon.sgemm(
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
    },
  };
}

/**
 * A new native backend over a new wasm backend (its own memory), or null when the addon is not
 * built or does not load here (`nativeUnavailableReason()` says why).
 */
export async function createNativeBackend(): Promise<NativeBackend | null> {
  const addon = loadNativeAddon();
  if (!addon) return null;
  const wasm: WasmBackend | null = await createWasmBackend();
  const base: Backend = wasm ?? jsBackend;
  const baseName = wasm ? 'wasm' : 'js';
  const gemm: Backend['gemm'] = (transA, transB, M, N, K, alpha, A, B, beta, C) =>
    addon.sgemm(transA, transB, M, N, K, alpha, A, B, beta, C);
  const overrides = {
    name: 'native',
    blas: addon.info(),
    base: baseName,
    setConvChunkBytes: (bytes: number): void => addon.setConvChunkBytes(bytes),
    gemm,
    ...nativePacking(addon),
    // attention's products per (sample, head) in OpenBLAS too (the base's would use its own gemm)
    ...attentionKernels(gemm),
    // Every convolution goes to OpenBLAS: bench/kernels.ts measured it ahead of wasm on all six
    // conv kernels of mnist-small, even the first layer's (K = 3·3·1 = 9, where im2col dominates).
    conv2dForward: (
      x: Float32Array,
      w: Float32Array,
      bias: Float32Array | null,
      y: Float32Array,
      g: Conv2DGeometry,
    ): void => {
      addon.conv2dForward(
        x,
        w,
        bias,
        y,
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
      );
    },
    conv2dBackwardData: (dy: Float32Array, w: Float32Array, dx: Float32Array, g: Conv2DGeometry): void => {
      addon.conv2dBackwardData(
        dy,
        w,
        dx,
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
      );
    },
    conv2dBackwardFilter: (
      x: Float32Array,
      dy: Float32Array,
      dw: Float32Array,
      db: Float32Array | null,
      g: Conv2DGeometry,
    ): void => {
      addon.conv2dBackwardFilter(
        x,
        dy,
        dw,
        db,
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
      );
    },
  };
  // Every other method (and wasm's memory, allocInt32, owns, free, relaxed, tune) comes from the base.
  return Object.assign(Object.create(base) as Backend, overrides) as NativeBackend;
}
