/**
 * ZeRO sharding's memory per device: the bytes each replica actually holds — its weights, its
 * gradient buffer, its optimizer state (the Float32Arrays allocated, counted from the replica and
 * its optimizer, not computed) and its peak activation bytes over one training step — for hybrid
 * unsharded and with train.strategy.hybrid.shard 1 and 2, on 1, 2, 4 and 8 in-process devices, on
 * mnist-small and on the transformer of shakespeare-char (Adam: m and v). Beside them the formulas
 * for fp32 weights and gradients with Adam (Ψ parameters, N devices): unsharded 16Ψ, stage 1
 * 4Ψ + 4Ψ + 8Ψ/N, stage 2 4Ψ + 12Ψ/N, stage 3 16Ψ/N. Stage 2 here keeps the whole flat gradient
 * buffer backward accumulates into, so its measured bytes are stage 1's: it saves communication
 * (a reduce-scatter moves half of an all-reduce's bytes), not memory.
 *   npm run bench -- memory [--devices 1,2,4,8]
 */
import { ownedSlice, type Communicator } from '../src/comm/communicator.ts';
import { loadConfig } from '../src/config/index.ts';
import type { RunConfig } from '../src/config/runConfig.ts';
import { jsBackend } from '../src/kernels/js/index.ts';
import { ShardedOptimizer } from '../src/parallel/sharding/shardedOptimizer.ts';
import { createStrategy } from '../src/parallel/strategies/index.ts';
import { Replica } from '../src/runtime/device/replica.ts';

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
async function measure(config: RunConfig, devices: number, shard: number): Promise<Bytes> {
  const c: RunConfig = {
    ...config,
    train: {
      ...config.train,
      devices,
      strategy: { type: 'hybrid', bucketBytes: 4 << 20, ...(shard > 0 ? { shard: shard as 1 | 2 } : {}) },
    },
  };
  const comms = inProcessGroup(devices);
  const replicas = comms.map(() => new Replica(jsBackend, c));
  const views = replicas.map((r) => r.view());
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
      replica.zeroGrads();
      const ctx = { training: true, seed: 1, step: 0, sampleOffset: start, rank: r };
      const onReady = (offset: number) => strategies[r]!.onGradientsReady?.(views[r]!, offset);
      const result = await replica.computeGradientsAsync(images, labels, ctx, devices / global, onReady, global);
      const info = { step: 0, epoch: 0, lr: 1e-3, samples: n, lossNonFinite: !Number.isFinite(result.lossSum) };
      await strategies[r]!.applyUpdate!(views[r]!, info);
    }),
  );
  const bytes = replicas.map((replica): Bytes => {
    const opt = replica.optimizer;
    const stateFloats =
      opt instanceof ShardedOptimizer ? opt.stateFloats : opt.state().buffers.reduce((s, b) => s + b.data.length, 0);
    return {
      weights: replica.model.params.byteLength,
      grads: replica.model.grads.byteLength,
      optimizer: stateFloats * 4,
      activations: replica.takePeakActivationBytes(),
    };
  });
  // devices own slices that differ by at most one float per piece: the largest is what a device must hold
  const max = (k: keyof Bytes) => Math.max(...bytes.map((b) => b[k]));
  return { weights: max('weights'), grads: max('grads'), optimizer: max('optimizer'), activations: max('activations') };
}

/** Weights + gradients + Adam state by the formulas, in bytes (Ψ parameters, N devices). */
function formula(stage: number, psi: number, n: number): number {
  if (stage === 0) return 16 * psi;
  if (stage === 1) return 4 * psi + 4 * psi + (8 * psi) / n;
  if (stage === 2) return 4 * psi + (12 * psi) / n;
  return (16 * psi) / n;
}

const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(3);

export async function main(args: string[]): Promise<void> {
  const deviceCounts = option(args, 'devices', '1,2,4,8').split(',').map(Number);
  const root = new URL('../examples/', import.meta.url).pathname;
  const workloads: [string, RunConfig][] = [
    ['mnist-small', loadConfig(`${root}mnist-small.yaml`)],
    ['shakespeare-char', loadConfig(`${root}shakespeare-char.yaml`)],
  ];
  for (const [name, config] of workloads) {
    const psi = new Replica(jsBackend, config).model.params.length;
    console.log(
      `\n${name}: Ψ = ${psi.toLocaleString('en')} parameters, ${config.optimizer.type}; MiB per device (largest)`,
    );
    console.log(
      `${'stage'.padEnd(8)}${'N'.padStart(3)}${'weights'.padStart(10)}${'grads'.padStart(10)}${'optim'.padStart(10)}` +
        `${'w+g+o'.padStart(10)}${'formula'.padStart(10)}${'activ.'.padStart(10)}`,
    );
    for (const shard of [0, 1, 2]) {
      for (const n of deviceCounts) {
        const b = await measure(config, n, shard);
        const label = shard === 0 ? 'none' : String(shard);
        console.log(
          `${label.padEnd(8)}${String(n).padStart(3)}${mib(b.weights).padStart(10)}${mib(b.grads).padStart(10)}` +
            `${mib(b.optimizer).padStart(10)}${mib(b.weights + b.grads + b.optimizer).padStart(10)}` +
            `${mib(formula(shard, psi, n)).padStart(10)}${mib(b.activations).padStart(10)}`,
        );
      }
    }
    const s3 = deviceCounts.map((n) => `N=${n} ${mib(formula(3, psi, n))}`).join(', ');
    console.log(`stage 3 (weights sharded too; not implemented), formula only: ${s3}`);
  }
}
