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
 * One direction of an LSTM, PyTorch's equations and gate order (i, f, g, o):
 *   z = W_ih·x + b_ih + W_hh·h + b_hh;  i, f, o = σ(z_i, z_f, z_o);  g = tanh(z_g)
 *   c' = f ⊙ c + i ⊙ g;  h' = o ⊙ tanh(c')
 * All frames' input projections are one gemm; each step's recurrent projection is a gemm with
 * W_hh packed once per pass (Backend.packB), added in place, then the backend's fused cell kernel.
 * Where the backend runs a whole direction in one call (Backend.recurrentSequenceForward: oneDNN's
 * LSTM primitive), that runs instead (recurrentCell.ts).
 * Buffers come from the layer's pool: a step allocates nothing.
 */
export class LstmCell implements Cell {
  readonly gates = 4;
  /** gate activations [T·N, 4H] (pre-activations until the step's cell kernel replaces them) */
  private g: Float32Array = new Float32Array(0);
  /** cell states [(T+1)·N, H], block 0 is c₋₁ = 0 */
  private c: Float32Array = new Float32Array(0);
  /** W_hhᵀ [H, 4H] packed for the forward steps, W_hh [4H, H] for the backward ones */
  private packForward: PackedMatrix | null = null;
  private packBackward: PackedMatrix | null = null;
  /** the backend's LSTM over all steps ran the last forward: its workspace (else empty) */
  private workspace: Float32Array = new Float32Array(0);

  constructor(
    private readonly backend: Backend,
    private readonly pool: BufferPool,
    private readonly key: string,
  ) {}

  forward(w: CellWeights, run: CellRun): void {
    const { N, T, F, H, lengths, x, h } = run;
    const G4 = 4 * H,
      NH = N * H,
      rows = T * N,
      b = this.backend;
    this.workspace = sequenceForward(b, this.pool, this.key, 'lstm', w, run);
    if (this.workspace.length > 0) return;
    b.fill(h.subarray(0, NH), 0);
    const g = (this.g = this.pool.f32(`${this.key}.g`, rows * G4));
    const c = (this.c = this.pool.f32(`${this.key}.c`, (T + 1) * NH));
    b.fill(c.subarray(0, NH), 0);
    if (rows === 0) return;
    // b_ih + b_hh as one row of a bias add (the sum is the same either way round)
    const bias = this.pool.f32(`${this.key}.bias`, G4);
    b.biasAdd(w.bhh, w.bih, bias, 1, G4);
    b.gemm(false, true, rows, G4, F, 1, x, w.wih, 0, g);
    b.biasAdd(g, bias, g, rows, G4);
    const whhT = (this.packForward = b.packB(true, H, G4, w.whh, this.packForward));
    for (let t = 0; t < T; t++) {
      b.gemmPacked(false, N, G4, H, 1, h, whhT, 1, g, t * NH, t * N * G4);
      b.lstmCellForward(t, N, H, g, c, h, lengths);
    }
  }

  backward(w: CellWeights, run: CellRun, dh: Float32Array, dx: Float32Array | null): void {
    const { N, T, H, lengths } = run;
    const G4 = 4 * H,
      NH = N * H,
      rows = T * N,
      b = this.backend;
    if (this.workspace.length > 0) {
      sequenceBackward(b, this.pool, this.key, 'lstm', w, run, this.workspace, dh, dx);
      return;
    }
    const dz = this.pool.f32(`${this.key}.dz`, rows * G4);
    // dL/dc flowing back from step t + 1, per sample (0 past a sample's end)
    const dc = this.pool.f32(`${this.key}.dc`, NH);
    b.fill(dc, 0);
    if (rows === 0) return;
    const whh = (this.packBackward = b.packB(false, G4, H, w.whh, this.packBackward));
    for (let t = T - 1; t >= 0; t--) {
      b.lstmCellBackward(t, N, H, this.g, this.c, dh, dc, dz, lengths);
      // dL/dh of the previous step += dz_t · W_hh
      if (t > 0) b.gemmPacked(false, N, H, G4, 1, dz, whh, 1, dh, t * N * G4, t * NH);
    }
    finishBackward(b, w, run, 4, dz, dz, dx, this.pool.f32(`${this.key}.db`, G4));
  }

  saved(): readonly Float32Array[] {
    return this.workspace.length > 0 ? [this.workspace] : [this.g, this.c];
  }
}
