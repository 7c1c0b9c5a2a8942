/** The Backend's recurrent kernels: LSTM and GRU cell steps, and the optional whole-direction recurrence. */

/** A recurrent cell a backend may run over a whole direction (Backend.recurrentSequenceForward). */
export type SequenceCell = 'lstm' | 'gru';

/** One direction's parameters in PyTorch's layout and gate order: W_ih [G·H, F], W_hh [G·H, H], b_ih, b_hh [G·H]. */
export interface RecurrentWeights {
  wih: Float32Array;
  whh: Float32Array;
  bih: Float32Array;
  bhh: Float32Array;
}
/** Their gradients, the same shapes. */
export interface RecurrentGradients {
  dwih: Float32Array;
  dwhh: Float32Array;
  dbih: Float32Array;
  dbhh: Float32Array;
}

export interface RecurrentKernels {
  // Recurrent cells, one step t of a time-major run of N samples and H units (src/nn/recurrentCell.ts):
  // block t of a [T·N, ·] buffer is step t's N rows; state buffers [(T+1)·N, H] hold the zero initial
  // state in block 0, so step t reads block t and writes block t + 1. A sample n with lengths[n] ≤ t
  // is padding at step t: its new states are 0 and its pre-activation gradients 0. Gate order is
  // PyTorch's (LSTM i, f, g, o; GRU r, z, n).

  /**
   * LSTM forward step: `gates` block t holds the pre-activations z [N, 4H] (both projections and
   * biases) and receives the activations i, f, g, o (what backward reads); c, h block t + 1 receive
   * c' = f⊙c + i⊙g and h' = o⊙tanh(c').
   */
  lstmCellForward(
    t: number,
    N: number,
    H: number,
    gates: Float32Array,
    c: Float32Array,
    h: Float32Array,
    lengths: Int32Array,
  ): void;
  /**
   * LSTM backward step: reads dh block t + 1 (dL/dh') and dc [N, H] (dL/dc' from step t + 1),
   * writes dz block t [N, 4H] (dL/dz) and replaces dc with dL/dc of step t.
   */
  lstmCellBackward(
    t: number,
    N: number,
    H: number,
    gates: Float32Array,
    c: Float32Array,
    dh: Float32Array,
    dc: Float32Array,
    dz: Float32Array,
    lengths: Int32Array,
  ): void;
  /**
   * Optional: one direction of an LSTM or a GRU over all its steps in one call (the onednn
   * backend: oneDNN's LSTM and linear-before-reset GRU primitives), on the time-major run the cells
   * step through: x [T·N, F], the weights in PyTorch's layout and gate order (`RecurrentWeights`),
   * h [T·N, H] the state after each step (the run's blocks 1…T). It knows no lengths: every sample
   * runs all T steps, so the caller zeroes the states at a sample's padding, and its gradients are
   * exact when the padding follows each sample's end and dL/dh is 0 there.
   * `recurrentSequenceWorkspace` is the floats of the workspace the forward fills for the
   * backward, 0 where the backend does not offer this cell and shape (the caller then steps
   * through the cells).
   */
  recurrentSequenceWorkspace?(cell: SequenceCell, N: number, T: number, F: number, H: number): number;
  recurrentSequenceForward?(
    cell: SequenceCell,
    N: number,
    T: number,
    F: number,
    H: number,
    x: Float32Array,
    w: RecurrentWeights,
    h: Float32Array,
    workspace: Float32Array,
  ): void;
  /** After recurrentSequenceForward of the same arrays: dx [T·N, F] written; the gradients `g` += (dh [T·N, H]: dL/dh of each step). */
  recurrentSequenceBackward?(
    cell: SequenceCell,
    N: number,
    T: number,
    F: number,
    H: number,
    x: Float32Array,
    w: RecurrentWeights,
    h: Float32Array,
    workspace: Float32Array,
    dh: Float32Array,
    dx: Float32Array,
    g: RecurrentGradients,
  ): void;
  /**
   * GRU forward step: `gates` block t holds the input projection with b_ih [N, 3H] and receives
   * r, z, n; `rec` [N, 3H] is W_hh·h (no bias), `bhh` [3H]; `hn` block t receives W_hn·h + b_hn;
   * h block t + 1 the new state.
   */
  gruCellForward(
    t: number,
    N: number,
    H: number,
    gates: Float32Array,
    rec: Float32Array,
    bhh: Float32Array,
    hn: Float32Array,
    h: Float32Array,
    lengths: Int32Array,
  ): void;
  /**
   * GRU backward step: reads dh block t + 1, writes dzx and dzh block t [N, 3H] (dL/d of the input
   * and of the recurrent pre-activations) and adds z⊙dh' to dh block t.
   */
  gruCellBackward(
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
  ): void;
}
