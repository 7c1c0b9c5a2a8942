/**
 * Micro-batching trades time for memory: peak activation bytes (what the model keeps for backward,
 * counted by the model, not RSS) and samples/s of the training step (forward, backward, Adam) on one
 * thread with train.microBatches = 1, 2, 4, 8, on mnist-small and on a conv-heavier network of four
 * 'same' 3×3 convolutions; then the conv-heavy network with its convolutions and pools inside a
 * serial `spatialSplit` of t × 1 tiles (k = 1), the other way to trade time for activation memory.
 * Synthetic data (the data path is not what is measured).
 *   npm run bench -- microbatch [--batch 64] [--k 1,2,4,8] [--tiles 2,4] [--seconds 3] [--backend wasm]
 */
import { getBackend } from '../src/kernels/index.ts';
import { Replica } from '../src/runtime/device/replica.ts';
import { loadConfig, parseConfig } from '../src/config/index.ts';
import type { RunConfig } from '../src/config/runConfig.ts';

function option(args: string[], name: string, fallback: string): string {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] ? args[i + 1]! : fallback;
}

const CONV_STACK = [
  { conv2d: { filters: 32, kernelSize: 3, padding: 'same', activation: 'relu' } },
  { conv2d: { filters: 32, kernelSize: 3, padding: 'same', activation: 'relu' } },
  { maxPool2d: { poolSize: 2 } },
  { conv2d: { filters: 64, kernelSize: 3, padding: 'same', activation: 'relu' } },
  { conv2d: { filters: 64, kernelSize: 3, padding: 'same', activation: 'relu' } },
  { maxPool2d: { poolSize: 2 } },
];
const CONV_HEAD = [
  { flatten: {} },
  { dense: { units: 128, activation: 'relu' } },
  { dropout: { rate: 0.25 } },
  { dense: { units: 10 } },
];

/** The conv-heavy network; with `tiles`, its convolutions and pools inside a spatialSplit of tiles × 1. */
const convHeavy = (tiles?: number) =>
  parseConfig(
    {
      model: {
        input: [28, 28, 1],
        layers: tiles
          ? [{ spatialSplit: { tiles: [tiles, 1], layers: CONV_STACK } }, ...CONV_HEAD]
          : [...CONV_STACK, ...CONV_HEAD],
      },
    },
    'conv-heavy',
  );

/** Peak activation bytes and samples/s of `config` with k micro-batches, measured for about `seconds`. */
async function measure(config: RunConfig, backendName: string, batch: number, k: number, seconds: number) {
  const c: RunConfig = { ...config, train: { ...config.train, microBatches: k } };
  const replica = new Replica(await getBackend(backendName), c);
  const per = 28 * 28;
  const images = new Float32Array(batch * per).map((_, i) => ((i * 2654435761) % 1000) / 1000);
  const labels = Int32Array.from({ length: batch }, (_, i) => i % 10);
  const step = async (s: number) => {
    replica.model.zeroGrads();
    await replica.computeGradientsAsync(
      images,
      labels,
      { training: true, seed: 1, step: s, sampleOffset: 0 },
      1 / batch,
    );
    replica.optimizer.step(replica.model.params, replica.model.grads, 0.001);
  };
  // a second of warm-up: the first rows must not pay for JIT compilation and heap growth
  const w0 = performance.now();
  for (let s = 0; performance.now() - w0 < 1000; s++) await step(s);
  replica.model.takePeakActivationBytes();
  const t0 = performance.now();
  let n = 0;
  while (performance.now() - t0 < seconds * 1000) await step(n++);
  const samplesPerSecond = (n * batch) / ((performance.now() - t0) / 1000);
  return { peak: replica.model.takePeakActivationBytes(), samplesPerSecond };
}

const mb = (bytes: number) => `${(bytes / 2 ** 20).toFixed(2)} MiB`;

export async function main(args: string[]): Promise<void> {
  const batch = Number(option(args, 'batch', '64'));
  const ks = option(args, 'k', '1,2,4,8').split(',').map(Number);
  const tiles = option(args, 'tiles', '2,4').split(',').map(Number);
  const seconds = Number(option(args, 'seconds', '3'));
  const backend = option(args, 'backend', 'wasm');
  const nets: [string, RunConfig][] = [
    ['mnist-small', loadConfig(new URL('../examples/mnist-small.yaml', import.meta.url).pathname)],
    ['conv-heavy (4 same convs)', convHeavy()],
  ];
  console.log(`micro-batching, per-device batch ${batch}, ${backend} backend, one thread, ${seconds} s per row\n`);
  console.log('| network | microBatches | peak activation bytes | vs k=1 | samples/s | vs k=1 |');
  console.log('| --- | --- | --- | --- | --- | --- |');
  for (const [name, config] of nets) {
    let base: { peak: number; samplesPerSecond: number } | null = null;
    for (const k of ks) {
      const r = await measure(config, backend, batch, k, seconds);
      base ??= r;
      console.log(
        `| ${name} | ${k} | ${mb(r.peak)} | ${(r.peak / base.peak).toFixed(3)}× | ${r.samplesPerSecond.toFixed(0)} | ${(r.samplesPerSecond / base.samplesPerSecond).toFixed(2)}× |`,
      );
    }
  }
  // the spatial split, against the unsplit conv-heavy network at k = 1 (measured again in this run)
  const base = await measure(convHeavy(), backend, batch, 1, seconds);
  console.log(
    `| conv-heavy, unsplit (measured again) | 1 | ${mb(base.peak)} | 1.000× | ${base.samplesPerSecond.toFixed(0)} | 1.00× |`,
  );
  for (const t of tiles) {
    const r = await measure(convHeavy(t), backend, batch, 1, seconds);
    console.log(
      `| conv-heavy, spatialSplit tiles [${t}, 1] | 1 | ${mb(r.peak)} | ${(r.peak / base.peak).toFixed(3)}× | ${r.samplesPerSecond.toFixed(0)} | ${(r.samplesPerSecond / base.samplesPerSecond).toFixed(2)}× |`,
    );
  }
}
