import type { Communicator } from '../comm/communicator.ts';
import type { Backend } from '../kernels/backend.ts';
import { Tensor } from '../tensor/tensor.ts';
import { shapeSize } from '../tensor/shape.ts';
import type { ModelSpec } from '../nn/spec.ts';
import type { ForwardContext, Layer } from '../nn/layer.ts';
import type { FlatEntry } from '../nn/model.ts';
import { alignFloats } from '../nn/model.ts';
import { buildLayer } from '../nn/buildLayer.ts';
import { Dropout } from '../nn/dropout.ts';
import { initParam } from '../nn/init.ts';
import { allgatherRows, CollectiveBuffers, ExchangeScratch, rowSplit, type RowSplit } from './activationExchange.ts';
import { modelParallelLayers, planModelParallelFrom, type ModelParallelPlan, type PlannedLayer } from './modelParallelPlan.ts';
import { ColumnParallelDense, RowParallelDense, columnShardCopy, rowShardCopy, unitShards } from './tensorParallel.ts';
import { ChannelParallelConv } from './channelParallelConv.ts';
import { SpatialParallelStage } from './spatialParallelStage.ts';
import type { SerialSpatialStack } from '../nn/spatialStack.ts';

/**
 * One device's part of a model run with "one weird trick": the data-parallel layers (replicated,
 * each device on its own samples) and this device's shards of the model-parallel dense layers and
 * channel-split convolutions, which compute on every device's samples at once. At the boundary the
 * activations are all-gathered (forward) and their gradients reduce-scattered back (backward; a
 * channel-split conv all-reduces them and keeps its rows); the shards' weight
 * gradients are complete on their own device, so only the replicated part needs an all-reduce.
 * A spatialSplit marked `parallel: model` splits work, not weights: its weights are replicated
 * (data-parallel part) and each device's gradient is its tiles' share, which that all-reduce sums.
 *
 * Flat buffers: params = [replicated | shard], grads alike. `replicatedLength` floats at the front
 * are the same on every device (a data-parallel strategy reduces their gradients); the rest is this
 * device's shard (its gradient is already the whole batch's and must not be reduced).
 */

/** A tensor-parallel or elementwise layer of the middle section. */
interface Stage {
  forward(x: Tensor, rows: RowSplit, ctx: ForwardContext): Promise<Tensor>;
  backward(dy: Tensor, needInputGrad: boolean): Promise<Tensor | null>;
}

/**
 * Where one shard tensor of a model-parallel dense layer lives in a device's shard part. A
 * channel-split conv2d's slice is a 'column' shard too: its kernel [KH, KW, C, F] is a matrix
 * [KH·KW·C, F] whose columns are the filters.
 */
export interface ShardEntry {
  /** checkpoint name of the unsplit tensor ('layers.7.kernel') */
  name: string;
  layer: number;
  param: 'kernel' | 'bias';
  kind: 'column' | 'row';
  /** offset from the start of the shard part, and length */
  offset: number;
  size: number;
  /** units (column) or input features (row) this device holds */
  range: { start: number; end: number };
  inFeatures: number;
  units: number;
}

/** The shard part's layout on device `rank` (every device can compute every other's). */
export function shardLayout(plan: ModelParallelPlan, rank: number): { entries: ShardEntry[]; length: number } {
  const entries: ShardEntry[] = [];
  let at = 0;
  for (const p of plan.layers) {
    if (p.kind === 'elementwise' || p.kind === 'spatial') continue;
    if (p.kind === 'channel') {
      const { filters: units, kernelSize: [KH, KW], useBias } = p.spec, inFeatures = KH * KW * p.inputShape[2]!;
      const range = unitShards(units, plan.devices, `model.layers[${p.index}] conv2d`, 'filters').ranges[rank]!;
      const w = range.end - range.start;
      for (const [param, size] of (useBias ? [['kernel', inFeatures * w], ['bias', w]] : [['kernel', inFeatures * w]]) as ['kernel' | 'bias', number][]) {
        entries.push({ name: `layers.${p.index}.${param}`, layer: p.index, param, kind: 'column', offset: at, size, range, inFeatures, units });
        at = alignFloats(at + size);
      }
      continue;
    }
    const name = `model.layers[${p.index}] dense`;
    const { units, useBias } = p.spec;
    const range = p.kind === 'column' ? unitShards(units, plan.devices, name).ranges[rank]! : unitShards(p.inFeatures, plan.devices, name, 'input features').ranges[rank]!;
    const w = range.end - range.start;
    const shapes: [('kernel' | 'bias'), number][] = [['kernel', p.kind === 'column' ? p.inFeatures * w : w * units]];
    if (useBias) shapes.push(['bias', p.kind === 'column' ? w : units]);
    for (const [param, size] of shapes) {
      entries.push({ name: `layers.${p.index}.${param}`, layer: p.index, param, kind: p.kind, offset: at, size, range, inFeatures: p.inFeatures, units });
      at = alignFloats(at + size);
    }
  }
  return { entries, length: at };
}

