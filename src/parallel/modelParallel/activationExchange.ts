import { ownedSlice, type Communicator } from '../../comm/communicator.ts';
import type { Backend } from '../../kernels/backend.ts';
import type { DeviceStorage } from '../../kernels/deviceStorage.ts';
import { Tensor } from '../../tensor/tensor.ts';
import { shapeSize } from '../../tensor/shape.ts';
import type { ForwardContext } from '../../nn/layer.ts';

/**
 * Moving activations between devices when each holds a different number of rows (samples) or
 * columns (units). The transports' allgather/reduceScatter split a flat buffer evenly by
 * ownedSlice, so uneven parts travel in G equal, zero-padded blocks: block r is exactly rank r's
 * owned slice. When the parts are even the buffer itself is used, without padding or copies.
 *
 * The collectives run on host arrays. Where the backend's arrays live on a device (`device`), each
 * exchange brings what it sends to the host first (one read) and what it received back after (one
 * upload); the layers around it keep everything else on the device.
 */

/** Rows each rank holds this step and where they start in the concatenated batch (rank order). */
export interface RowSplit {
  counts: readonly number[];
  starts: readonly number[];
  total: number;
}

/** The split of a global batch of n samples over `size` ranks: the same rule as the data sampler. */
export function rowSplit(n: number, size: number): RowSplit {
  const counts: number[] = [],
    starts: number[] = [];
  for (let r = 0; r < size; r++) {
    const { start, end } = ownedSlice(n, size, r);
    counts.push(end - start);
    starts.push(start);
  }
  return { counts, starts, total: n };
}

/**
 * The rows of this step's global batch (ctx.globalBatch) each of `size` devices holds: its samples,
 * or in a section over frames (ctx.rowsPerSample) its samples' frames.
 */
export function sectionRows(ctx: ForwardContext, size: number): RowSplit {
  if (ctx.globalBatch === undefined)
    throw new Error('a model-parallel layer needs ctx.globalBatch (the samples of the step over all devices)');
  const split = rowSplit(ctx.globalBatch, size),
    t = ctx.rowsPerSample ?? 1;
  return t === 1
    ? split
    : { counts: split.counts.map((c) => c * t), starts: split.starts.map((s) => s * t), total: split.total * t };
}

/** Reusable padded buffers, one per purpose, grown on demand. */
export class ExchangeScratch {
  private buffers = new Map<string, Float32Array>();
  get(key: string, length: number): Float32Array {
    let b = this.buffers.get(key);
    if (!b || b.length !== length) {
      b = new Float32Array(length);
      this.buffers.set(key, b);
    }
    return b;
  }
}

/**
 * Backend-owned activation buffers that collectives run on: in shared memory and registered with
 * the transport (collectively, when a purpose first needs more than it has — sizes follow the
 * global batch, so every device allocates the same ones in the same order), so the shared-memory
 * transport reads peers' copies directly instead of copying through its staging area. Grow-only:
 * a smaller batch (a short last one, a shorter sequence batch) gets a view of the larger buffer.
 */
export class CollectiveBuffers {
  private buffers = new Map<string, Float32Array>();
  constructor(
    private readonly backend: Backend,
    private readonly comm: Communicator,
  ) {}
  async get(key: string, length: number): Promise<Float32Array> {
    let b = this.buffers.get(key);
    if (!b || b.length < length) {
      b = this.backend.alloc(Math.max(length, 1), true);
      this.buffers.set(key, b);
      await this.comm.register?.(b);
    }
    return length === b.length ? b : b.subarray(0, length);
  }
}

const isEven = (counts: readonly number[]) => counts.every((c) => c === counts[0]);

/** Sums `a` over the ranks, in place (on a device: read, all-reduced on the host, written back). */
export async function allreduceSum(
  comm: Communicator,
  device: DeviceStorage | undefined,
  a: Float32Array,
): Promise<void> {
  await device?.toHost([a]);
  await comm.allreduce(a, 'sum');
  device?.fromHost([a]);
}

/** out[total × width] = every rank's `local` rows [counts[rank] × width], concatenated in rank order. */
export async function allgatherRows(
  comm: Communicator,
  device: DeviceStorage | undefined,
  local: Float32Array,
  split: RowSplit,
  width: number,
  out: Float32Array,
  scratch: ExchangeScratch,
): Promise<void> {
  const { counts, starts } = split,
    r = comm.rank;
  const mine = local.subarray(0, counts[r]! * width);
  await device?.toHost([mine]);
  const all = out.subarray(0, split.total * width);
  if (isEven(counts)) {
    all.set(mine, starts[r]! * width);
    await comm.allgather(all);
  } else {
    const block = Math.max(...counts) * width;
    const padded = scratch.get('rows', block * comm.size);
    padded.set(mine, r * block);
    await comm.allgather(padded);
    for (let q = 0; q < comm.size; q++)
      all.set(padded.subarray(q * block, q * block + counts[q]! * width), starts[q]! * width);
  }
  device?.fromHost([all]);
}

