import { ownedSlice, type Communicator } from '../../comm/communicator.ts';
import type { ActivationKind } from '../../kernels/activation.ts';
import type { Backend } from '../../kernels/backend.ts';
import type { DeviceStorage } from '../../kernels/deviceStorage.ts';
import { Tensor } from '../../tensor/tensor.ts';
import {
  allgatherColumns,
  allgatherRows,
  allreduceSum,
  reduceScatterRows,
  sectionRows,
  CollectiveBuffers,
  ExchangeScratch,
  type ColumnSplit,
  type RowSplit,
} from './activationExchange.ts';
import type { ForwardContext, ParamSpec } from '../../nn/layer.ts';
import { SectionLayer, shardParamSpecs } from './sectionLayer.ts';
import { DeviceCopies } from './deviceCopies.ts';

/**
 * Tensor-parallel dense layers (Megatron-LM's column and row splits) over a Communicator. A dense
 * weight is [in, out]; the column split gives each rank a block of output units, the row split a
 * block of input features. Column-parallel followed by row-parallel needs no communication in
 * between: the column layer's output shard is exactly the row layer's input shard.
 *
 * Shards may be uneven (10 units on 4 devices: 3, 3, 2, 2 — ownedSlice's rule); a split is refused
 * only when some device would get nothing.
 *
 * Gradient scale: every weight gradient is multiplied by `weightGradScale`. Under data parallelism
 * each device's dlogits carry G/(global batch) so that the mean over devices is the batch mean; a
 * tensor-parallel layer sees all devices' samples at once, so it passes 1/G to get the same mean.
 *
 * Where the arrays live on a device (webgpu), only the exchanges cross to the host (their reads and
 * uploads are in activationExchange.ts); the products, activations and slices stay kernels.
 */

/** The units [start, end) of each rank; an error naming the layer when a rank would get none. */
export function unitShards(units: number, size: number, layer: string, what = 'units'): ColumnSplit {
  if (size > units) {
    throw new Error(
      `${layer}: 'parallel: model' splits its ${units} ${what} over ${size} devices, but every device needs at least one; ` +
        `use at most ${units} devices or a layer with at least ${size} ${what}`,
    );
  }
  return { ranges: Array.from({ length: size }, (_, r) => ownedSlice(units, size, r)), total: units };
}

/** Where a tensor-parallel layer's input comes from and where its output goes. */
export interface ColumnOptions {
  /** the input arrives as this device's own rows (samples) and is all-gathered first */
  inputRows?: boolean;
  /** all-gather the output units so every device holds the whole output (Megatron's gather_output) */
  gatherOutput?: boolean;
  weightGradScale?: number;
}

export interface RowOptions {
  /** reduce-scatter the output so every device gets only its own rows (samples) */
  scatterRows?: boolean;
  weightGradScale?: number;
}

abstract class TensorParallelDense extends SectionLayer {
  protected w!: Float32Array;
  protected b: Float32Array | null = null;
  protected dw!: Float32Array;
  protected db: Float32Array | null = null;
  protected readonly scratch = new ExchangeScratch();
  /** activation buffers that collectives run on (the global batch's rows) */
  protected readonly shared: CollectiveBuffers;
  protected readonly copies: DeviceCopies;
  private buffers = new Map<string, Float32Array>();

  constructor(
    protected readonly backend: Backend,
    protected readonly comm: Communicator,
    readonly name: string,
    readonly inFeatures: number,
    readonly units: number,
    readonly activation: ActivationKind,
    readonly useBias: boolean,
    protected readonly weightGradScale: number,
  ) {
    super();
    this.shared = new CollectiveBuffers(backend, comm);
    this.copies = new DeviceCopies(backend);
  }

  /** Where the arrays live when not on the host (the exchanges bring them across). */
  protected get device(): DeviceStorage | undefined {
    return this.backend.device;
  }

  /** Shapes of this rank's kernel and bias shard (the order of bind). */
  abstract shardShapes(): number[][];

