import { Tensor } from '../tensor/tensor.ts';
import { formatShape } from '../tensor/shape.ts';
import type { Backend } from '../kernels/backend.ts';
import { BaseLayer, type ForwardContext, type ParamSpec } from './layer.ts';
import type { BidirectionalMerge } from './spec.ts';
import { checkLengths, isSequenceShape, sequenceDims } from './sequence.ts';
import type { Cell, CellRun, CellWeights } from './recurrentCell.ts';
import { LstmCell } from './lstmCell.ts';
import { GruCell } from './gruCell.ts';

export type RecurrentKind = 'lstm' | 'gru';

export interface RecurrentOptions {
  /** true (default): the output at every frame [T, D]; false: each sample's final state [D] */
  returnSequences?: boolean;
  /** run a second direction from each sample's last valid frame back; join by concat (D = 2H) or sum */
  bidirectional?: BidirectionalMerge;
  /** LSTM only: added at initialisation to the forget-gate part of bias_ih (default 1) */
  forgetBias?: number;
}

/**
 * `lstm` / `gru` over a sequence batch [N, T, F] with per-sample lengths (ForwardContext.lengths).
 *
 * Parameters are PyTorch's, named and laid out as torch.nn.LSTM/GRU's state dict (docs/speech.md):
 * `weight_ih_l0` [G·H, F], `weight_hh_l0` [G·H, H], `bias_ih_l0`, `bias_hh_l0` [G·H], and the same
 * with `_reverse` for the backward direction; gates i, f, g, o (LSTM) and r, z, n (GRU).
 * The backward direction starts at each sample's own last valid frame. With returnSequences false
 * the output is each direction's final state, as torch's h_n: the forward one at frame len − 1, the
 * backward one at frame 0. Frames past a sample's length are 0 in the output and ignored in the input.
 */
export class Recurrent extends BaseLayer {
  readonly outputShape: readonly number[];
  readonly inFeatures: number;
  readonly returnSequences: boolean;
  readonly bidirectional: BidirectionalMerge | undefined;
  readonly forgetBias: number;
  private readonly cells: Cell[];
  private readonly weights: CellWeights[] = [];
  private runs: CellRun[] = [];
  private dims: [number, number, number] = [0, 0, 0];

  constructor(
    backend: Backend,
    name: string,
    inputShape: readonly number[],
    readonly kind: RecurrentKind,
    readonly units: number,
    o: RecurrentOptions = {},
  ) {
    super(backend, name, inputShape);
    if (!isSequenceShape(inputShape)) {
      throw this.error(
        `expects a sequence [frames, features] but receives ${formatShape(inputShape)}; ` +
          'give the model a sequence input (model.input: [null, features]) or keep returnSequences: true on the layer before',
      );
    }
    this.inFeatures = inputShape[1]!;
    this.returnSequences = o.returnSequences ?? true;
    this.bidirectional = o.bidirectional;
    this.forgetBias = kind === 'lstm' ? (o.forgetBias ?? 1) : 0;
    const directions = this.bidirectional ? 2 : 1;
    const width = this.bidirectional === 'concat' ? 2 * units : units;
    this.outputShape = this.returnSequences ? [inputShape[0]!, width] : [width];
    this.cells = [...Array(directions).keys()].map((d) =>
      kind === 'lstm' ? new LstmCell(backend, this.pool, `d${d}`) : new GruCell(backend, this.pool, `d${d}`),
    );
  }

  get gates(): number {
    return this.kind === 'lstm' ? 4 : 3;
  }

