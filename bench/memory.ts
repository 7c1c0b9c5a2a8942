/**
 * ZeRO sharding's memory per device: the bytes each replica actually holds — its weights, its
 * gradient buffer, its optimizer state (the Float32Arrays allocated, counted from the replica and
 * its optimizer, not computed) and its peak activation bytes over one training step — for hybrid
 * unsharded and with train.strategy.hybrid.shard 1, 2 and 3, on 1, 2, 4 and 8 in-process devices,
 * on mnist-small, on the transformer of shakespeare-char (Adam: m and v) and on a deep MLP of 16
 * equal layers (synthetic inputs: only the bytes count). Beside them the
 * formulas for fp32 weights and gradients with Adam (Ψ parameters, N devices): unsharded 16Ψ,
 * stage 1 4Ψ + 4Ψ + 8Ψ/N, stage 2 4Ψ + 12Ψ/N + 4L, stage 3 16Ψ/N + 8L (L: the largest unit held
 * at once). Stages 2 and 3 run with bucketBytes 4 (every layer its own unit), measured after the
 * step (the whole gradient, and at stage 3 the whole weights, are gone): stage 2's gradient is the
 * device's part and one layer's workspace, its weights whole; stage 3's weights and gradients are
 * the device's parts and one layer's workspace each. shakespeare-char's tied output projection
 * keeps the embedding's unit (its gradient; at stage 3 its weights too) in a second workspace.
 * Where a dense layer is larger, `3 rows` runs stage 3 with rowBlockBytes 64 KiB: such a layer is
 * gathered a block of its kernel's rows at a time, and L is the largest block or other layer.
 *   npm run bench -- memory [--devices 1,2,4,8]
 */
import { ownedSlice, type Communicator } from '../src/comm/communicator.ts';
import { loadConfig, parseConfig } from '../src/config/index.ts';
import type { RunConfig } from '../src/config/runConfig.ts';
import { jsBackend } from '../src/kernels/js/index.ts';
import { ShardedOptimizer } from '../src/parallel/sharding/shardedOptimizer.ts';
import { createStrategy } from '../src/parallel/strategies/index.ts';
import { Replica } from '../src/runtime/device/replica.ts';
import type { GradientShards } from '../src/parallel/sharding/gradientShards.ts';
import type { WeightShards } from '../src/parallel/sharding/weightShards.ts';
import { planRowBlocks } from '../src/parallel/sharding/rowBlocks.ts';

function option(args: string[], name: string, fallback: string): string {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] ? args[i + 1]! : fallback;
}

/**
 * N communicators in one thread: a rank's n-th collective meets the other ranks' n-th, and
 * resolves once all have called it; sums in rank order.
 */
function inProcessGroup(size: number): Communicator[] {
  const slots = new Map<number, { bufs: Float32Array[]; done: (() => void)[] }>();
  const calls = new Array<number>(size).fill(0);
  const meet = (rank: number, buf: Float32Array, complete: (bufs: Float32Array[]) => void) =>
    new Promise<void>((resolve) => {
      const n = calls[rank]!++;
      const slot = slots.get(n) ?? { bufs: [], done: [] };
      slots.set(n, slot);
      slot.bufs[rank] = buf;
      slot.done.push(resolve);
      if (slot.done.length < size) return;
      slots.delete(n);
      complete(slot.bufs);
      for (const d of slot.done) d();
    });
  const reduce = (bufs: Float32Array[], mean: boolean) => {
    const out = new Float32Array(bufs[0]!.length);
    for (const b of bufs) for (let i = 0; i < out.length; i++) out[i] = out[i]! + b[i]!;
    if (mean) for (let i = 0; i < out.length; i++) out[i] = out[i]! / size;
    for (const b of bufs) b.set(out);
  };
  const unsupported = () => Promise.reject(new Error('point-to-point messages are not part of this benchmark'));
  return Array.from({ length: size }, (_, rank) => ({
    rank,
    size,
    allreduce: (buf, op) => meet(rank, buf, (bufs) => reduce(bufs, op === 'mean')),
    reduceScatter: async (buf, op) => {
      await meet(rank, buf, (bufs) => reduce(bufs, op === 'mean'));
      return ownedSlice(buf.length, size, rank);
    },
    allgather: (buf) =>
      meet(rank, buf, (bufs) => {
        for (let r = 0; r < size; r++) {
          const { start, end } = ownedSlice(buf.length, size, r);
          for (const b of bufs) b.set(bufs[r]!.subarray(start, end), start);
        }
      }),
    broadcast: (buf, root) =>
      meet(rank, buf, (bufs) => {
        for (const b of bufs) b.set(bufs[root]!);
      }),
    barrier: () => meet(rank, new Float32Array(0), () => {}),
    send: unsupported,
    recv: unsupported,
    takeStats: () => ({ commMs: 0, idleMs: 0, bytes: 0 }),
  }));
}

interface Bytes {
  weights: number;
  grads: number;
  optimizer: number;
  activations: number;
}