  /** This device's kernel (and bias) shard, drawn like the unsplit layer's. */
  override params(): ParamSpec[] {
    return shardParamSpecs(this.shardShapes(), this.activation, this.inFeatures, this.units);
  }

  override bind(params: Float32Array[], grads: Float32Array[]): void {
    this.w = params[0]!;
    this.dw = grads[0]!;
    if (this.useBias) {
      this.b = params[1]!;
      this.db = grads[1]!;
    }
  }

  /** A backend-owned scratch array kept across steps (grow-only: batches of sequences change size every step). */
  protected buffer(key: string, length: number): Float32Array {
    // a device may hold no rows of a short last batch: keep a real allocation, hand out an empty view
    let b = this.buffers.get(key);
    if (!b || b.length < length) {
      b = this.backend.alloc(Math.max(length, 1));
      this.buffers.set(key, b);
    }
    return length === b.length ? b : b.subarray(0, length);
  }

  /** db += weightGradScale · Σ_rows dz */
  protected biasGrad(dz: Float32Array, rows: number, cols: number): void {
    if (!this.db) return;
    if (this.weightGradScale === 1) {
      this.backend.biasGrad(dz, this.db, rows, cols);
      return;
    }
    const tmp = this.buffer('dbScratch', cols);
    this.backend.fill(tmp, 0);
    this.backend.biasGrad(dz, tmp, rows, cols);
    this.backend.axpy(this.weightGradScale, tmp, this.db);
  }
}

/**
 * Output units [start, end) of y = act(x·W + b) on this rank: W[:, start:end] and b[start:end].
 * Forward needs the whole input on every device and no communication; backward's input gradient
 * is a partial sum over devices (each holds only some units' contribution), reduced here.
 */
export class ColumnParallelDense extends TensorParallelDense {
  readonly split: ColumnSplit;
  readonly start: number;
  readonly end: number;
  private readonly inputRows: boolean;
  private readonly gatherOutput: boolean;
  private x: Tensor | null = null;
  private yShard: Float32Array | null = null;
  private rows: RowSplit | null = null;

  constructor(
    backend: Backend,
    comm: Communicator,
    name: string,
    inFeatures: number,
    units: number,
    activation: ActivationKind,
    useBias: boolean,
    options: ColumnOptions = {},
  ) {
    super(backend, comm, name, inFeatures, units, activation, useBias, options.weightGradScale ?? 1);
    this.split = unitShards(units, comm.size, name);
    ({ start: this.start, end: this.end } = this.split.ranges[comm.rank]!);
    this.inputRows = options.inputRows ?? false;
    this.gatherOutput = options.gatherOutput ?? false;
  }

  get width(): number {
    return this.end - this.start;
  }
  get inputShape(): readonly number[] {
    return [this.inFeatures];
  }
  get outputShape(): readonly number[] {
    return [this.gatherOutput ? this.units : this.width];
  }
  shardShapes(): number[][] {
    return this.useBias ? [[this.inFeatures, this.width], [this.width]] : [[this.inFeatures, this.width]];
  }

  /** the whole batch's input (gathered at the section's entry), and the output shard backward's activation reads */
  savedForBackward(): readonly ArrayBufferView[] {
    if (!this.x) return [];
    return this.activation !== 'linear' && this.yShard ? [this.x.data, this.yShard] : [this.x.data];
  }