/**
 * The adjoint of allgatherRows: `full` [total × width] holds this rank's partial sums for every row;
 * `local` [counts[rank] × width] receives the sum over ranks of this rank's rows. `full` is clobbered.
 */
export async function reduceScatterRows(
  comm: Communicator,
  device: DeviceStorage | undefined,
  full: Float32Array,
  split: RowSplit,
  width: number,
  local: Float32Array,
  scratch: ExchangeScratch,
): Promise<void> {
  const { counts, starts } = split,
    r = comm.rank;
  const mine = local.subarray(0, counts[r]! * width);
  const all = full.subarray(0, split.total * width);
  await device?.toHost([all]);
  if (isEven(counts)) {
    const { start } = await comm.reduceScatter(all, 'sum');
    mine.set(all.subarray(start, start + mine.length));
  } else {
    const block = Math.max(...counts) * width;
    const padded = scratch.get('rows', block * comm.size);
    for (let q = 0; q < comm.size; q++) {
      const n = counts[q]! * width;
      padded.set(all.subarray(starts[q]! * width, starts[q]! * width + n), q * block);
      padded.fill(0, q * block + n, (q + 1) * block);
    }
    const { start } = await comm.reduceScatter(padded, 'sum');
    mine.set(padded.subarray(start, start + mine.length));
  }
  device?.fromHost([mine]);
}

/** Units [start, end) each rank holds of a layer with `total` units. */
export interface ColumnSplit {
  ranges: readonly { start: number; end: number }[];
  total: number;
}

/** out[rows × total] = every rank's column block `shard` [rows × (end − start)], side by side. */
export async function allgatherColumns(
  comm: Communicator,
  device: DeviceStorage | undefined,
  shard: Float32Array,
  rows: number,
  split: ColumnSplit,
  out: Float32Array,
  scratch: ExchangeScratch,
): Promise<void> {
  const widths = split.ranges.map((c) => c.end - c.start);
  const block = rows * Math.max(...widths);
  const padded = scratch.get('columns', block * comm.size);
  const mine = shard.subarray(0, rows * widths[comm.rank]!);
  await device?.toHost([mine]);
  padded.set(mine, comm.rank * block);
  await comm.allgather(padded);
  const total = split.total;
  for (let q = 0; q < comm.size; q++) {
    const w = widths[q]!,
      from = split.ranges[q]!.start,
      base = q * block;
    for (let n = 0; n < rows; n++) out.set(padded.subarray(base + n * w, base + (n + 1) * w), n * total + from);
  }
  device?.fromHost([out.subarray(0, rows * total)]);
}

/** shard[rows × (end − start)] = columns [start, end) of full [rows × total]. */
export function takeColumns(
  full: Float32Array,
  rows: number,
  total: number,
  start: number,
  end: number,
  shard: Float32Array,
): void {
  const w = end - start;
  for (let n = 0; n < rows; n++) shard.set(full.subarray(n * total + start, n * total + end), n * w);
}

/**
 * The entry of a model-parallel section whose first stage works on whole samples: every device's
 * rows of `x` (samples of `shape`) gathered, so each device holds the job's whole batch.
 */
export async function gatherSectionInput(
  comm: Communicator,
  device: DeviceStorage | undefined,
  x: Tensor,
  rows: RowSplit,
  shape: readonly number[],
  buffers: CollectiveBuffers,
  scratch: ExchangeScratch,
): Promise<Tensor> {
  const width = shapeSize(shape);
  const all = await buffers.get('input', rows.total * width);
  await allgatherRows(comm, device, x.data, rows, width, all, scratch);
  return new Tensor([rows.total, ...shape], all);
}

/**
 * Every device's per-sample lengths (valid frames of a sequence batch) in rank order: what a
 * section that computes on every device's samples (transformer blocks) masks padding with.
 */
export async function allgatherLengths(
  comm: Communicator,
  lengths: Int32Array,
  rows: RowSplit,
  scratch: ExchangeScratch,
): Promise<Int32Array> {
  const local = Float32Array.from(lengths.subarray(0, rows.counts[comm.rank]!));
  const all = scratch.get('lengths', rows.total);
  await allgatherRows(comm, undefined, local, rows, 1, all, scratch);
  return Int32Array.from(all);
}