  override params(): ParamSpec[] {
    const GH = this.gates * this.units,
      H = this.units,
      F = this.inFeatures;
    return this.cells.flatMap((_, d) => {
      const sfx = d === 0 ? '_l0' : '_l0_reverse';
      const bias = (name: string, forget: boolean): ParamSpec => ({
        name,
        shape: [GH],
        init: 'zeros',
        fanIn: F,
        fanOut: H,
        ...(forget && this.forgetBias !== 0 ? { initAdd: { start: H, end: 2 * H, value: this.forgetBias } } : {}),
      });
      return [
        { name: `weight_ih${sfx}`, shape: [GH, F], init: 'rnnUniform', fanIn: F, fanOut: H },
        { name: `weight_hh${sfx}`, shape: [GH, H], init: 'rnnUniform', fanIn: H, fanOut: H },
        bias(`bias_ih${sfx}`, this.kind === 'lstm'),
        bias(`bias_hh${sfx}`, false),
      ];
    });
  }

  override bind(params: Float32Array[], grads: Float32Array[]): void {
    this.weights.length = 0;
    for (let d = 0; d < this.cells.length; d++) {
      const p = params.slice(4 * d, 4 * d + 4),
        g = grads.slice(4 * d, 4 * d + 4);
      this.weights.push({
        wih: p[0]!,
        whh: p[1]!,
        bih: p[2]!,
        bhh: p[3]!,
        dwih: g[0]!,
        dwhh: g[1]!,
        dbih: g[2]!,
        dbhh: g[3]!,
      });
    }
  }

  forward(x: Tensor, ctx: ForwardContext): Tensor {
    if (x.shape.length !== 3 || x.shape[2] !== this.inFeatures) {
      throw this.error(`expects input [batch, frames, ${this.inFeatures}], got ${formatShape(x.shape)}`);
    }
    const [N, T, F] = (this.dims = sequenceDims(x));
    const lengths = this.pool.i32('lengths', N);
    if (ctx.lengths) {
      checkLengths(ctx.lengths, N, T, this.name);
      lengths.set(ctx.lengths);
    } else lengths.fill(T);
    let steps = 0;
    for (let n = 0; n < N; n++) steps = Math.max(steps, lengths[n]!);
    const H = this.units;
    this.runs = this.cells.map((cell, d) => {
      const run: CellRun = {
        N,
        T: steps,
        F,
        H,
        lengths,
        x: this.pool.f32(`x${d}`, steps * N * F),
        h: this.pool.f32(`h${d}`, (steps + 1) * N * H),
      };
      this.toTimeMajor(x.data, run, T, d === 1);
      cell.forward(this.weights[d]!, run);
      return run;
    });
    return this.assemble(N, T);
  }

  /** The layer's output from the directions' hidden states. */
  private assemble(N: number, T: number): Tensor {
    const H = this.units,
      D = this.outputShape[this.outputShape.length - 1]!;
    const y = this.returnSequences
      ? new Tensor([N, T, D], this.buffer('y', N * T * D))
      : new Tensor([N, D], this.buffer('y', N * D));
    const out = y.data;
    // every valid frame (every sample's row, without sequences) is written below; the padding is zeroed here
    if (this.returnSequences) this.backend.zeroPadding(out, N, T, D, this.runs[0]!.lengths);
    this.runs.forEach((run, d) => {
      const offset = this.bidirectional === 'concat' ? d * H : 0,
        NH = N * H;
      const { from, to } = this.rowStarts(this.returnSequences ? run.T * N : N);
      let count = 0;
      for (let n = 0; n < N; n++) {
        const len = run.lengths[n]!;
        if (!this.returnSequences) {
          // the final state: block len (block 0, zeros, for an empty sample)
          from[count] = len * NH + n * H;
          to[count++] = n * D + offset;
          continue;
        }
        for (let s = 0; s < len; s++) {
          from[count] = (s + 1) * NH + n * H;
          to[count++] = frameOf(n, s, len, T, d === 1) * D + offset;
        }
      }
      // a direction alone in its columns copies; the second of a sum adds to the first
      this.backend.copyRows(run.h, from, out, to, count, H, d === 1 && this.bidirectional !== 'concat');
    });
    return y;
  }