  /**
   * x: this device's rows [counts[rank] × in] (inputRows) or every row [total × in] of the step's
   * global batch (ctx.globalBatch). Returns
   * [total × width] (this rank's units) or [total × units] (gatherOutput).
   */
  async forwardAsync(x: Tensor, ctx: ForwardContext): Promise<Tensor> {
    const rows = sectionRows(ctx, this.comm.size),
      n = rows.total,
      w = this.width;
    let input = x;
    if (this.inputRows) {
      input = new Tensor([n, this.inFeatures], await this.shared.get('x', n * this.inFeatures));
      await allgatherRows(this.comm, this.device, x.data, rows, this.inFeatures, input.data, this.scratch);
    }
    const y = this.buffer('y', n * w);
    this.backend.gemm(false, false, n, w, this.inFeatures, 1, input.data, this.w, 0, y);
    if (this.b) this.backend.biasAdd(y, this.b, y, n, w);
    if (this.activation !== 'linear') this.backend.activationForward(this.activation, y, y);
    this.x = input;
    this.yShard = y;
    this.rows = rows;
    if (!this.gatherOutput) return new Tensor([n, w], y);
    const full = new Tensor([n, this.units], this.buffer('yFull', n * this.units));
    await allgatherColumns(this.comm, this.device, y, n, this.split, full.data, this.scratch);
    return full;
  }

  /**
   * dy: gradient of the output, the same on every device. Returns the input gradient: this
   * device's rows (inputRows; reduce-scatter) or every row (all-reduce); null without needInputGrad.
   */
  async backwardAsync(dy: Tensor, needInputGrad = true): Promise<Tensor | null> {
    const rows = this.rows!,
      n = rows.total,
      w = this.width;
    let dz = dy.data;
    if (this.gatherOutput) {
      dz = this.buffer('dyShard', n * w);
      this.copies.columns(dy.data, n, this.units, this.start, this.end, dz);
    }
    if (this.activation !== 'linear') {
      const out = this.buffer('dz', n * w);
      this.backend.activationBackward(this.activation, this.yShard!, dz, out);
      dz = out;
    }
    this.backend.gemm(true, false, this.inFeatures, w, n, this.weightGradScale, this.x!.data, dz, 1, this.dw);
    this.biasGrad(dz, n, w);
    if (!needInputGrad) return null;
    const partial = await this.shared.get('dxPartial', n * this.inFeatures);
    this.backend.gemm(false, true, n, this.inFeatures, w, 1, dz, this.w, 0, partial);
    if (!this.inputRows) {
      await allreduceSum(this.comm, this.device, partial);
      return new Tensor([n, this.inFeatures], partial);
    }
    const mine = rows.counts[this.comm.rank]!;
    const dx = new Tensor([mine, this.inFeatures], this.buffer('dx', mine * this.inFeatures));
    await reduceScatterRows(this.comm, this.device, partial, rows, this.inFeatures, dx.data, this.scratch);
    return dx;
  }
}

/**
 * Input features [start, end) of y = act(x·W + b) on this rank: W[start:end, :], and the whole bias
 * (replicated: its gradient is the same on every device, so it needs no reduction). Forward's
 * product is a partial sum over devices, reduced here before bias and activation; backward needs no
 * communication unless the output was scattered by rows.
 */
export class RowParallelDense extends TensorParallelDense {
  readonly split: ColumnSplit;
  readonly start: number;
  readonly end: number;
  private readonly scatterRows: boolean;
  private x: Tensor | null = null;
  private y: Tensor | null = null;
  private rows: RowSplit | null = null;

  constructor(
    backend: Backend,
    comm: Communicator,
    name: string,
    inFeatures: number,
    units: number,
    activation: ActivationKind,
    useBias: boolean,
    options: RowOptions = {},
  ) {
    super(backend, comm, name, inFeatures, units, activation, useBias, options.weightGradScale ?? 1);
    this.split = unitShards(inFeatures, comm.size, name, 'input features');
    ({ start: this.start, end: this.end } = this.split.ranges[comm.rank]!);
    this.scatterRows = options.scatterRows ?? false;
  }

  get width(): number {
    return this.end - this.start;
  }
  get inputShape(): readonly number[] {
    return [this.width];
  }
  get outputShape(): readonly number[] {
    return [this.units];
  }
  shardShapes(): number[][] {
    return this.useBias ? [[this.width, this.units], [this.units]] : [[this.width, this.units]];
  }

