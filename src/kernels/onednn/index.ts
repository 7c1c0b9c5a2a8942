/**
 * The optional `onednn` backend: oneDNN's primitives (the library behind PyTorch's CPU
 * convolutions) through an N-API addon, dispatched by oneDNN for the CPU it finds (AVX-512, AVX2 …).
 *
 * Like `native`, it is composed, not copied: the object `createWasmBackend()` returns is the
 * prototype (allocation in the wasm backend's shared memory, and the optimizer steps, axpy and
 * scale, which are memory-bound loops over flat buffers where wasm SIMD is already at the memory's
 * speed), and the kernels oneDNN has primitives for are overridden by addon calls:
 *
 * | kernel | in the addon |
 * | --- | --- |
 * | gemm | matmul primitive (transposes as strides, alpha as output scale, beta as a sum post-op) |
 * | attention's four kernels | batched matmul primitives over chunks of heads, the softmax rows and their backward in C (AVX-512 where oneDNN uses it; native/onednn/attention.c); the js kernels over the gemm above where oneDNN declines |
 * | packB / gemmPacked | the same primitive on weights reordered once per pass into its own layout (without AVX-512: dnnl_sgemm on op(B) copied into padded rows, native/onednn/packed.c) |
 * | conv2d forward / backward-data / backward-filter | convolution primitives on NHWC memory, weights reordered to oneDNN's blocked format; relu fused as a post-op; few input channels: the addon's AVX-512 kernels |
 * | max/avg pool forward, avg pool backward | pooling primitives (max: workspace → flat argmax in C) |
 * | max pool backward | a C scatter through argmax |
 * | activations | eltwise primitives (backward from the forward output; gelu's from the input) |
 * | biasAdd | binary add primitive (bias broadcast over rows) |
 * | copyRows | C, a memcpy a row (native/onednn/rows.c): attention's split into heads and join |
 * | softmaxCrossEntropy | log-softmax primitive, loss and gradient in C |
 * | biasGrad | C loop (column sums in double; AVX2 where the CPU has it) |
 * | channelCentredSquares, batchNormNormalise / GradSums / InputGrad | C with AVX-512, float64 like every backend's (native/onednn/batchnorm.c); the base's without it |
 * | dropoutForward | C with AVX-512: the same Philox draws, 16 blocks at a time (native/onednn/dropout.c); the base's without it |
 * | lstmCellForward / lstmCellBackward | the cell's element-wise step in C with AVX2 and FMA (native/onednn/cells.c; the base's cells without them) |
 * | recurrentSequenceForward / recurrentSequenceBackward | oneDNN's LSTM and linear-before-reset GRU primitives over a direction's T steps, with AVX-512 (native/onednn/rnn.c; PARATRAIN_ONEDNN_RNN chooses the cells); elsewhere not offered and the layer steps |
 *
 * The addon reads and writes any Float32Array in place — wasm memory, a SharedArrayBuffer, a plain
 * array, at any byteOffset — so nothing is copied. When oneDNN has no primitive for a call's shape
 * the addon says so and the base kernel runs instead (counted in `stats()`).
 *
 * oneDNN runs on the calling thread only (see ./addon.ts); one backend per thread, like wasm.
 */
import type { ActivationKind } from '../activation.ts';
import type { Backend } from '../backend.ts';
import type { Conv2DGeometry } from '../convKernels.ts';
import type { PackedMatrix } from '../matrixKernels.ts';
import type { Pool2DGeometry } from '../poolKernels.ts';
import type { SequenceCell } from '../recurrentKernels.ts';
import { jsBackend } from '../js/index.ts';
import { attentionKernels } from '../js/attention.ts';
import { checkRows } from '../js/rows.ts';
import { oneDnnAttention } from './attention.ts';
import { BackendSettingError } from '../registry.ts';
import { createWasmBackend, type WasmBackend } from '../wasm/index.ts';
import { loadOneDnnAddon, type OneDnnInfo, type OneDnnStats } from './addon.ts';

export {
  loadOneDnnAddon,
  onednnAddonPath,
  onednnUnavailableReason,
  type OneDnnAddon,
  type OneDnnInfo,
  type OneDnnStats,
} from './addon.ts';