/** Keeps this device's own rows of a 'full' activation; backward all-gathers the rows' gradients. */
class SliceRows implements Stage {
  private readonly scratch = new ExchangeScratch();
  private readonly shared: CollectiveBuffers;
  private rows: RowSplit | null = null;
  constructor(private readonly comm: Communicator, backend: Backend) {
    this.shared = new CollectiveBuffers(backend, comm);
  }

  async forward(x: Tensor, rows: RowSplit): Promise<Tensor> {
    const width = x.size / x.batch, r = this.comm.rank, start = rows.starts[r]! * width;
    this.rows = rows;
    return new Tensor([rows.counts[r]!, ...x.shape.slice(1)], x.data.subarray(start, start + rows.counts[r]! * width));
  }

  async backward(dy: Tensor): Promise<Tensor> {
    const rows = this.rows!, sample = dy.shape.slice(1), width = shapeSize(sample);
    const grad = await this.shared.get('grad', rows.total * width);
    await allgatherRows(this.comm, dy.data, rows, width, grad, this.scratch);
    return new Tensor([rows.total, ...sample], grad);
  }
}

/** An activation, dropout or flatten on every device's samples (the batch-wide dropout key). */
class Elementwise implements Stage {
  constructor(private readonly layer: Layer, private readonly comm: Communicator) {}
  async forward(x: Tensor, rows: RowSplit, ctx: ForwardContext): Promise<Tensor> {
    // the input holds every device's rows, so sample k of it is sample k of the global batch
    return this.layer.forward(x, { ...ctx, sampleOffset: ctx.sampleOffset - rows.starts[this.comm.rank]! });
  }
  async backward(dy: Tensor): Promise<Tensor | null> {
    return this.layer.backward(dy, true);
  }
}

export class ModelParallelNet {
  readonly plan: ModelParallelPlan;
  /** the data-parallel layers before and after the model-parallel section, as the unsplit model has them */
  readonly prefix: Layer[];
  readonly tail: Layer[];
  readonly params: Float32Array;
  readonly grads: Float32Array;
  readonly state: Float32Array;
  /** the replicated (data-parallel) part: the first replicatedLength floats of params and grads */
  readonly replicatedLength: number;
  readonly replicatedEntries: FlatEntry[] = [];
  readonly stateEntries: FlatEntry[] = [];
  readonly shardEntries: ShardEntry[];
  readonly outputShape: readonly number[];
  private readonly allLayers: Layer[];
  private readonly stages: Stage[] = [];
  /** per-sample shape of the section's input */
  private readonly entryShape: readonly number[];
  /** offset of each replicated layer's first parameter (−1: none), by layer index */
  private readonly firstOffset = new Map<number, number>();
  /** per stage, the layer whose replicated gradients are final after its backward (a parallel spatialSplit) */
  private readonly stageReady: (number | null)[] = [];
  /** layers whose weights are in the replicated part: outside the section, or a parallel spatialSplit in it */
  private readonly replicated: (i: number) => boolean;

