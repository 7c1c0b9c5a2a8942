import type { Communicator } from '../../comm/communicator.ts';
import type { Backend } from '../../kernels/backend.ts';
import type { DeviceStorage } from '../../kernels/deviceStorage.ts';
import { Tensor } from '../../tensor/tensor.ts';
import { shapeSize, VARIABLE } from '../../tensor/shape.ts';
import { outputLengths } from '../../nn/sequence.ts';
import type { ModelSpec } from '../../nn/spec.ts';
import { BufferPool, type ForwardContext, type Layer } from '../../nn/layer.ts';
import {
  allocFlat,
  bindFlat,
  initializeLayer,
  initializeState,
  planFlatLayout,
  type FlatEntry,
  type LayerSlot,
} from '../../nn/flatLayout.ts';
import { buildLayer } from '../../nn/buildLayer.ts';
import { tieEmbeddings } from '../../nn/tiedEmbedding.ts';
import { savedActivationBytes } from '../../nn/activationMemory.ts';
import type { TrainableModel, WholeModelTarget } from '../../nn/trainableModel.ts';
import { allgatherLengths, ExchangeScratch, sectionRows } from './activationExchange.ts';
import { modelParallelLayers, planModelParallelFrom, type ModelParallelPlan } from './plan.ts';
import { copyShard, shardLayout, type ShardEntry } from './shards.ts';
import { buildSectionLayers } from './sectionLayers.ts';
import { DeviceCopies } from './deviceCopies.ts';

/**
 * One device's part of a model run with "one weird trick": the data-parallel layers (replicated,
 * each device on its own samples) and this device's shards of the model-parallel dense layers,
 * channel-split convolutions or Megatron-split transformer blocks, which compute on every device's
 * samples at once. At the boundary the activations are all-gathered (forward) and their gradients
 * reduce-scattered back (backward; a channel-split conv or a split block all-reduces them and keeps
 * its rows); the shards' weight gradients are complete on their own device, so only the replicated
 * part needs an all-reduce.
 * A spatialSplit marked `parallel: model` splits work, not weights: its weights are replicated
 * (data-parallel part) and each device's gradient is its tiles' share, which that all-reduce sums.
 *
 * Flat buffers: params = [replicated | shard], grads alike. `replicatedLength` floats at the front
 * are the same on every device (a data-parallel strategy reduces their gradients); the rest is this
 * device's shard (its gradient is already the whole batch's and must not be reduced).
 *
 * Like Sequential, it is a sequence of layers over flat buffers (nn/flatLayout.ts): the section's
 * layers (sectionLayers.ts) are nn Layers that communicate (forwardAsync/backwardAsync), and its
 * activation memory is counted the same way.
 *
 * On a GPU (`device`) the section's exchanges bring their arrays across (activationExchange.ts),
 * everything else is kernels; the host keeps the weights between steps, as for a whole model on
 * one of several devices (the replica reads the gradients and statistics after each step and
 * writes the weights before the next), so the shards' gradient norm and the gather for checkpoints
 * read host copies.
 */
export class ModelParallelNet implements TrainableModel {
  readonly plan: ModelParallelPlan;
  /** this device's layers in order: the data-parallel prefix, the section's layers, the data-parallel tail */
  readonly layers: Layer[];
  readonly params: Float32Array;
  readonly grads: Float32Array;
  readonly state: Float32Array;
  /** the replicated (data-parallel) part: the first replicatedLength floats of params and grads */
  readonly replicatedLength: number;
  readonly replicatedEntries: FlatEntry[];
  readonly stateEntries: FlatEntry[];
  /** this device's shards, offsets into params (after the replicated part) */
  readonly shardEntries: ShardEntry[];
  readonly inputShape: readonly number[];
  readonly outputShape: readonly number[];
  /** the section exchanges activations: every device runs every step, even without samples */
  readonly needsAsync = true;
  /** the unsplit model's layers: the data-parallel ones are used as they are, the others give shapes and init specs */
  private readonly unsplit: Layer[];
  /** [start, end) of the section in `layers`: outside it a device computes only its own rows */
  private readonly section: { start: number; end: number };
  /** per layer of `layers`, the offset of its first replicated parameter (−1: none, or a shard) */
  private readonly firstReplicated: number[];
  /** the most activation bytes held after a training forward since the last takePeakActivationBytes() */
  private peakActivationBytes = 0;
  /** the last forward: each layer's input shape (a device without rows skips local layers with these), and over frames the padded frames and lengths at the section */
  private inputShapes: (readonly number[])[] = [];
  private framesAtSection: { frames: number; lengths: Int32Array | undefined } = { frames: 0, lengths: undefined };
  /** the gradient at the section's end over frames, with its padded frames zeroed */
  private readonly pool: BufferPool;
  private readonly copies: DeviceCopies;
  /** a section of transformer blocks masks padding with every device's lengths (gathered at its start) */
  private readonly wholeBatchLengths: boolean;
  private readonly lengthScratch = new ExchangeScratch();

