/**
 * `npm run bench -- NAME [options]`: performance figures live here, never in timed unit tests.
 * Run one benchmark at a time on a quiet machine; each prints its figures as ratios within one run.
 */
const benches: Record<string, { what: string; load: () => Promise<{ main(args: string[]): Promise<void> }> }> = {
  kernels: { what: 'GFLOPS per kernel and shape, per backend', load: () => import('./kernels.ts') },
  gpu: {
    what: 'the webgpu kernels on the GPU WebGPU opens: sgemm GFLOPS per size and transpose (--sizes, --adapter)',
    load: () => import('./gpu.ts'),
  },
  train: {
    what: 'samples/s of the mnist-small training step per backend and batch size (--model resnet-small: another example)',
    load: () => import('./train.ts'),
  },
  allreduce: {
    what: "shared-memory allreduce bandwidth (arena, training's own grads, copy-through) against Open MPI in the same run, 2 ranks, 1–16 MB",
    load: () => import('./allreduce.ts'),
  },
  'allreduce-tcp': {
    what: 'TCP allreduce bandwidth, 2 and 4 processes, 1–64 MB (and Gloo when python3-torch is installed)',
    load: () => import('./allreduceTcp.ts'),
  },
  'allreduce-mpi': {
    what: 'MPI_Allreduce vs the MPI transport (MPI_Iallreduce) and the TCP ring in one mpirun job, 2 processes, 1–64 MB (needs Open MPI and npm run build:mpi)',
    load: () => import('./allreduceMpi.ts'),
  },
  throughput: {
    what: 'data-parallel samples/s with 1 and 2 devices (and PyTorch DDP when installed)',
    load: () => import('./throughput.ts'),
  },
  strategies: { what: 'convergence of every strategy on Fashion-MNIST (long)', load: () => import('./strategies.ts') },
  compression: {
    what: "bytes per step of hybrid's gradients, plain, oneBit and powerSGD rank 4, on alexnet-small and deepspeech-small, 2 and 4 devices",
    load: () => import('./compression.ts'),
  },
  'model-parallel': {
    what: 'alexnet-small: bytes/step and samples/s, data parallel vs "one weird trick" (FC, and FC + a channel-split conv), 2 and 4 devices',
    load: () => import('./modelParallel.ts'),
  },
  lstm: {
    what: 'LSTM forward+backward at DeepSpeech shapes (N 32, T 100, F 494, H 512) per backend, vs its sgemm and PyTorch nn.LSTM (one thread) (--gru: the GRU)',
    load: () => import('./lstm.ts'),
  },
  attention: {
    what: 'attention forward+backward GFLOPS per backend, the layer and its four kernels alone, at T 256 D 384 6 heads and T 64 D 128 4 heads, then where a pass goes (--pieces)',
    load: () => import('./attention.ts'),
  },
  layers: {
    what: "ms per layer, forward and backward, of an example's model on one backend (--model resnet-small, --backend, --batch, --frames)",
    load: () => import('./layers.ts'),
  },
  microbatch: {
    what: 'peak activation bytes and samples/s with train.microBatches = 1, 2, 4, 8 and spatialSplit tiles 2, 4',
    load: () => import('./microbatch.ts'),
  },
  memory: {
    what: 'ZeRO sharding: bytes per device of weights, gradients, optimizer state and activations, hybrid shard 0/1/2 on 1–8 devices, beside the formulas',
    load: () => import('./memory.ts'),
  },
  pipeline: {
    what: 'pipeline stages as threads: measured bubble vs (p−1)/(m+p−1) and peak activation bytes, gpipe and 1f1b, p = 2, 4, m = 1–16',
    load: () => import('./pipeline.ts'),
  },
  'speech-features': {
    what: 'utterances/s of the speech front end (8 kHz WAV → resample → MFCC): paratrain and torchaudio on one thread, paratrain on every core',
    load: () => import('./speechFeatures.ts'),
  },
};

const [name, ...args] = process.argv.slice(2);
const bench = name ? benches[name] : undefined;
if (!bench) {
  console.error(
    `usage: npm run bench -- NAME [options]\n${Object.entries(benches)
      .map(([n, b]) => `  ${n.padEnd(14)} ${b.what}`)
      .join('\n')}`,
  );
  process.exit(name ? 1 : 0);
}
await (await bench.load()).main(args);
