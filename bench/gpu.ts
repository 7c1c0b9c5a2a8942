/**
 * The webgpu kernels on the GPU WebGPU opens (the adapter printed first): sgemm GFLOPS for square
 * sizes and every transpose, each the median of 5 timed batches of back-to-back kernels ended by
 * one 4-byte read (so a figure holds the GPU's work, not a per-kernel host round trip). On a
 * software adapter (SwiftShader) the figures are a smoke test only, and the sizes stop at 128
 * unless `--sizes` names others.
 *
 * Then the training step of mnist-small, resnet-small and deepspeech-small as a one-device run
 * takes it (forward, the loss, backward, the non-finite check and the optimizer on the GPU, one
 * 16-byte read; CTC on the host from the outputs; synthetic data: speech batches of 150 frames and
 * 20 labels an utterance) in samples/s at several batch sizes, the best against the fastest CPU
 * backend's best on one core, wall time over at least two seconds each.
 *
 *   npm run bench -- gpu [--sizes 256,1024,4096] [--batches 64,256,1024] [--models resnet-small] [--adapter NAME]
 */
import { pathToFileURL } from 'node:url';
import { GpuContext } from '../src/kernels/webgpu/gpuContext.ts';
import { gemm } from '../src/kernels/webgpu/gemm.ts';
import { gpuView, type GpuArray } from '../src/kernels/webgpu/gpuArray.ts';
import { median } from './args.ts';
import { webgpuBackend } from '../src/kernels/webgpu/index.ts';
import { getBackend } from '../src/kernels/index.ts';
import type { Backend } from '../src/kernels/backend.ts';
import { Replica } from '../src/runtime/device/replica.ts';
import { loadConfig } from '../src/config/index.ts';
import { VARIABLE } from '../src/tensor/shape.ts';

/** The models whose training step is measured: their examples, and whether the input is a sequence. */
const MODELS = ['mnist-small', 'resnet-small', 'deepspeech-small'] as const;
type ModelName = (typeof MODELS)[number];
/** A speech batch's frames and labels per utterance (about 3 s of audio, a sentence's characters). */
const FRAMES = 150,
  LABELS = 20;

/** Samples/s of `model`'s training step on `backend` at `batch` (synthetic data), over at least `seconds` of wall time. */
async function stepRate(backend: Backend, model: ModelName, batch: number, seconds: number): Promise<number> {
  const config = loadConfig(new URL(`../examples/${model}.yaml`, import.meta.url).pathname);
  const replica = new Replica(backend, config, { alone: true });
  const speech = replica.task === 'transcription';
  const perSample = config.model.input.reduce((n: number, d) => n * (d === VARIABLE ? FRAMES : d), 1);
  const images = new Float32Array(batch * perSample).map((_, i) => ((i * 2654435761) % 1000) / 1000);
  const labels = Int32Array.from({ length: batch * (speech ? LABELS : 1) }, (_, i) => 1 + (i % (replica.classes - 1)));
  const sequence = speech
    ? {
        frames: FRAMES,
        lengths: new Int32Array(batch).fill(FRAMES),
        labelLengths: new Int32Array(batch).fill(LABELS),
      }
    : undefined;
  let k = 0;
  const step = async () => {
    replica.zeroGrads();
    const ctx = {
      training: true,
      seed: 1,
      step: k++,
      sampleOffset: 0,
      ...(sequence ? { lengths: sequence.lengths } : {}),
    };
    await replica.computeGradientsAsync(images, labels, ctx, 1 / batch, undefined, batch, undefined, sequence);
    const view = replica.view();
    if (view.gradientsFinite?.() ?? true) view.localStep(0.001);
  };
  await step();
  const t0 = performance.now();
  let steps = 0;
  while (performance.now() - t0 < seconds * 1000 || steps < 2) {
    await step();
    steps++;
  }
  return (steps * batch) / ((performance.now() - t0) / 1000);
}