  /** the input shard, and the output backward's activation reads */
  savedForBackward(): readonly ArrayBufferView[] {
    if (!this.x) return [];
    return this.activation !== 'linear' && this.y ? [this.x.data, this.y.data] : [this.x.data];
  }

  /** x: [total × width], this rank's input features. Returns [total × units], or this device's rows (scatterRows). */
  async forwardAsync(x: Tensor, ctx: ForwardContext): Promise<Tensor> {
    const rows = sectionRows(ctx, this.comm.size),
      n = rows.total,
      u = this.units;
    const partial = await this.shared.get('partial', n * u);
    this.backend.gemm(false, false, n, u, this.width, 1, x.data, this.w, 0, partial);
    let y: Tensor;
    if (this.scatterRows) {
      const mine = rows.counts[this.comm.rank]!;
      y = new Tensor([mine, u], this.buffer('y', mine * u));
      await reduceScatterRows(this.comm, this.device, partial, rows, u, y.data, this.scratch);
    } else {
      await allreduceSum(this.comm, this.device, partial);
      y = new Tensor([n, u], partial);
    }
    if (this.b) this.backend.biasAdd(y.data, this.b, y.data, y.batch, u);
    if (this.activation !== 'linear') this.backend.activationForward(this.activation, y.data, y.data);
    this.x = x;
    this.y = y;
    this.rows = rows;
    return y;
  }

  /** dy: like forward's output (every row, the same on every device, or this device's rows). Returns [total × width]. */
  async backwardAsync(dy: Tensor, needInputGrad = true): Promise<Tensor | null> {
    const rows = this.rows!,
      n = rows.total,
      u = this.units;
    let dz = dy.data;
    if (this.activation !== 'linear') {
      dz = this.buffer('dz', dy.size);
      this.backend.activationBackward(this.activation, this.y!.data, dy.data, dz);
    }
    if (this.scatterRows) {
      const full = await this.shared.get('dzFull', n * u);
      await allgatherRows(this.comm, this.device, dz, rows, u, full, this.scratch);
      dz = full;
    }
    this.backend.gemm(true, false, this.width, u, n, this.weightGradScale, this.x!.data, dz, 1, this.dw);
    this.biasGrad(dz, n, u);
    if (!needInputGrad) return null;
    const dx = new Tensor([n, this.width], this.buffer('dx', n * this.width));
    this.backend.gemm(false, true, n, this.width, u, 1, dz, this.w, 0, dx.data);
    return dx;
  }
}

/** Copies this rank's shard out of (toShard) or into (toFull) a full [in, out] kernel and [out] bias. */
export function columnShardCopy(
  full: { kernel: Float32Array; bias?: Float32Array },
  shard: { kernel: Float32Array; bias?: Float32Array },
  inFeatures: number,
  units: number,
  range: { start: number; end: number },
  toShard: boolean,
): void {
  const w = range.end - range.start;
  for (let i = 0; i < inFeatures; i++) {
    const f = full.kernel.subarray(i * units + range.start, i * units + range.end),
      s = shard.kernel.subarray(i * w, (i + 1) * w);
    if (toShard) s.set(f);
    else f.set(s);
  }
  if (full.bias && shard.bias) {
    if (toShard) shard.bias.set(full.bias.subarray(range.start, range.end));
    else full.bias.set(shard.bias, range.start);
  }
}

/** Row-split counterpart of columnShardCopy; the bias is replicated, copied whole. */
export function rowShardCopy(
  full: { kernel: Float32Array; bias?: Float32Array },
  shard: { kernel: Float32Array; bias?: Float32Array },
  units: number,
  range: { start: number; end: number },
  toShard: boolean,
): void {
  const f = full.kernel.subarray(range.start * units, range.end * units);
  if (toShard) shard.kernel.set(f);
  else f.set(shard.kernel);
  if (full.bias && shard.bias) {
    if (toShard) shard.bias.set(full.bias);
    else full.bias.set(shard.bias);
  }
}