  constructor(
    readonly backend: Backend,
    readonly spec: ModelSpec,
    readonly comm: Communicator,
    options: { shared?: boolean } = {},
  ) {
    this.unsplit = [];
    let shape: readonly number[] = spec.input;
    spec.layers.forEach((l, i) => {
      const layer = buildLayer(backend, l, i, shape);
      this.unsplit.push(layer);
      shape = layer.outputShape;
    });
    this.inputShape = spec.input;
    this.outputShape = shape;
    const begin = modelParallelLayers(spec)[0] ?? 0;
    this.plan = planModelParallelFrom(
      spec,
      comm.size,
      this.unsplit.map((l) => l.inputShape),
    );
    const { end } = this.plan;
    const local = (from: number, to: number) =>
      this.unsplit.slice(from, to).map((layer, k) => ({ index: from + k, layer, shard: false }));
    const inSection = buildSectionLayers(backend, comm, this.plan, this.unsplit);
    const all = [...local(0, begin), ...inSection, ...local(end, this.unsplit.length)];
    this.layers = all.map((s) => s.layer);
    this.section = { start: begin, end: begin + inSection.length };

    // layout: replicated layers (prefix, parallel spatialSplits, tail: layer order), then this device's shards
    const replicated: LayerSlot[] = all.filter((s) => !s.shard),
      shards: LayerSlot[] = all.filter((s) => s.shard);
    const head = planFlatLayout(replicated),
      rest = planFlatLayout(shards, head.paramLength, head.stateLength);
    this.replicatedLength = head.paramLength;
    this.replicatedEntries = head.params.flat();
    this.stateEntries = head.state.flat();
    const own = shardLayout(this.plan, comm.rank);
    this.shardEntries = own.entries.map((e) => ({ ...e, offset: e.offset + head.paramLength }));
    if (rest.paramLength !== head.paramLength + own.length)
      throw new Error("ModelParallelNet: the shard layout disagrees with the section's layers");
    const buffers = allocFlat(backend, rest.paramLength, rest.stateLength, options.shared);
    this.params = buffers.params;
    this.grads = buffers.grads;
    this.state = buffers.state;
    bindFlat(replicated, head, buffers);
    bindFlat(shards, rest, buffers);
    // a tied output projection (data-parallel, like its embedding) shares the embedding's views
    tieEmbeddings(this.layers);
    const first = new Map(replicated.map((s, k) => [s.layer, head.params[k]![0]?.offset ?? -1]));
    this.firstReplicated = this.layers.map((l) => first.get(l) ?? -1);
    this.pool = new BufferPool(backend);
    this.copies = new DeviceCopies(backend);
    this.wholeBatchLengths = this.plan.layers.some((p) => p.kind === 'transformer');
  }

  /** where the arrays live when the backend holds them on a GPU */
  get device(): DeviceStorage | undefined {
    return this.backend.device;
  }

  /**
   * The unsplit model's initialisation (same seed, same parameter indices), of which this device
   * keeps the replicated layers and its shards: so a run starts where one device would.
   */
  initialize(seed: number): void {
    let index = 0;
    for (const [i, layer] of this.unsplit.entries()) {
      const views = (entries: FlatEntry[], buf: Float32Array) =>
        entries.filter((e) => e.name.startsWith(`layers.${i}.`)).map((e) => buf.subarray(e.offset, e.offset + e.size));
      const replicated = views(this.replicatedEntries, this.params);
      if (replicated.length || !this.shardEntries.some((e) => e.layer === i)) {
        index = initializeLayer(layer, replicated, seed, index);
      } else {
        // a split layer: drawn whole, then cut to this device's shards
        const specs = layer.params(),
          whole = specs.map((p) => new Float32Array(shapeSize(p.shape)));
        index = initializeLayer(layer, whole, seed, index);
        const byName = new Map(specs.map((p, k) => [`layers.${i}.${p.name}`, whole[k]!]));
        copyShard(i, (name) => byName.get(name)!, this.shardEntries, this.params, 0, true);
      }
      initializeState(layer, views(this.stateEntries, this.state));
    }
  }

  /** Zeroes the gradients, on the device too where they live there. */
  zeroGrads(): void {
    this.grads.fill(0);
    this.device?.fromHost([this.grads]);
  }

  private isLocal(k: number): boolean {
    return k < this.section.start || k >= this.section.end;
  }

