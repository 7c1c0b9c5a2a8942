import type { Backend } from '../kernels/backend.ts';
import type { PackedMatrix } from '../kernels/matrixKernels.ts';
import type { BufferPool } from './layer.ts';
import {
  finishBackward,
  sequenceBackward,
  sequenceForward,
  type Cell,
  type CellRun,
  type CellWeights,
} from './recurrentCell.ts';

/**
 * One direction of a GRU, PyTorch's equations and gate order (r, z, n):
 *   r = σ(W_ir x + b_ir + W_hr h + b_hr);  z = σ(W_iz x + b_iz + W_hz h + b_hz)
 *   n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn));  h' = (1 − z) ⊙ n + z ⊙ h
 * The reset gate multiplies the recurrent part of n, so each step's recurrent projection goes to
 * its own [N, 3H] block (one gemm, W_hh packed once per pass) and the backend's fused cell kernel
 * adds it. Where the backend runs a whole direction in one call (Backend.recurrentSequenceForward:
 * oneDNN's linear-before-reset GRU primitive), that runs instead (recurrentCell.ts). Buffers come
 * from the layer's pool: a step allocates nothing.
 */
export class GruCell implements Cell {
  readonly gates = 3;
  /** gate activations r, z, n [T·N, 3H] (the input projection until the step's cell kernel replaces it) */
  private g: Float32Array = new Float32Array(0);
  /** W_hn·h + b_hn per step [T·N, H] (backward needs it for dr) */
  private hn: Float32Array = new Float32Array(0);
  /** W_hhᵀ [H, 3H] packed for the forward steps, W_hh [3H, H] for the backward ones */
  private packForward: PackedMatrix | null = null;
  private packBackward: PackedMatrix | null = null;
  /** the backend's GRU over all steps ran the last forward: its workspace (else empty) */
  private workspace: Float32Array = new Float32Array(0);

  constructor(
    private readonly backend: Backend,
    private readonly pool: BufferPool,
    private readonly key: string,
  ) {}

  forward(w: CellWeights, run: CellRun): void {
    const { N, T, F, H, lengths, x, h } = run;
    const G3 = 3 * H,
      NH = N * H,
      rows = T * N,
      b = this.backend;
    this.workspace = sequenceForward(b, this.pool, this.key, 'gru', w, run);
    if (this.workspace.length > 0) return;
    const g = (this.g = this.pool.f32(`${this.key}.g`, rows * G3));
    const hn = (this.hn = this.pool.f32(`${this.key}.hn`, rows * H));
    b.fill(h.subarray(0, NH), 0);
    if (rows === 0) return;
    const rec = this.pool.f32(`${this.key}.rec`, N * G3);
    b.gemm(false, true, rows, G3, F, 1, x, w.wih, 0, g);
    b.biasAdd(g, w.bih, g, rows, G3);
    const whhT = (this.packForward = b.packB(true, H, G3, w.whh, this.packForward));
    for (let t = 0; t < T; t++) {
      b.gemmPacked(false, N, G3, H, 1, h, whhT, 0, rec, t * NH, 0);
      b.gruCellForward(t, N, H, g, rec, w.bhh, hn, h, lengths);
    }
  }

  backward(w: CellWeights, run: CellRun, dh: Float32Array, dx: Float32Array | null): void {
    const { N, T, H, lengths, h } = run;
    const G3 = 3 * H,
      NH = N * H,
      rows = T * N,
      b = this.backend;
    if (this.workspace.length > 0) {
      sequenceBackward(b, this.pool, this.key, 'gru', w, run, this.workspace, dh, dx);
      return;
    }
    // pre-activation gradients of the input projection (and b_ih) and of the recurrent one (and b_hh)
    const dzx = this.pool.f32(`${this.key}.dzx`, rows * G3);
    const dzh = this.pool.f32(`${this.key}.dzh`, rows * G3);
    if (rows === 0) return;
    const whh = (this.packBackward = b.packB(false, G3, H, w.whh, this.packBackward));
    for (let t = T - 1; t >= 0; t--) {
      b.gruCellBackward(t, N, H, this.g, this.hn, h, dh, dzx, dzh, lengths);
      // dL/dh of the previous step += dzh_t · W_hh (the direct z ⊙ dh' term is added by the cell)
      if (t > 0) b.gemmPacked(false, N, H, G3, 1, dzh, whh, 1, dh, t * N * G3, t * NH);
    }
    finishBackward(b, w, run, 3, dzx, dzh, dx, null);
  }

  saved(): readonly Float32Array[] {
    return this.workspace.length > 0 ? [this.workspace] : [this.g, this.hn];
  }
}