  constructor(readonly backend: Backend, readonly spec: ModelSpec, readonly comm: Communicator, options: { shared?: boolean } = {}) {
    // the unsplit layers: the data-parallel ones are used as they are, the others give shapes and init specs
    this.allLayers = [];
    let shape: readonly number[] = spec.input;
    spec.layers.forEach((l, i) => { const layer = buildLayer(backend, l, i, shape); this.allLayers.push(layer); shape = layer.outputShape; });
    this.outputShape = shape;
    const begin = modelParallelLayers(spec)[0] ?? 0;
    const entryShape = begin > 0 ? this.allLayers[begin - 1]!.outputShape : spec.input;
    this.plan = planModelParallelFrom(spec, comm.size, this.allLayers.map((l) => l.inputShape));
    this.entryShape = entryShape;
    const { end } = this.plan;
    this.prefix = this.allLayers.slice(0, begin);
    this.tail = this.allLayers.slice(end);
    const spatial = new Set(this.plan.layers.filter((p) => p.kind === 'spatial').map((p) => p.index));
    this.replicated = (i) => i < begin || i >= end || spatial.has(i);

    // layout: replicated layers (prefix, parallel spatialSplits, tail: layer order), then this device's shards
    let at = 0, stateAt = 0;
    for (const [i, layer] of this.allLayers.entries()) {
      if (!this.replicated(i)) continue;
      for (const p of layer.params()) {
        const size = shapeSize(p.shape);
        if (!this.firstOffset.has(i)) this.firstOffset.set(i, at);
        this.replicatedEntries.push({ name: `layers.${i}.${p.name}`, shape: p.shape, offset: at, size });
        at = alignFloats(at + size);
      }
      for (const s of layer.state()) {
        const size = shapeSize(s.shape);
        this.stateEntries.push({ name: `layers.${i}.${s.name}`, shape: s.shape, offset: stateAt, size });
        stateAt = alignFloats(stateAt + size);
      }
    }
    this.replicatedLength = at;
    const shards = shardLayout(this.plan, comm.rank);
    this.shardEntries = shards.entries.map((e) => ({ ...e, offset: e.offset + at }));
    this.params = backend.alloc(Math.max(at + shards.length, 1), options.shared);
    this.grads = backend.alloc(Math.max(at + shards.length, 1), options.shared);
    this.state = backend.alloc(Math.max(stateAt, 1), options.shared);
    const view = (buf: Float32Array, e: { offset: number; size: number }) => buf.subarray(e.offset, e.offset + e.size);
    for (const [i, layer] of this.allLayers.entries()) {
      if (!this.replicated(i)) continue;
      const own = (e: FlatEntry) => e.name.startsWith(`layers.${i}.`);
      const p = this.replicatedEntries.filter(own), s = this.stateEntries.filter(own);
      layer.bind(p.map((e) => view(this.params, e)), p.map((e) => view(this.grads, e)), s.map((e) => view(this.state, e)));
    }
    this.buildStages((layer) => this.shardEntries.filter((e) => e.layer === layer));
  }

  private buildStages(shardsOf: (layer: number) => ShardEntry[]): void {
    const { backend, comm } = this;
    const weightGradScale = 1 / comm.size;
    const bind = <L extends { bind(params: Float32Array[], grads: Float32Array[]): void }>(layer: L, i: number): L => {
      const entries = shardsOf(i);
      layer.bind(entries.map((e) => this.params.subarray(e.offset, e.offset + e.size)), entries.map((e) => this.grads.subarray(e.offset, e.offset + e.size)));
      return layer;
    };
    const ranges = new Map<number, { start: number; end: number }>();
    for (const p of this.plan.layers) {
      const name = `model.layers[${p.index}] ${p.spec.type}`;
      if (p.kind === 'column') {
        const { units, activation, useBias } = p.spec;
        const layer = new ColumnParallelDense(backend, comm, name, p.inFeatures, units, activation, useBias,
          { inputRows: p.inputRows, gatherOutput: p.gatherOutput, weightGradScale });
        ranges.set(p.index, { start: layer.start, end: layer.end });
        this.stages.push(bind(layer, p.index));
      } else if (p.kind === 'channel') {
        this.stages.push(bind(new ChannelParallelConv(backend, comm, name, p.spec, p.inputShape, { inputRows: p.inputRows, weightGradScale }), p.index));
      } else if (p.kind === 'spatial') {
        // the unsplit layer is bound to the replicated part: its inner layers carry the weight views
        const stack = (this.allLayers[p.index] as SerialSpatialStack).stack;
        this.stages.push(new SpatialParallelStage(backend, comm, stack, p.spec.tiles, p.inputShape, { inputRows: p.inputRows }));
      } else if (p.kind === 'row') {
        const { units, activation, useBias } = p.spec;
        this.stages.push(bind(new RowParallelDense(backend, comm, name, p.inFeatures, units, activation, useBias,
          { scatterRows: p.scatterRows, weightGradScale }), p.index));
      } else {
        this.stages.push(new Elementwise(this.elementwiseLayer(p, ranges), comm));
      }
      this.stageReady.push(p.kind === 'spatial' ? p.index : null);
    }
    if (this.plan.sliceRowsAtEnd) this.stages.push(new SliceRows(comm, backend));
  }