/** The best rate over `batches`, with the batch that gave it. */
async function bestRate(
  backend: Backend,
  model: ModelName,
  batches: number[],
  seconds: number,
  each?: (batch: number, rate: number) => void,
): Promise<{ batch: number; rate: number }> {
  let best = { batch: 0, rate: 0 };
  for (const batch of batches) {
    const rate = await stepRate(backend, model, batch, seconds);
    each?.(batch, rate);
    if (rate > best.rate) best = { batch, rate };
  }
  return best;
}

function filled(ctx: GpuContext, n: number, seed: number): GpuArray {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = Math.sin(seed * 7919 + i) * 0.5;
  return ctx.upload(a);
}

/** Seconds per kernel: `reps` recorded back to back, submitted, and one 4-byte read waited for. */
async function timeKernel(ctx: GpuContext, run: () => void, out: GpuArray, reps: number): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < reps; i++) run();
  await ctx.read(gpuView(out, 0, 1));
  return (performance.now() - t0) / 1000 / reps;
}

export async function main(args: string[] = []): Promise<void> {
  const pick = (flag: string) => {
    const i = args.indexOf(flag);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const ctx = await GpuContext.open(pick('--adapter'));
  if (typeof ctx === 'string') {
    console.log(`no GPU: ${ctx}`);
    return;
  }
  try {
    const d = ctx.description;
    console.log(
      `GPU: ${d.name} (${d.vendor}), driver ${d.driver}${d.software ? ' — software adapter: a smoke test, not a figure' : ''}`,
    );
    const sizes = (pick('--sizes') ?? (d.software ? '64,128' : '256,512,1024,2048,4096')).split(',').map(Number);
    console.log('sgemm GFLOPS (median of 5 batches), C = A·B with each transpose');
    console.log(`${'n'.padStart(6)}${['NN', 'NT', 'TN', 'TT'].map((t) => t.padStart(10)).join('')}`);
    for (const n of sizes) {
      const A = filled(ctx, n * n, 1),
        B = filled(ctx, n * n, 2),
        C = ctx.array(n * n);
      const cells: string[] = [];
      for (const [ta, tb] of [
        [false, false],
        [false, true],
        [true, false],
        [true, true],
      ] as const) {
        const run = () => gemm(ctx, ta, tb, n, n, n, 1, A, B, 0, C);
        // enough repetitions for ~0.2 s at a guessed rate, at least 2
        const reps = Math.max(2, Math.min(200, Math.round((d.software ? 2e9 : 2e12) / (2 * n ** 3) / 5)));
        await timeKernel(ctx, run, C, 2);
        const times: number[] = [];
        for (let r = 0; r < 5; r++) times.push(await timeKernel(ctx, run, C, reps));
        cells.push(((2 * n ** 3) / median(times) / 1e9).toFixed(1).padStart(10));
      }
      console.log(`${String(n).padStart(6)}${cells.join('')}`);
    }
    const cpu = await getBackend('auto');
    const seconds = d.software ? 0.5 : 2;
    const gpu = webgpuBackend(ctx);
    const gpuBatches = (pick('--batches') ?? (d.software ? '8' : '64,256,1024')).split(',').map(Number);
    const models = (pick('--models')?.split(',') ?? MODELS) as ModelName[];
    console.log(`training step, samples/s at each backend's best batch (${cpu.name} on one core; target ≥ 30×)`);
    for (const model of models) {
      if (!MODELS.includes(model)) throw new Error(`--models: unknown model '${model}'; expected ${MODELS.join(', ')}`);
      const base = await bestRate(cpu, model, d.software ? [16] : [16, 64], seconds);
      const best = await bestRate(gpu, model, gpuBatches, seconds, (b, rate) =>
        console.log(`  ${model} webgpu at batch ${String(b).padStart(5)}: ${rate.toFixed(1).padStart(9)}`),
      );
      console.log(
        `${model.padEnd(17)} ${cpu.name} ${base.rate.toFixed(1)} (batch ${base.batch}) · webgpu ${best.rate.toFixed(1)} (batch ${best.batch}) · ${(best.rate / base.rate).toFixed(2)}×`,
      );
    }
  } finally {
    ctx.destroy();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await main(process.argv.slice(2));
}
