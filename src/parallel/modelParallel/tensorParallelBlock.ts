import type { Communicator } from '../../comm/communicator.ts';
import type { Backend } from '../../kernels/backend.ts';
import { Tensor } from '../../tensor/tensor.ts';
import { ActivationLayer } from '../../nn/activationLayer.ts';
import type { AddBlock } from '../../nn/addBlock.ts';
import type { Attention } from '../../nn/attention.ts';
import { Dropout } from '../../nn/dropout.ts';
import { BufferPool, type ForwardContext, type Layer, type ParamSpec } from '../../nn/layer.ts';
import type { LayerChain } from '../../nn/layerChain.ts';
import { LayerNorm } from '../../nn/layerNorm.ts';
import {
  CollectiveBuffers,
  ExchangeScratch,
  gatherSectionInput,
  sectionRows,
  type RowSplit,
} from './activationExchange.ts';
import { HeadParallelAttention } from './headParallelAttention.ts';
import { OwnerKeyedDropout } from './ownerDropout.ts';
import type { PlannedLayer } from './plan.ts';
import { SectionLayer } from './sectionLayer.ts';
import { shardTensors } from './shards.ts';
import { ColumnParallelDense, RowParallelDense } from './tensorParallel.ts';

/** One whole-array row for copyRows. */
const WHOLE = new Int32Array(1);

/**
 * A transformerBlock (nn/transformerBlock.ts: attn = x + attention(LN(x)), then
 * mlp = x + dense₂(gelu(dense₁(LN(x))))) split over the devices as Megatron-LM splits it
 * (Shoeybi et al. 2019, §3):
 *
 *   attn: LN (replicated) → f → heads split (column-parallel q/k/v, row-parallel out_proj) → g → + x
 *   mlp:  LN (replicated) → f → dense₁ by columns, gelu on the shard → dense₂ by rows → g → + x
 *
 * where g all-reduces forward (identity backward) and f is the identity forward and all-reduces
 * backward: two all-reduces forward and two backward per block, each of [N·T, D]. Input and
 * output are 'full' (every device's samples, the same on every device), so consecutive blocks need
 * no exchange; the first of a section gathers the devices' rows (`inputRows`) and hands back only
 * this device's rows of the input gradient (the full one is the same everywhere: no reduction).
 *
 * Gradients: the section's loss is the sum of the devices' losses, so every weight gradient is
 * scaled by `weightGradScale` (1/G, as tensorParallel.ts explains). The replicated tensors (the
 * layerNorms, the row-parallel biases) then hold the unsplit model's gradient, identically on every
 * device: they live in the shard part and are never reduced (shards.ts marks them `replicated`).
 * Dropout (the branches' and the attention weights') draws each sample's masks as the sample's
 * own device would in the data-parallel run (ownerDropout.ts).
 */
export class TensorParallelBlock extends SectionLayer {
  readonly inputShape: readonly number[];
  readonly outputShape: readonly number[];
  private readonly norms: [LayerNorm, LayerNorm];
  private readonly attn: HeadParallelAttention;
  private readonly up: ColumnParallelDense;
  private readonly gelu: ActivationLayer;
  private readonly down: RowParallelDense;
  /** each branch's closing dropout (rate > 0), masks keyed as each sample's own device keys them */
  private readonly drops: [OwnerKeyedDropout | null, OwnerKeyedDropout | null];
  private readonly specs: ParamSpec[];
  private readonly pool: BufferPool;
  private readonly shared: CollectiveBuffers;
  private readonly scratch = new ExchangeScratch();
  /** the layerNorms' own gradients (gamma, beta each), scaled into the bound ones after their backward */
  private normGrads: { own: Float32Array[]; bound: Float32Array[] }[] = [];
  private rows: RowSplit | null = null;

  constructor(
    private readonly backend: Backend,
    private readonly comm: Communicator,
    readonly name: string,
    private readonly planned: Extract<PlannedLayer, { kind: 'transformer' }>,
    /** the unsplit block: its parameters' names, initialisation and fans, its dropout layers and keys */
    unsplit: Layer,
    private readonly weightGradScale: number,
  ) {
    super();
    const { spec, inputShape, mlp } = planned;
    const D = inputShape[inputShape.length - 1]!,
      G = comm.size;
    this.inputShape = inputShape;
    this.outputShape = inputShape;
    // branch k of the unsplit block: [layerNorm, attention, dropout?], [layerNorm, dense, dense, dropout?]
    const branch = (k: number) => ((unsplit as LayerChain).parts[k]!.layer as AddBlock).branches[0]!.layers;
    const [attnLayers, mlpLayers] = [branch(0), branch(1)];
    const { epsilon } = attnLayers[0] as LayerNorm;
    this.norms = [
      new LayerNorm(backend, `${name} attn layerNorm`, inputShape, epsilon),
      new LayerNorm(backend, `${name} mlp layerNorm`, inputShape, epsilon),
    ];
    const drop = (l: Layer | undefined) => (l instanceof Dropout ? new OwnerKeyedDropout(backend, l) : null);
    this.drops = [drop(attnLayers[2]), drop(mlpLayers[3])];
    this.attn = new HeadParallelAttention(
      backend,
      comm,
      `${name} attention`,
      inputShape,
      spec.heads,
      spec.causal,
      weightGradScale,
      { rate: spec.dropout, layerKey: (attnLayers[1] as Attention).layerKey },
    );
    const opts = { weightGradScale };
    this.up = new ColumnParallelDense(backend, comm, `${name} mlp dense`, D, mlp, 'linear', true, opts);
    this.gelu = new ActivationLayer(backend, `${name} mlp gelu`, [mlp / G], 'gelu');
    this.down = new RowParallelDense(backend, comm, `${name} mlp dense`, mlp, D, 'linear', true, opts);
    const whole = new Map(unsplit.params().map((p) => [p.name, p]));
    this.specs = shardTensors(planned, G, comm.rank).map((t) => {
      const p = whole.get(t.param);
      if (!p) throw new Error(`${name}: the unsplit block has no tensor '${t.param}'`);
      return { ...p, shape: t.shape };
    });
    this.pool = new BufferPool(backend);
    this.shared = new CollectiveBuffers(backend, comm);
  }