  /** The nn layer for an elementwise stage, built for the width it sees (a shard's, when split). */
  private elementwiseLayer(p: Extract<PlannedLayer, { kind: 'elementwise' }>, ranges: Map<number, { start: number; end: number }>): Layer {
    // the section computes on the job's whole batch, not a replica's: dropout there is keyed by
    // global sample index (and, on a shard, by the feature's index in the unsplit layer)
    if (p.spec.type === 'dropout') {
      const range = p.form === 'shard' ? ranges.get(p.shardOf!)! : { start: 0, end: p.features };
      return new Dropout(this.backend, `model.layers[${p.index}] dropout`, p.form === 'shard' ? [range.end - range.start] : p.inputShape,
        p.spec.rate, p.index, 'per-sample', { offset: range.start, total: p.features });
    }
    if (p.form !== 'shard') return buildLayer(this.backend, p.spec, p.index, p.inputShape);
    const range = ranges.get(p.shardOf!)!;
    return buildLayer(this.backend, p.spec, p.index, [range.end - range.start]);
  }

  /**
   * The unsplit model's initialisation (same seed, same parameter indices), of which this device
   * keeps the replicated layers and its shards: so a run starts where one device would.
   */
  initialize(seed: number): void {
    let index = 0;
    for (const [i, layer] of this.allLayers.entries()) {
      const inMiddle = !this.replicated(i);
      const full: { kernel?: Float32Array; bias?: Float32Array } = {};
      for (const spec of layer.params()) {
        if (!inMiddle) {
          const e = this.replicatedEntries.find((x) => x.name === `layers.${i}.${spec.name}`)!;
          initParam(spec, this.params.subarray(e.offset, e.offset + e.size), seed, index);
        } else {
          const buf = new Float32Array(shapeSize(spec.shape));
          initParam(spec, buf, seed, index);
          full[spec.name as 'kernel' | 'bias'] = buf;
        }
        index++;
      }
      if (inMiddle && full.kernel) this.copyShard(i, { kernel: full.kernel, bias: full.bias }, this.shardEntries, this.params, 0, true);
      const states = this.stateEntries.filter((e) => e.name.startsWith(`layers.${i}.`));
      layer.state().forEach((s, k) => { const e = states[k]!; this.state.fill(s.init === 'ones' ? 1 : 0, e.offset, e.offset + e.size); });
    }
  }

  /** Between a full kernel/bias and the shard entries of layer `layer` found at `base` in `buf`. */
  private copyShard(layer: number, full: { kernel: Float32Array; bias?: Float32Array }, entries: ShardEntry[], buf: Float32Array,
                    base: number, toShard: boolean): void {
    const mine = entries.filter((e) => e.layer === layer);
    const k = mine.find((e) => e.param === 'kernel')!, b = mine.find((e) => e.param === 'bias');
    const shard = { kernel: buf.subarray(base + k.offset, base + k.offset + k.size), bias: b ? buf.subarray(base + b.offset, base + b.offset + b.size) : undefined };
    if (k.kind === 'column') columnShardCopy(full, shard, k.inFeatures, k.units, k.range, toShard);
    else rowShardCopy(full, shard, k.units, k.range, toShard);
  }

