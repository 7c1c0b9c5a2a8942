import type { Backend } from '../kernels/backend.ts';
import type { BufferPool } from './layer.ts';
import { finishBackward, sigmoid, type Cell, type CellRun, type CellWeights } from './recurrentCell.ts';

/**
 * One direction of an LSTM, PyTorch's equations and gate order (i, f, g, o):
 *   z = W_ih·x + b_ih + W_hh·h + b_hh;  i, f, o = σ(z_i, z_f, z_o);  g = tanh(z_g)
 *   c' = f ⊙ c + i ⊙ g;  h' = o ⊙ tanh(c')
 * All frames' input projections are one gemm, each step's recurrent projection a gemm added in
 * place; the gate loops run over contiguous Float32Arrays. Buffers come from the layer's pool.
 */
export class LstmCell implements Cell {
  readonly gates = 4;
  /** gate activations [T·N, 4H] (pre-activations until the step's loop replaces them) */
  private g: Float32Array = new Float32Array(0);
  /** cell states [(T+1)·N, H], block 0 is c₋₁ = 0 */
  private c: Float32Array = new Float32Array(0);

  constructor(private readonly backend: Backend, private readonly pool: BufferPool, private readonly key: string) {}

  forward(w: CellWeights, run: CellRun): void {
    const { N, T, F, H, lengths, x, h } = run;
    const G4 = 4 * H, NH = N * H, rows = T * N;
    const g = this.g = this.pool.f32(`${this.key}.g`, rows * G4);
    const c = this.c = this.pool.f32(`${this.key}.c`, (T + 1) * NH);
    h.fill(0, 0, NH); c.fill(0, 0, NH);
    if (rows === 0) return;
    const bias = this.pool.f32(`${this.key}.bias`, G4);
    for (let j = 0; j < G4; j++) bias[j] = w.bih[j]! + w.bhh[j]!;
    this.backend.gemm(false, true, rows, G4, F, 1, x, w.wih, 0, g);
    this.backend.biasAdd(g, bias, g, rows, G4);
    for (let t = 0; t < T; t++) {
      this.backend.gemm(false, true, N, G4, H, 1, h.subarray(t * NH, (t + 1) * NH), w.whh, 1, g.subarray(t * N * G4, (t + 1) * N * G4));
      for (let n = 0; n < N; n++) {
        const prev = t * NH + n * H, out = prev + NH;
        if (t >= lengths[n]!) { h.fill(0, out, out + H); c.fill(0, out, out + H); continue; }
        const gb = (t * N + n) * G4;
        for (let j = 0; j < H; j++) {
          const i = sigmoid(g[gb + j]!), f = sigmoid(g[gb + H + j]!);
          const gg = Math.tanh(g[gb + 2 * H + j]!), o = sigmoid(g[gb + 3 * H + j]!);
          g[gb + j] = i; g[gb + H + j] = f; g[gb + 2 * H + j] = gg; g[gb + 3 * H + j] = o;
          const cv = f * c[prev + j]! + i * gg;
          c[out + j] = cv;
          h[out + j] = o * Math.tanh(cv);
        }
      }
    }
  }

  backward(w: CellWeights, run: CellRun, dh: Float32Array, dx: Float32Array | null): void {
    const { N, T, H, lengths } = run;
    const G4 = 4 * H, NH = N * H, rows = T * N;
    const g = this.g, c = this.c;
    const dz = this.pool.f32(`${this.key}.dz`, rows * G4);
    // dL/dc flowing back from step t + 1, per sample (0 past a sample's end)
    const dc = this.pool.f32(`${this.key}.dc`, NH);
    dc.fill(0);
    for (let t = T - 1; t >= 0; t--) {
      for (let n = 0; n < N; n++) {
        const zb = (t * N + n) * G4;
        if (t >= lengths[n]!) { dz.fill(0, zb, zb + G4); continue; }
        const prev = t * NH + n * H, cur = prev + NH, dcb = n * H;
        for (let j = 0; j < H; j++) {
          const i = g[zb + j]!, f = g[zb + H + j]!, gg = g[zb + 2 * H + j]!, o = g[zb + 3 * H + j]!;
          const dhv = dh[cur + j]!, tc = Math.tanh(c[cur + j]!);
          const dcv = dc[dcb + j]! + dhv * o * (1 - tc * tc);
          dz[zb + j] = dcv * gg * i * (1 - i);
          dz[zb + H + j] = dcv * c[prev + j]! * f * (1 - f);
          dz[zb + 2 * H + j] = dcv * i * (1 - gg * gg);
          dz[zb + 3 * H + j] = dhv * tc * o * (1 - o);
          dc[dcb + j] = dcv * f;
        }
      }
      // dL/dh of the previous step += dz_t · W_hh
      if (t > 0) this.backend.gemm(false, false, N, H, G4, 1, dz.subarray(t * N * G4, (t + 1) * N * G4), w.whh, 1, dh.subarray(t * NH, (t + 1) * NH));
    }
    finishBackward(this.backend, w, run, 4, dz, dz, dx);
  }

  saved(): readonly Float32Array[] {
    return [this.g, this.c];
  }
}