  /**
   * Forward on this device's `x`: its rows of the step's global batch (ctx.globalBatch samples;
   * ctx.sampleOffset is the global index of its first sample). Collective: every device calls it
   * every step, even with no rows. Returns this device's rows of the output.
   */
  async forwardAsync(x: Tensor, ctx: ForwardContext): Promise<Tensor> {
    const rows = sectionRows(ctx, this.comm.size),
      mine = rows.counts[this.comm.rank]!;
    if (x.batch !== mine) {
      throw new Error(
        `device ${this.comm.rank}: got ${x.batch} samples but the global batch of ${rows.total} gives it ${mine}`,
      );
    }
    let h = x,
      c = ctx;
    const { frames } = this.plan;
    let ownLengths: Int32Array | undefined;
    for (const [k, layer] of this.layers.entries()) {
      if (k === this.section.start && this.wholeBatchLengths && c.lengths) {
        ownLengths = c.lengths;
        c = { ...c, lengths: await allgatherLengths(this.comm, c.lengths, rows, this.lengthScratch) };
      }
      // over frames: the section's rows are the samples' frames, padded to the step's longest
      if (frames && k === this.section.start) {
        this.framesAtSection = { frames: h.shape[1]!, lengths: c.lengths };
        h = h.reshape([h.batch * h.shape[1]!, h.shape[2]!]);
        c = { ...c, rowsPerSample: this.framesAtSection.frames };
      }
      this.inputShapes[k] = h.shape;
      if (mine === 0 && this.isLocal(k)) h = new Tensor([0, ...this.emptyShape(layer, h)], new Float32Array(0));
      else h = layer.forwardAsync ? await layer.forwardAsync(h, c) : layer.forward(h, c);
      if (frames && k === this.section.end - 1) {
        const { frames: t, lengths } = this.framesAtSection,
          u = h.shape[1]!;
        h = h.reshape([mine, t, u]);
        // the section's own output (backend arrays): zeroed where it lives
        if (lengths && mine > 0) this.backend.zeroPadding(h.data, mine, t, u, lengths);
        c = { ...c, rowsPerSample: undefined };
      } else if (k === this.section.end - 1 && this.wholeBatchLengths) {
        c = { ...c, lengths: ownLengths }; // past the exit: this device's samples again
      } else if (c.lengths && layer.outputLengths && this.isLocal(k))
        c = { ...c, lengths: layer.outputLengths(c.lengths) };
    }
    if (ctx.training) {
      // without rows the data-parallel layers did not run: what they hold is an earlier step's
      const held = mine > 0 ? this.layers : this.layers.slice(this.section.start, this.section.end);
      this.peakActivationBytes = Math.max(this.peakActivationBytes, savedActivationBytes(held));
    }
    return h;
  }

  /**
   * Backward from dL/d(output) of this device's rows, accumulating into grads. `onReady(offset)`
   * says replicated grads[offset:] are final, in the same order on every device (with or without rows).
   */
  async backwardAsync(dy: Tensor, onReady?: (offset: number) => void): Promise<void> {
    const mine = dy.batch,
      { frames } = this.plan;
    let g: Tensor | null = dy;
    for (let k = this.layers.length - 1; k >= 0 && g; k--) {
      const layer = this.layers[k]!;
      if (frames && k === this.section.end - 1) {
        // padded frames take no gradient into the section (what comes back is 0 there already)
        const { frames: t, lengths } = this.framesAtSection,
          u = g.shape[2]!;
        if (lengths && mine > 0) g = this.withoutPadding(g, lengths);
        g = g.reshape([mine * t, u]);
      }
      if (mine === 0 && this.isLocal(k)) g = new Tensor([0, ...this.inputShapes[k]!.slice(1)], new Float32Array(0));
      else g = layer.backwardAsync ? await layer.backwardAsync(g, k > 0) : layer.backward(g, k > 0);
      if (frames && k === this.section.start && g) g = g.reshape([mine, this.framesAtSection.frames, g.shape[1]!]);
      const offset = this.firstReplicated[k]!;
      if (onReady && offset >= 0) onReady(offset);
    }
  }

  /**
   * `dy` [n, T, F] with frames t ≥ lengths[n] zeroed, in a buffer of the net's own: `dy` may be the
   * loss's array, which on a GPU may be a host one that kernels only read.
   */
  private withoutPadding(dy: Tensor, lengths: Int32Array): Tensor {
    const [n, t, f] = dy.shape as [number, number, number];
    const out = new Tensor(dy.shape, this.pool.f32('dyAtSectionEnd', dy.size));
    this.copies.whole(dy.data, out.data);
    this.backend.zeroPadding(out.data, n, t, f, lengths);
    return out;
  }

  /** A local layer's output shape for a device without rows: its variable frames those `h` (a sequence) maps to. */
  private emptyShape(layer: Layer, h: Tensor): number[] {
    const t = h.shape.length === 3 ? h.shape[1]! : 0;
    const out = layer.outputLengths ? layer.outputLengths(Int32Array.of(t))[0]! : t;
    return layer.outputShape.map((d) => (d === VARIABLE ? out : d));
  }