export interface OneDnnBackend extends Backend {
  /** What oneDNN reports about itself: version, the ISA it dispatched, its runtime, threads in use. */
  readonly onednn: OneDnnInfo;
  /** The backend the kernels oneDNN does not take come from. */
  readonly base: 'wasm' | 'js';
  /** This thread's plans per kind: how many, calls handed to the base backend, the implementation chosen. */
  stats(): OneDnnStats;
  /** gemm through the matmul primitive (default) or oneDNN's dnnl_sgemm (benchmarks compare them); returns the previous mode. */
  setGemm(mode: 'matmul' | 'sgemm'): 'matmul' | 'sgemm';
  /** The addon's own kernels for shapes oneDNN is slow at (few input channels, see native/onednn/direct.c) on or off; returns the previous setting. */
  setDirect(on: boolean): boolean;
  /**
   * The cells whose directions run as one oneDNN primitive each (where offered: AVX-512); the others
   * step. Default: PARATRAIN_ONEDNN_RNN, else both (SEQUENCE_CELLS_DEFAULT). Returns the previous setting.
   */
  setSequenceCells(cells: readonly SequenceCell[]): SequenceCell[];
  /** The cells setSequenceCells chose (run as primitives where offered: AVX-512). */
  sequenceCells(): SequenceCell[];
}

/**
 * A matrix packed for gemmPacked: a copy of B, and B reordered into the layout oneDNN's matmul
 * primitive reads for one shape of products (made at the first product, for its M and transA:
 * native/onednn/packed.c); products of another shape, or where oneDNN has no such layout, multiply
 * by the copy.
 */
class OneDnnPacked implements PackedMatrix {
  readonly backend = 'onednn';
  /** B in the matmul's own layout, and the products it fits (`transA,M`; '' none yet, or B changed since) */
  packed: Float32Array | null = null;
  packedFor = '';
  constructor(
    readonly K: number,
    readonly N: number,
    public transB: boolean,
    readonly data: Float32Array,
  ) {}
}

/** The activations the addon runs as oneDNN eltwise primitives (gelu as gelu_erf); leakyRelu runs on the base backend. */
const ACTIVATIONS: Partial<Record<ActivationKind, number>> = {
  relu: 0,
  clippedRelu: 1,
  tanh: 2,
  sigmoid: 3,
  linear: 4,
  gelu: 5,
};
const DEFAULT_RELU_CAP = 20;
/** The addon's cell codes (native/onednn/rnn.c). */
const SEQUENCE_CELLS: Record<SequenceCell, number> = { lstm: 0, gru: 1 };

/**
 * The cells run as whole-direction primitives unless PARATRAIN_ONEDNN_RNN says otherwise: both, a
 * few percent faster than stepping on a Zen 4, though with oneDNN's workspace the layer keeps 3–3.4×
 * as much for backward (docs/backends.md: `none` trades that speed for memory).
 */
const SEQUENCE_CELLS_DEFAULT: readonly SequenceCell[] = ['lstm', 'gru'];

/** PARATRAIN_ONEDNN_RNN: a comma-separated list of cells (lstm, gru), or none; unset: the default. */
export function sequenceCellsFromEnv(value = process.env.PARATRAIN_ONEDNN_RNN): SequenceCell[] {
  if (value === undefined) return [...SEQUENCE_CELLS_DEFAULT];
  const names = value
    .split(',')
    .map((v) => v.trim().toLowerCase())
    .filter((v) => v !== '' && v !== 'none');
  for (const name of names) {
    if (!(name in SEQUENCE_CELLS)) {
      throw new BackendSettingError(
        `PARATRAIN_ONEDNN_RNN=${value}: "${name}" is not a cell; use a comma-separated list of lstm and gru, or none (every recurrent layer steps)`,
      );
    }
  }
  return [...new Set(names as SequenceCell[])];
}

/** A sequence call for a shape the workspace size said is not offered: the caller's mistake. */
function noSequence(fn: string, cell: SequenceCell, N: number, T: number, F: number, H: number): never {
  throw new Error(
    `${fn}: oneDNN has no ${cell.toUpperCase()} primitive for N=${N} T=${T} F=${F} H=${H} (ask recurrentSequenceWorkspace first)`,
  );
}