/** One step of `config` with hybrid at `shard` on `devices` in-process devices; the largest device's bytes. */
async function measure(config: RunConfig, devices: number, shard: number, rowBlockBytes?: number): Promise<Bytes> {
  const c: RunConfig = {
    ...config,
    train: {
      ...config.train,
      devices,
      // stages 2 and 3 hold a unit's (bucket's) workspace: one per layer
      strategy: {
        type: 'hybrid',
        bucketBytes: shard >= 2 ? 4 : 4 << 20,
        ...(shard > 0 ? { shard: shard as 1 } : {}),
        ...(rowBlockBytes ? { rowBlockBytes } : {}),
      },
    },
  };
  const comms = inProcessGroup(devices);
  const replicas = comms.map(() => new Replica(jsBackend, c));
  const views = replicas.map((r) => r.view());
  // stage 2's gradient lives in its GradientShards, stage 3's weights and gradient in its WeightShards: kept to count them
  const shards: (WeightShards | null)[] = views.map(() => null);
  const gradients: (GradientShards | null)[] = views.map(() => null);
  views.forEach((v, r) => {
    const { shardWeights, shardGradients } = v;
    if (shardWeights)
      v.shardWeights = (layout, comm, rowBlockFloats) => {
        shards[r] = shardWeights(layout, comm, rowBlockFloats);
        gradients[r] = shards[r].gradients;
        return shards[r];
      };
    if (shardGradients) v.shardGradients = (layout, comm) => (gradients[r] = shardGradients(layout, comm));
  });
  const strategies = comms.map((comm) => createStrategy(c.train.strategy, { comm, ps: null }));
  await Promise.all(strategies.map((s, r) => s.onStart?.(views[r]!)));
  const global = c.data.batchSizeScope === 'global' ? c.data.batchSize : c.data.batchSize * devices;
  const inputShape = c.model.input;
  const per = inputShape.reduce((a, b) => a * b, 1);
  const language = replicas[0]!.task === 'language';
  const vocab = replicas[0]!.classes;
  const outputs = language ? replicas[0]!.model.outputShape[0]! : 1;
  await Promise.all(
    replicas.map(async (replica, r) => {
      const { start, end } = ownedSlice(global, devices, r);
      const n = end - start;
      // token ids for a language model, pixels in [0, 1) otherwise: the values do not change the bytes
      const images = Float32Array.from({ length: n * per }, (_, i) => (language ? (i * 7) % vocab : (i % 97) / 97));
      const labels = Int32Array.from({ length: n * outputs }, (_, i) => (i * 3) % vocab);
      const ctx = { training: true, seed: 1, step: 0, sampleOffset: start, rank: r };
      await strategies[r]!.beforeStep?.(views[r]!, { step: 0, epoch: 0, lr: 1e-3, samples: n });
      replica.zeroGrads();
      const onReady = (offset: number) => strategies[r]!.onGradientsReady?.(views[r]!, offset);
      const result = await replica.computeGradientsAsync(images, labels, ctx, devices / global, onReady, global);
      const info = { step: 0, epoch: 0, lr: 1e-3, samples: n, lossNonFinite: !Number.isFinite(result.lossSum) };
      await strategies[r]!.applyUpdate!(views[r]!, info);
    }),
  );
  const bytes = replicas.map((replica, r): Bytes => {
    const opt = replica.optimizer;
    const stateFloats =
      opt instanceof ShardedOptimizer ? opt.stateFloats : opt.state().buffers.reduce((s, b) => s + b.data.length, 0);
    const held = shards[r],
      grads = gradients[r];
    return {
      // stage 3: its part and the workspaces (one of each size)
      weights: replica.model.params.byteLength + (held ? 4 * (held.ownedParams.length + held.gatheredFloats) : 0),
      // stages 2 and 3: its part and the workspaces
      grads: replica.model.grads.byteLength + (grads ? 4 * grads.heldFloats : 0),
      optimizer: stateFloats * 4,
      activations: replica.takePeakActivationBytes(),
    };
  });
  // devices own slices that differ by at most one float per piece: the largest is what a device must hold
  const max = (k: keyof Bytes) => Math.max(...bytes.map((b) => b[k]));
  return { weights: max('weights'), grads: max('grads'), optimizer: max('optimizer'), activations: max('activations') };
}

/** 16 dense layers of 256 on 256 synthetic features: Ψ ≈ 1.05 M, each layer 1/16 of it. */
const DEEP_MLP = {
  input: [256],
  layers: [
    ...Array.from({ length: 15 }, () => ({ dense: { units: 256, activation: 'relu' } })),
    { dense: { units: 256 } },
  ],
};

/** Weights + gradients + Adam state by the formulas, in bytes (Ψ parameters, N devices, L floats gathered at once). */
function formula(stage: number, psi: number, n: number, largest: number): number {
  if (stage === 0) return 16 * psi;
  if (stage === 1) return 4 * psi + 4 * psi + (8 * psi) / n;
  if (stage === 2) return 4 * psi + (12 * psi) / n + 4 * largest;
  return (16 * psi) / n + 8 * largest;
}

