/**
 * What one direction of a recurrent layer (lstm, gru) computes on, shared by the cells.
 *
 * Inside a direction everything is TIME-MAJOR: row (t, n) of a [T·N, ·] buffer is frame t of
 * sample n. That makes every step's rows one contiguous [N, ·] block (the recurrent projection is
 * one gemm per step, accumulated in place) and lets the weight gradients be one gemm each over all
 * frames: the hidden states [(T+1)·N, H] start with a zero block (h₋₁), so block t is the previous
 * state of frame t's row and dW_hh = dZᵀ·H[0 : T·N] lines up row for row. A reverse direction
 * gets its input already reversed per sample (step s is frame len − 1 − s), so it runs the same code.
 */
import type { Backend } from '../kernels/backend.ts';
import type { SequenceCell } from '../kernels/recurrentKernels.ts';
import type { BufferPool } from './layer.ts';

/** One direction's parameters and gradient views, PyTorch's layout: W_ih [G·H, F], W_hh [G·H, H]. */
export interface CellWeights {
  wih: Float32Array;
  whh: Float32Array;
  bih: Float32Array;
  bhh: Float32Array;
  dwih: Float32Array;
  dwhh: Float32Array;
  dbih: Float32Array;
  dbhh: Float32Array;
}

/** One direction's pass over a batch: sizes, valid steps per sample, input and hidden states. */
export interface CellRun {
  /** samples, steps (the batch's longest valid length), input features, units */
  N: number;
  T: number;
  F: number;
  H: number;
  /** valid steps of sample n (≤ T); steps past it are padding: zero state, no gradient */
  lengths: Int32Array;
  /** time-major input [T·N, F] (zero at padding) */
  x: Float32Array;
  /** hidden states [(T+1)·N, H]: block 0 is h₋₁ = 0, block t + 1 the state after step t (0 at padding) */
  h: Float32Array;
}

/** A recurrent cell's forward and backward through time over one direction. */
export interface Cell {
  /** gates per unit: 4 (LSTM i, f, g, o), 3 (GRU r, z, n) */
  readonly gates: number;
  /** Runs the recurrence, filling `run.h`; keeps what backward needs. */
  forward(w: CellWeights, run: CellRun): void;
  /**
   * Back through time after `forward` of the same run. `dh` [(T+1)·N, H] holds dL/dh from the
   * outputs in blocks 1…T (block t + 1 for step t; it is consumed). Accumulates the weight
   * gradients; writes dL/dx, time-major [T·N, F], into `dx` when given.
   */
  backward(w: CellWeights, run: CellRun, dh: Float32Array, dx: Float32Array | null): void;
  /** the arrays forward keeps for backward (activation memory) */
  saved(): readonly Float32Array[];
}

/**
 * Weight gradients and the input gradient of a direction from its pre-activation gradients, as gemms
 * over all steps. When dzx and dzh are the same array (LSTM) the bias gradient is summed once into
 * `db` (scratch [G·H]) and added to both biases.
 */
export function finishBackward(
  backend: Backend,
  w: CellWeights,
  run: CellRun,
  G: number,
  dzx: Float32Array,
  dzh: Float32Array,
  dx: Float32Array | null,
  db: Float32Array | null,
): void {
  const rows = run.T * run.N,
    GH = G * run.H;
  if (rows === 0) return;
  backend.gemm(true, false, GH, run.F, rows, 1, dzx, run.x, 1, w.dwih);
  backend.gemm(true, false, GH, run.H, rows, 1, dzh, run.h.subarray(0, rows * run.H), 1, w.dwhh);
  if (dzx === dzh && db) {
    backend.fill(db, 0);
    backend.biasGrad(dzx, db, rows, GH);
    backend.axpy(1, db, w.dbih);
    backend.axpy(1, db, w.dbhh);
  } else {
    backend.biasGrad(dzx, w.dbih, rows, GH);
    backend.biasGrad(dzh, w.dbhh, rows, GH);
  }
  if (dx) backend.gemm(false, false, rows, run.F, GH, 1, dzx, w.wih, 0, dx);
}

const NO_WORKSPACE = new Float32Array(0);

/**
 * The backend's run of a whole direction (Backend.recurrentSequenceForward: oneDNN's LSTM or GRU
 * primitive) where it offers one for this cell and shape: fills `run.h` and returns the workspace
 * backward reads (from the pool under `key`); where it is not offered, an empty array and nothing
 * done (the cell steps). The backend runs every sample through all T steps: the states it computed
 * past a sample's end are set to 0 here.
 */
export function sequenceForward(
  backend: Backend,
  pool: BufferPool,
  key: string,
  cell: SequenceCell,
  w: CellWeights,
  run: CellRun,
): Float32Array {
  const { N, T, F, H, lengths, x, h } = run;
  const NH = N * H;
  const floats = N * T > 0 ? (backend.recurrentSequenceWorkspace?.(cell, N, T, F, H) ?? 0) : 0;
  if (floats === 0) return NO_WORKSPACE;
  const workspace = pool.f32(`${key}.workspace`, floats);
  h.fill(0, 0, NH);
  backend.recurrentSequenceForward!(cell, N, T, F, H, x, w, h.subarray(NH, (T + 1) * NH), workspace);
  for (let n = 0; n < N; n++)
    for (let t = lengths[n]!; t < T; t++) h.fill(0, (t + 1) * NH + n * H, (t + 1) * NH + (n + 1) * H);
  return workspace;
}

/**
 * Back through a direction `sequenceForward` ran (its workspace given), as Cell.backward. dh is 0
 * past each sample's end (nothing reads those outputs), so the padding sends back no gradient.
 */
export function sequenceBackward(
  backend: Backend,
  pool: BufferPool,
  key: string,
  cell: SequenceCell,
  w: CellWeights,
  run: CellRun,
  workspace: Float32Array,
  dh: Float32Array,
  dx: Float32Array | null,
): void {
  const { N, T, F, H } = run;
  const NH = N * H;
  backend.recurrentSequenceBackward!(
    cell,
    N,
    T,
    F,
    H,
    run.x,
    w,
    run.h.subarray(NH, (T + 1) * NH),
    workspace,
    dh.subarray(NH, (T + 1) * NH),
    dx ?? pool.f32(`${key}.dxUnused`, T * N * F),
    w,
  );
}
