import type { Backend } from '../kernels/backend.ts';
import type { BufferPool } from './layer.ts';
import { finishBackward, sigmoid, type Cell, type CellRun, type CellWeights } from './recurrentCell.ts';

/**
 * One direction of a GRU, PyTorch's equations and gate order (r, z, n):
 *   r = σ(W_ir x + b_ir + W_hr h + b_hr);  z = σ(W_iz x + b_iz + W_hz h + b_hz)
 *   n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn));  h' = (1 − z) ⊙ n + z ⊙ h
 * The reset gate multiplies the recurrent part of n, so each step's recurrent projection goes to
 * its own [N, 3H] block (one gemm) and the gate loop adds it. Buffers come from the layer's pool.
 */
export class GruCell implements Cell {
  readonly gates = 3;
  /** gate activations r, z, n [T·N, 3H] (the input projection until the step's loop replaces it) */
  private g: Float32Array = new Float32Array(0);
  /** W_hn·h + b_hn per step [T·N, H] (backward needs it for dr) */
  private hn: Float32Array = new Float32Array(0);

  constructor(private readonly backend: Backend, private readonly pool: BufferPool, private readonly key: string) {}

  forward(w: CellWeights, run: CellRun): void {
    const { N, T, F, H, lengths, x, h } = run;
    const G3 = 3 * H, NH = N * H, rows = T * N;
    const g = this.g = this.pool.f32(`${this.key}.g`, rows * G3);
    const hn = this.hn = this.pool.f32(`${this.key}.hn`, rows * H);
    h.fill(0, 0, NH);
    if (rows === 0) return;
    const rec = this.pool.f32(`${this.key}.rec`, N * G3);
    const bhh = w.bhh;
    this.backend.gemm(false, true, rows, G3, F, 1, x, w.wih, 0, g);
    this.backend.biasAdd(g, w.bih, g, rows, G3);
    for (let t = 0; t < T; t++) {
      this.backend.gemm(false, true, N, G3, H, 1, h.subarray(t * NH, (t + 1) * NH), w.whh, 0, rec);
      for (let n = 0; n < N; n++) {
        const prev = t * NH + n * H, out = prev + NH;
        if (t >= lengths[n]!) { h.fill(0, out, out + H); continue; }
        const gb = (t * N + n) * G3, rb = n * G3;
        for (let j = 0; j < H; j++) {
          const r = sigmoid(g[gb + j]! + rec[rb + j]! + bhh[j]!);
          const z = sigmoid(g[gb + H + j]! + rec[rb + H + j]! + bhh[H + j]!);
          const hnv = rec[rb + 2 * H + j]! + bhh[2 * H + j]!;
          const nv = Math.tanh(g[gb + 2 * H + j]! + r * hnv);
          g[gb + j] = r; g[gb + H + j] = z; g[gb + 2 * H + j] = nv;
          hn[prev + j] = hnv;
          h[out + j] = (1 - z) * nv + z * h[prev + j]!;
        }
      }
    }
  }

  backward(w: CellWeights, run: CellRun, dh: Float32Array, dx: Float32Array | null): void {
    const { N, T, H, lengths, h } = run;
    const G3 = 3 * H, NH = N * H, rows = T * N;
    const g = this.g, hn = this.hn;
    // pre-activation gradients of the input projection (and b_ih) and of the recurrent one (and b_hh)
    const dzx = this.pool.f32(`${this.key}.dzx`, rows * G3);
    const dzh = this.pool.f32(`${this.key}.dzh`, rows * G3);
    for (let t = T - 1; t >= 0; t--) {
      for (let n = 0; n < N; n++) {
        const zb = (t * N + n) * G3;
        if (t >= lengths[n]!) { dzx.fill(0, zb, zb + G3); dzh.fill(0, zb, zb + G3); continue; }
        const prev = t * NH + n * H, cur = prev + NH;
        for (let j = 0; j < H; j++) {
          const r = g[zb + j]!, z = g[zb + H + j]!, nv = g[zb + 2 * H + j]!;
          const dhv = dh[cur + j]!, hp = h[prev + j]!;
          const dan = dhv * (1 - z) * (1 - nv * nv);
          const dar = dan * hn[prev + j]! * r * (1 - r);
          const daz = dhv * (hp - nv) * z * (1 - z);
          dzx[zb + j] = dar; dzx[zb + H + j] = daz; dzx[zb + 2 * H + j] = dan;
          dzh[zb + j] = dar; dzh[zb + H + j] = daz; dzh[zb + 2 * H + j] = dan * r;
          dh[prev + j] = dh[prev + j]! + dhv * z;
        }
      }
      // dL/dh of the previous step += dzh_t · W_hh (the direct z ⊙ dh' term is added above)
      if (t > 0) this.backend.gemm(false, false, N, H, G3, 1, dzh.subarray(t * N * G3, (t + 1) * N * G3), w.whh, 1, dh.subarray(t * NH, (t + 1) * NH));
    }
    finishBackward(this.backend, w, run, 3, dzx, dzh, dx);
  }

  saved(): readonly Float32Array[] {
    return [this.g, this.hn];
  }
}