  zeroGrads(): void {
    this.grads.fill(0);
  }

  /**
   * Forward on this device's `x` (its rows of a global batch of rows.total samples; ctx.sampleOffset
   * is the global index of its first sample). Collective: every device calls it every step, even
   * with no rows. Returns this device's rows of the output.
   */
  async forward(x: Tensor, rows: RowSplit, ctx: ForwardContext): Promise<Tensor> {
    const mine = rows.counts[this.comm.rank]!;
    let h = x;
    if (mine > 0) for (const layer of this.prefix) h = layer.forward(h, ctx);
    else h = new Tensor([0, ...this.entryShape], new Float32Array(0));
    for (const stage of this.stages) h = await stage.forward(h, rows, ctx);
    if (mine > 0) for (const layer of this.tail) h = layer.forward(h, ctx);
    else h = new Tensor([0, ...this.outputShape], new Float32Array(0));
    return h;
  }

  /**
   * Backward from dL/d(output) of this device's rows, accumulating into grads. `onReady(offset)`
   * says replicated grads[offset:] are final, in the same order on every device (with or without rows).
   */
  async backward(dy: Tensor, onReady?: (offset: number) => void): Promise<void> {
    const { begin, end } = this.plan;
    const mine = dy.batch;
    let g: Tensor | null = dy;
    for (let i = this.allLayers.length - 1; i >= end; i--) {
      if (mine > 0) g = this.allLayers[i]!.backward(g!, true);
      this.ready(i, onReady);
    }
    if (mine === 0) g = new Tensor([0, ...this.allLayers[end - 1]!.outputShape], new Float32Array(0));
    for (let s = this.stages.length - 1; s >= 0; s--) {
      g = await this.stages[s]!.backward(g!, s > 0 || begin > 0);
      const layer = this.stageReady[s];
      if (layer != null) this.ready(layer, onReady);
    }
    for (let i = begin - 1; i >= 0; i--) {
      if (mine > 0) g = this.allLayers[i]!.backward(g!, i > 0);
      this.ready(i, onReady);
    }
  }

  private ready(layer: number, onReady?: (offset: number) => void): void {
    const offset = this.firstOffset.get(layer);
    if (onReady && offset !== undefined) onReady(offset);
  }

  /** The split of a global batch of n samples over the devices (the data sampler's rule). */
  rowsFor(n: number): RowSplit {
    return rowSplit(n, this.comm.size);
  }

  /**
   * Copies `src` (laid out like this device's params: replicated then shard) into `dst`, laid out
   * like the unsplit model (`entries`, e.g. Sequential.paramEntries): this device's shards, and the
   * replicated part when `withReplicated`. Optimizer buffers share the params' layout, so they
   * travel the same way.
   */
  placeIntoFull(src: Float32Array, rank: number, dst: Float32Array, entries: FlatEntry[], withReplicated: boolean): void {
    const at = (name: string) => {
      const e = entries.find((x) => x.name === name);
      if (!e) throw new Error(`placeIntoFull: the unsplit model has no tensor '${name}'`);
      return dst.subarray(e.offset, e.offset + e.size);
    };
    if (withReplicated) for (const e of this.replicatedEntries) at(e.name).set(src.subarray(e.offset, e.offset + e.size));
    const layout = shardLayout(this.plan, rank);
    const base = rank === this.comm.rank ? this.replicatedLength : 0;
    for (const p of this.plan.layers) {
      if (p.kind === 'elementwise' || p.kind === 'spatial') continue;
      const kernel = at(`layers.${p.index}.kernel`), bias = p.spec.useBias ? at(`layers.${p.index}.bias`) : undefined;
      this.copyShard(p.index, { kernel, bias }, layout.entries, src, base, false);
    }
  }

  /** Floats of device `rank`'s shard part. */
  shardLength(rank: number): number {
    return shardLayout(this.plan, rank).length;
  }
}