/**
 * Stages 2 and 3's L with bucketBytes 4 (every layer its own unit): the largest layer, and the
 * layer a tied projection reads (the embedding), held beside it in its own workspace; with
 * `rowBlockFloats` (stage 3's rowBlockBytes), a dense layer above it counts as its largest block.
 */
function largestLayer(replica: Replica, rowBlockFloats = 0): number {
  const { model } = replica;
  const blocks = new Map(planRowBlocks(model, rowBlockFloats).map((p) => [p.layer, p]));
  const size = (i: number) => {
    const split = blocks.get(i);
    if (split) return Math.max(...split.blocks.map((b) => b.piece.end - b.piece.start));
    const r = model.layerParamRange(i);
    return r ? r.end - r.start : 0;
  };
  const shared = new Set(model.layers.flatMap((_, i) => model.sharedWeightsOf(i) ?? []));
  const rest = model.layers.map((_, i) => (shared.has(i) ? 0 : size(i)));
  return Math.max(0, ...rest) + [...shared].reduce((n, i) => n + size(i), 0);
}

/** Stage 3's dense layers gathered in row blocks of at most this many bytes (the `3 rows` lines). */
const ROW_BLOCK_BYTES = 64 * 1024;

const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(3);

export async function main(args: string[]): Promise<void> {
  const deviceCounts = option(args, 'devices', '1,2,4,8').split(',').map(Number);
  const root = new URL('../examples/', import.meta.url).pathname;
  const workloads: [string, RunConfig][] = [
    ['mnist-small', loadConfig(`${root}mnist-small.yaml`)],
    ['shakespeare-char', loadConfig(`${root}shakespeare-char.yaml`)],
    // many layers of one size, where one layer is Ψ/16: what stage 3's 8L costs when layers are small
    [
      'deep-mlp',
      parseConfig({ model: DEEP_MLP, optimizer: { adam: { lr: 0.001 } }, data: { batchSize: 64 } }, 'deep-mlp'),
    ],
  ];
  for (const [name, config] of workloads) {
    const replica = new Replica(jsBackend, config);
    const psi = replica.model.params.length;
    const largest = largestLayer(replica);
    console.log(
      `\n${name}: Ψ = ${psi.toLocaleString('en')} parameters, ${config.optimizer.type}; MiB per device (largest); ` +
        `held at once (stages 2, 3) L = ${largest.toLocaleString('en')} floats (${((100 * largest) / psi).toFixed(1)}% of Ψ)`,
    );
    console.log(
      `${'stage'.padEnd(8)}${'N'.padStart(3)}${'weights'.padStart(10)}${'grads'.padStart(10)}${'optim'.padStart(10)}` +
        `${'w+g+o'.padStart(10)}${'formula'.padStart(10)}${'activ.'.padStart(10)}`,
    );
    const unsharded = new Map<number, number>();
    const blocked = largestLayer(replica, ROW_BLOCK_BYTES / 4);
    // stage 3 with rowBlockBytes where it gathers less than a layer at a time
    const stages: [number, number | undefined][] = [
      [0, undefined],
      [1, undefined],
      [2, undefined],
      [3, undefined],
    ];
    if (blocked < largest) stages.push([3, ROW_BLOCK_BYTES]);
    for (const [shard, rowBlockBytes] of stages) {
      for (const n of deviceCounts) {
        // one device runs no strategy: its replica keeps the whole buffers at any stage
        if (shard >= 2 && n === 1) continue;
        const b = await measure(config, n, shard, rowBlockBytes);
        const total = b.weights + b.grads + b.optimizer;
        if (shard === 0) unsharded.set(n, total);
        const label = shard === 0 ? 'none' : rowBlockBytes ? '3 rows' : String(shard);
        console.log(
          `${label.padEnd(8)}${String(n).padStart(3)}${mib(b.weights).padStart(10)}${mib(b.grads).padStart(10)}` +
            `${mib(b.optimizer).padStart(10)}${mib(total).padStart(10)}` +
            `${mib(formula(shard, psi, n, rowBlockBytes ? blocked : largest)).padStart(10)}${mib(b.activations).padStart(10)}` +
            (shard >= 2 ? `  ${((100 * total) / unsharded.get(n)!).toFixed(1)}% of unsharded` : ''),
        );
      }
    }
    if (blocked < largest)
      console.log(
        `3 rows: stage 3 with rowBlockBytes ${ROW_BLOCK_BYTES} (dense layers gathered ${ROW_BLOCK_BYTES / 1024} KiB of kernel rows at a time): ` +
          `L = ${blocked.toLocaleString('en')} floats (${((100 * blocked) / psi).toFixed(1)}% of Ψ)`,
      );
    const n = Math.max(...deviceCounts);
    const sharded = (16 * psi) / n;
    console.log(
      `stage 3 on ${n}: 16Ψ/N = ${mib(sharded)} MiB (${((100 * sharded) / (16 * psi)).toFixed(1)}% of 16Ψ) held throughout, ` +
        `+ 8L = ${mib(8 * largest)} MiB for the layers gathered at the moment`,
    );
  }
}