  /** Scratch row starts (element offsets) for Backend.copyRows, room for `count` rows. */
  private rowStarts(count: number): { from: Int32Array; to: Int32Array } {
    return { from: this.pool.i32('rowsFrom', count), to: this.pool.i32('rowsTo', count) };
  }

  /** run.x (time-major [steps·N, F], reversed per sample when `reverse`) from x [N, T, F]; zero at padding. */
  private toTimeMajor(x: Float32Array, run: CellRun, T: number, reverse: boolean): void {
    const { N, F } = run,
      { from, to } = this.rowStarts(run.T * N);
    for (let s = 0, i = 0; s < run.T; s++) {
      for (let n = 0; n < N; n++, i++) {
        const len = run.lengths[n]!;
        from[i] = s < len ? frameOf(n, s, len, T, reverse) * F : -1;
        to[i] = i * F;
      }
    }
    this.backend.copyRows(x, from, run.x, to, run.T * N, F, false);
  }

  savedForBackward(): readonly ArrayBufferView[] {
    return this.runs.flatMap((run, d) => [run.x, run.h, ...this.cells[d]!.saved()]);
  }

  backward(dy: Tensor, needInputGrad = true): Tensor | null {
    const [N, T, F] = this.dims,
      H = this.units,
      D = this.outputShape[this.outputShape.length - 1]!;
    const dx = needInputGrad ? new Tensor([N, T, F], this.buffer('dx', N * T * F)) : null;
    // the first direction writes every valid frame of dx: the padding is zeroed here
    if (dx) this.backend.zeroPadding(dx.data, N, T, F, this.runs[0]!.lengths);
    this.runs.forEach((run, d) => {
      const NH = N * H,
        steps = run.T,
        offset = this.bidirectional === 'concat' ? d * H : 0;
      const dh = this.pool.f32(`dh${d}`, (steps + 1) * NH);
      // dL/dh of every step's output, 0 at the padding (with sequences every row is written, else
      // only the final state's); block 0 (h₋₁) is 0 too
      this.backend.fill(this.returnSequences ? dh.subarray(0, NH) : dh, 0);
      const { from, to } = this.rowStarts(this.returnSequences ? steps * N : N);
      let count = 0;
      for (let n = 0; n < N; n++) {
        const len = run.lengths[n]!;
        if (!this.returnSequences) {
          if (len > 0) {
            from[count] = n * D + offset;
            to[count++] = len * NH + n * H;
          }
          continue;
        }
        for (let s = 0; s < steps; s++) {
          from[count] = s < len ? frameOf(n, s, len, T, d === 1) * D + offset : -1;
          to[count++] = (s + 1) * NH + n * H;
        }
      }
      this.backend.copyRows(dy.data, from, dh, to, count, H, false);
      const dxt = dx ? this.pool.f32(`dxt${d}`, steps * N * F) : null;
      this.cells[d]!.backward(this.weights[d]!, run, dh, dxt);
      if (dx && dxt) {
        // dx [N, T, F] from the valid frames of dxt; the first direction copies (dx's padding is zeroed above), the second adds
        const { from: at, to: into } = this.rowStarts(steps * N);
        let rows = 0;
        for (let n = 0; n < N; n++) {
          const len = run.lengths[n]!;
          for (let s = 0; s < len; s++) {
            at[rows] = (s * N + n) * F;
            into[rows++] = frameOf(n, s, len, T, d === 1) * F;
          }
        }
        this.backend.copyRows(dxt, at, dx.data, into, rows, F, d === 1);
      }
    });
    return dx;
  }
}

/**
 * The frame n·T + t of a batch-major [N, T, …] array that step s of sample n (`len` valid frames)
 * reads or writes; a reverse direction runs its frames backwards.
 */
function frameOf(n: number, s: number, len: number, T: number, reverse: boolean): number {
  return n * T + (reverse ? len - 1 - s : s);
}