/** The activations a convolution applies in its own pass (exact: max and min), and the code for none. */
const FUSED_ACTIVATIONS: Partial<Record<ActivationKind, number>> = { relu: 0, clippedRelu: 1 };
const NO_ACTIVATION = 4;

type Geometry13 = [
  number,
  number,
  number,
  number,
  number,
  number,
  number,
  number,
  number,
  number,
  number,
  number,
  number,
];
type Geometry12 = [number, number, number, number, number, number, number, number, number, number, number, number];

function conv(g: Conv2DGeometry): Geometry13 {
  return [g.N, g.H, g.W, g.C, g.KH, g.KW, g.F, g.strideH, g.strideW, g.padTop, g.padLeft, g.OH, g.OW];
}

function pool(g: Pool2DGeometry): Geometry12 {
  return [g.N, g.H, g.W, g.C, g.KH, g.KW, g.strideH, g.strideW, g.padTop, g.padLeft, g.OH, g.OW];
}

/**
 * A new onednn backend over a new wasm backend (its own memory), or null when the addon is not
 * built or does not load here (`onednnUnavailableReason()` says why).
 */
export async function createOneDnnBackend(): Promise<OneDnnBackend | null> {
  const addon = loadOneDnnAddon();
  if (!addon) return null;
  const wasm: WasmBackend | null = await createWasmBackend();
  const base: Backend = wasm ?? jsBackend;
  const gemm: Backend['gemm'] = (transA, transB, M, N, K, alpha, A, B, beta, C) => {
    if (!addon.sgemm(transA, transB, M, N, K, alpha, A, B, beta, C))
      base.gemm(transA, transB, M, N, K, alpha, A, B, beta, C);
  };
  let sequenceCells = sequenceCellsFromEnv();
  const overrides: Partial<OneDnnBackend> &
    Pick<
      OneDnnBackend,
      'name' | 'onednn' | 'base' | 'stats' | 'setGemm' | 'setDirect' | 'setSequenceCells' | 'sequenceCells'
    > = {
    name: 'onednn',
    onednn: addon.info(),
    base: wasm ? 'wasm' : 'js',
    stats: () => addon.stats(),
    setGemm: (mode) => addon.setGemm(mode),
    setDirect: (on) => addon.setDirect(on),
    setSequenceCells: (cells) => {
      const was = sequenceCells;
      sequenceCells = [...cells];
      return was;
    },
    sequenceCells: () => [...sequenceCells],
    gemm,
    // attention in the addon: batched products and C softmax rows (the js kernels over gemm where it declines)
    ...oneDnnAttention(addon, attentionKernels(gemm)),
    // the recurrent layers' per-step products: B is copied once per pass, each step is one matmul primitive call
    packB: (transB, K, N, B, into) => {
      // a pack of the same size is refilled in place, as the other backends do
      const p =
        into instanceof OneDnnPacked && into.K === K && into.N === N
          ? into
          : new OneDnnPacked(K, N, transB, base.alloc(K * N));
      p.transB = transB;
      p.data.set(B.subarray(0, K * N));
      p.packedFor = '';
      return p;
    },
    gemmPacked: (transA, M, N, K, alpha, A, P, beta, C, aOffset = 0, cOffset = 0) => {
      if (!(P instanceof OneDnnPacked))
        throw new Error(`gemmPacked: the pack was made by the ${P.backend} backend, not onednn`);
      if (P.K !== K || P.N !== N)
        throw new RangeError(`gemmPacked: the pack is ${P.K}×${P.N}, the product needs ${K}×${N}`);
      const a = A.subarray(aOffset, aOffset + M * K),
        c = C.subarray(cOffset, cOffset + M * N);
      const shape = `${transA},${M}`;
      if (P.packedFor !== shape && P.packedFor !== `none ${shape}`) {
        // reorder B once per pass (packB), in the first product's shape
        const size = addon.packedWeightsSize(transA, P.transB, M, N, K);
        if (size > 0 && (!P.packed || P.packed.length < size)) P.packed = base.alloc(size);
        P.packedFor =
          size > 0 && addon.packWeights(transA, P.transB, M, N, K, P.data, P.packed!) ? shape : `none ${shape}`;
      }
      if (P.packedFor === shape && addon.gemmPackedWeights(transA, P.transB, M, N, K, alpha, a, P.packed!, beta, c))
        return;
      gemm(transA, P.transB, M, N, K, alpha, a, P.data, beta, c);
    },
    conv2dForward: (x, w, bias, y, g) => {
      if (!addon.conv2dForward(x, w, bias, y, ...conv(g), NO_ACTIVATION, 0)) base.conv2dForward(x, w, bias, y, g);
    },
    // relu and its clipped form as the convolution's post-op (or in direct.c's registers): one pass over y less
    conv2dForwardActivation: (kind, x, w, bias, y, g, cap) => {
      const code = FUSED_ACTIVATIONS[kind];
      return code !== undefined && addon.conv2dForward(x, w, bias, y, ...conv(g), code, cap ?? DEFAULT_RELU_CAP);
    },
    // conv → relu → 2×2 max pool of a first layer, without its largest activation (native/onednn/convpool.c)
    convPoolForward: (kind, x, w, bias, y, argmax, g, q, cap) => {
      const code = kind === 'linear' ? NO_ACTIVATION : FUSED_ACTIVATIONS[kind];
      return (
        code !== undefined &&
        addon.convPoolForward(x, w, bias, y, argmax, ...conv(g), ...pool(q), code, cap ?? DEFAULT_RELU_CAP)
      );
    },
    conv2dBackwardFilterPooled: (x, dyPool, argmax, dw, db, g, q, through) => {
      const code = through ? FUSED_ACTIVATIONS[through.kind] : NO_ACTIVATION;
      return (
        code !== undefined &&
        addon.conv2dBackwardFilterPooled(
          x,
          dyPool,
          argmax,
          dw,
          db,
          ...conv(g),
          ...pool(q),
          code,
          through?.y ?? null,
          through?.cap ?? DEFAULT_RELU_CAP,
        )
      );
    },
    conv2dBackwardData: (dy, w, dx, g) => {
      if (!addon.conv2dBackwardData(dy, w, dx, ...conv(g))) base.conv2dBackwardData(dy, w, dx, g);
    },
    conv2dBackwardFilter: (x, dy, dw, db, g) => {
      if (!addon.conv2dBackwardFilter(x, dy, dw, db, ...conv(g))) base.conv2dBackwardFilter(x, dy, dw, db, g);
    },
    maxPoolForward: (x, y, argmax, g) => {
      if (!addon.maxPoolForward(x, y, argmax, ...pool(g))) base.maxPoolForward(x, y, argmax, g);
    },
    maxPoolBackward: (dy, argmax, dx, g) => {
      if (!addon.maxPoolBackward(dy, argmax, dx, ...pool(g))) base.maxPoolBackward(dy, argmax, dx, g);
    },
    avgPoolForward: (x, y, g) => {
      if (!addon.avgPoolForward(x, y, ...pool(g))) base.avgPoolForward(x, y, g);
    },
    avgPoolBackward: (dy, dx, g) => {
      if (!addon.avgPoolBackward(dy, dx, ...pool(g))) base.avgPoolBackward(dy, dx, g);
    },
    copyRows: (from, fromStarts, to, toStarts, count, width, add) => {
      checkRows('copyRows', from, fromStarts, to, toStarts, count, width);
      addon.copyRows(from, fromStarts, to, toStarts, count, width, add);
    },
    biasAdd: (x, bias, y, rows, cols) => {
      if (!addon.biasAdd(x, bias, y, rows, cols)) base.biasAdd(x, bias, y, rows, cols);
    },
    biasGrad: (dy, db, rows, cols) => {
      if (!addon.biasGrad(dy, db, rows, cols)) base.biasGrad(dy, db, rows, cols);
    },
    channelCentredSquares: (x, mean, out, rows, C) => {
      if (!addon.channelCentredSquares(x, mean, out, rows, C)) base.channelCentredSquares(x, mean, out, rows, C);
    },
    batchNormNormalise: (x, mean, invStd, gamma, beta, xhat, y, rows, C) => {
      if (!addon.batchNormNormalise(x, mean, invStd, gamma, beta, xhat, y, rows, C))
        base.batchNormNormalise(x, mean, invStd, gamma, beta, xhat, y, rows, C);
    },
    batchNormGradSums: (dy, xhat, out, rows, C) => {
      if (!addon.batchNormGradSums(dy, xhat, out, rows, C)) base.batchNormGradSums(dy, xhat, out, rows, C);
    },
    batchNormInputGrad: (dy, xhat, gamma, invStd, sums, M, dx, rows, C) => {
      if (!addon.batchNormInputGrad(dy, xhat, gamma, invStd, sums, M, dx, rows, C))
        base.batchNormInputGrad(dy, xhat, gamma, invStd, sums, M, dx, rows, C);
    },
    dropoutForward: (k0, k1, counter, n, keep, scale, x, mask, y) => {
      if (!addon.dropoutForward(k0, k1, counter, n, keep, scale, x, mask, y))
        base.dropoutForward(k0, k1, counter, n, keep, scale, x, mask, y);
    },
    lstmCellForward: (t, N, H, gates, c, h, lengths) => {
      if (!addon.lstmCellForward(t, N, H, gates, c, h, lengths)) base.lstmCellForward(t, N, H, gates, c, h, lengths);
    },
    lstmCellBackward: (t, N, H, gates, c, dh, dc, dz, lengths) => {
      if (!addon.lstmCellBackward(t, N, H, gates, c, dh, dc, dz, lengths))
        base.lstmCellBackward(t, N, H, gates, c, dh, dc, dz, lengths);
    },
    // a direction's whole recurrence as one oneDNN primitive; both plans exist once the workspace size is known
    recurrentSequenceWorkspace: (cell, N, T, F, H) =>
      sequenceCells.includes(cell) ? addon.rnnWorkspaceSize(SEQUENCE_CELLS[cell], N, T, F, H) : 0,
    recurrentSequenceForward: (cell, N, T, F, H, x, w, h, workspace) => {
      if (!addon.rnnForward(SEQUENCE_CELLS[cell], N, T, F, H, x, w.wih, w.whh, w.bih, w.bhh, h, workspace))
        noSequence('recurrentSequenceForward', cell, N, T, F, H);
    },
    recurrentSequenceBackward: (cell, N, T, F, H, x, w, h, workspace, dh, dx, g) => {
      if (
        !addon.rnnBackward(
          SEQUENCE_CELLS[cell],
          N,
          T,
          F,
          H,
          x,
          w.wih,
          w.whh,
          w.bih,
          w.bhh,
          h,
          workspace,
          dh,
          dx,
          g.dwih,
          g.dwhh,
          g.dbih,
          g.dbhh,
        )
      ) {
        noSequence('recurrentSequenceBackward', cell, N, T, F, H);
      }
    },
    activationForward: (kind, x, y, cap) => {
      const code = ACTIVATIONS[kind];
      if (code === undefined || !addon.activationForward(code, x, y, cap ?? DEFAULT_RELU_CAP))
        base.activationForward(kind, x, y, cap);
    },
    activationBackward: (kind, y, dy, dx, cap) => {
      const code = ACTIVATIONS[kind];
      if (code === undefined || !addon.activationBackward(code, y, dy, dx, cap ?? DEFAULT_RELU_CAP))
        base.activationBackward(kind, y, dy, dx, cap);
    },
    softmaxCrossEntropy: (logits, labels, rows, classes, dlogits, gradScale) =>
      addon.softmaxCrossEntropy(logits, labels, rows, classes, dlogits, gradScale) ??
      base.softmaxCrossEntropy(logits, labels, rows, classes, dlogits, gradScale),
  };
  // Every other method (and wasm's memory, allocInt32, owns, free, relaxed, tune) comes from the base.
  return Object.assign(Object.create(base) as Backend, overrides) as OneDnnBackend;
}