  /** This device's tensors in shards.ts's order: its shards and the replicated ones, named as the unsplit block's. */
  override params(): ParamSpec[] {
    return this.specs;
  }

  override bind(params: Float32Array[], grads: Float32Array[]): void {
    const own = (k: number) => this.backend.alloc(params[k]!.length);
    this.normGrads = [0, 6].map((k) => ({ own: [own(k), own(k + 1)], bound: [grads[k]!, grads[k + 1]!] }));
    this.norms[0].bind(params.slice(0, 2), this.normGrads[0]!.own);
    this.attn.bind(params.slice(2, 6), grads.slice(2, 6));
    this.norms[1].bind(params.slice(6, 8), this.normGrads[1]!.own);
    this.up.bind(params.slice(8, 10), grads.slice(8, 10));
    this.down.bind(params.slice(10, 12), grads.slice(10, 12));
  }

  savedForBackward(): readonly ArrayBufferView[] {
    const parts = [
      this.norms[0],
      this.attn,
      this.drops[0],
      this.norms[1],
      this.up,
      this.gelu,
      this.down,
      this.drops[1],
    ];
    return parts.flatMap((l) => [...(l?.savedForBackward?.() ?? [])]);
  }

  /** x: this device's rows [n, T, D] (the section's first block) or every device's [N, T, D]. Returns [N, T, D]. */
  async forwardAsync(x: Tensor, ctx: ForwardContext): Promise<Tensor> {
    const rows = sectionRows(ctx, this.comm.size);
    this.rows = rows;
    const [, T, D] = x.shape as [number, number, number];
    if (this.planned.inputRows) {
      x = await gatherSectionInput(this.comm, this.backend.device, x, rows, [T, D], this.shared, this.scratch);
    }
    const N = rows.total,
      size = N * T * D;
    const drop = (k: 0 | 1, t: Tensor) => this.drops[k]?.forward(t, ctx, rows, this.comm.rank) ?? t;
    const a = drop(0, await this.attn.forwardAsync(this.norms[0].forward(x, ctx), ctx));
    const h = this.sum('h', x, a, size);
    // the MLP's dense layers see one row per frame
    const frames = { ...ctx, rowsPerSample: T };
    const u = this.norms[1].forward(h, ctx).reshape([N * T, D]);
    const m = await this.down.forwardAsync(this.gelu.forward(await this.up.forwardAsync(u, frames), frames), frames);
    return this.sum('y', h, drop(1, m.reshape(x.shape)), size);
  }

  /** dy: [N, T, D], the same on every device. Returns dL/dx: every row, or this device's rows (`inputRows`). */
  async backwardAsync(dy: Tensor, needInputGrad = true): Promise<Tensor | null> {
    const rows = this.rows!,
      [N, T, D] = dy.shape as [number, number, number],
      size = N * T * D;
    const undrop = (k: 0 | 1, t: Tensor) => this.drops[k]?.backward(t) ?? t;
    const dm = await this.down.backwardAsync(undrop(1, dy).reshape([N * T, D]), true);
    const du = await this.up.backwardAsync(this.gelu.backward(dm!), true);
    const dh = this.sum('dh', dy, this.normBackward(1, du!.reshape(dy.shape)), size);
    const da = await this.attn.backwardAsync(undrop(0, dh), true);
    if (!needInputGrad) {
      this.normBackward(0, da!);
      return null;
    }
    const dx = this.sum('dx', dh, this.normBackward(0, da!), size);
    if (!this.planned.inputRows) return dx;
    const r = this.comm.rank,
      per = T * D,
      start = rows.starts[r]! * per;
    return new Tensor([rows.counts[r]!, T, D], dx.data.subarray(start, start + rows.counts[r]! * per));
  }

  /** A layerNorm's backward, its gamma and beta gradients scaled by 1/G into the bound ones. */
  private normBackward(k: 0 | 1, dy: Tensor): Tensor {
    const { own, bound } = this.normGrads[k]!;
    for (const g of own) this.backend.fill(g, 0);
    const dx = this.norms[k].backward(dy);
    for (const [j, g] of own.entries()) this.backend.axpy(this.weightGradScale, g, bound[j]!);
    return dx;
  }

  /** out = a + b, in the block's own array `key` (backend ops: the arrays stay where the backend keeps them). */
  private sum(key: string, a: Tensor, b: Tensor, size: number): Tensor {
    const out = this.pool.f32(key, size);
    this.backend.copyRows(a.data.subarray(0, size), WHOLE, out, WHOLE, 1, size, false);
    this.backend.axpy(1, b.data.subarray(0, size), out);
    return new Tensor(a.shape, out);
  }
}