  /** The model's output lengths from its input's (layers that shorten time map them): the CTC loss's input lengths. */
  outputLengths(lengths: Int32Array): Int32Array {
    return outputLengths(this.unsplit, lengths);
  }

  /**
   * Σ g² over this device's shards, counting a tensor that every device holds whole (a row-parallel
   * layer's bias, a split transformer block's layerNorms) on rank 0 only: summed over the devices,
   * the shards' share of the squared global gradient norm (train.clipGradNorm). Reads the host's
   * gradients: on a GPU, those the step's read brought.
   */
  shardGradSquares(): number {
    let s = 0;
    for (const e of this.shardEntries) {
      if (e.replicated && this.comm.rank !== 0) continue;
      const g = this.grads.subarray(e.offset, e.offset + e.size);
      for (let i = 0; i < g.length; i++) s += g[i]! * g[i]!;
    }
    return s;
  }

  get gradientReadyOffsets(): readonly number[] {
    return this.firstReplicated.filter((o) => o >= 0).reverse();
  }

  takePeakActivationBytes(): number {
    const peak = this.peakActivationBytes;
    this.peakActivationBytes = 0;
    return peak;
  }

  /**
   * Collective: assembles the unsplit model on rank 0 (`into`, null elsewhere) from every device's
   * part. `sources` are laid out like params (params, optimizer buffers); each lands in the
   * matching `into.buffers` laid out like the unsplit model; the state comes along. Host copies
   * throughout: on a GPU the host holds the current weights and the statistics of the last step's
   * read, and `into`'s model takes what lands in its host copies before it next computes.
   */
  async gatherWhole(sources: Float32Array[], into: WholeModelTarget | null): Promise<void> {
    const { comm } = this;
    if (into)
      for (const [k, src] of sources.entries()) this.placeIntoFull(src, 0, into.buffers[k]!, into.paramEntries, true);
    // each device's shards reach rank 0 by broadcasts (collectives work between any two ranks on every
    // transport, point to point not always: hierarchical worlds link only some pairs)
    for (let r = 1; r < comm.size; r++) {
      const length = this.shardLength(r);
      if (length === 0) continue; // a section of parallel spatialSplits only: every weight is replicated
      for (const [k, src] of sources.entries()) {
        const shard =
          comm.rank === r
            ? src.subarray(this.replicatedLength, this.replicatedLength + length)
            : new Float32Array(length);
        await comm.broadcast(shard, r);
        if (into) this.placeIntoFull(shard, r, into.buffers[k]!, into.paramEntries, false);
      }
    }
    if (!into) return;
    for (const e of this.stateEntries) {
      const to = into.stateEntries.find((s) => s.name === e.name)!;
      into.state.set(this.state.subarray(e.offset, e.offset + e.size), to.offset);
    }
  }

  /**
   * Copies `src` (laid out like this device's params: replicated then shard) into `dst`, laid out
   * like the unsplit model (`entries`, e.g. Sequential.paramEntries): this device's shards, and the
   * replicated part when `withReplicated`. Optimizer buffers share the params' layout, so they
   * travel the same way.
   */
  placeIntoFull(
    src: Float32Array,
    rank: number,
    dst: Float32Array,
    entries: readonly FlatEntry[],
    withReplicated: boolean,
  ): void {
    const at = (name: string) => {
      const e = entries.find((x) => x.name === name);
      if (!e) throw new Error(`placeIntoFull: the unsplit model has no tensor '${name}'`);
      return dst.subarray(e.offset, e.offset + e.size);
    };
    if (withReplicated)
      for (const e of this.replicatedEntries) at(e.name).set(src.subarray(e.offset, e.offset + e.size));
    const layout = shardLayout(this.plan, rank);
    const base = rank === this.comm.rank ? this.replicatedLength : 0;
    for (const p of this.plan.layers) copyShard(p.index, at, layout.entries, src, base, false);
  }

  /**
   * Loads this device's shards from unsplit tensors (`get(name, shape)`: a checkpoint's, by name
   * and the unsplit shape), leaving the layers `skip` says as they are.
   */
  loadShards(get: (name: string, shape: readonly number[]) => Float32Array, skip: (layer: number) => boolean): void {
    for (const p of this.plan.layers) {
      if (skip(p.index)) continue;
      const shapes = new Map(this.unsplit[p.index]!.params().map((s) => [`layers.${p.index}.${s.name}`, s.shape]));
      copyShard(p.index, (name) => get(name, shapes.get(name)!), this.shardEntries, this.params, 0, true);
    }
  }

  /** Floats of device `rank`'s shard part. */
  shardLength(rank: number): number {
    return shardLayout(this.plan, rank).length;
  }
}
