/**
 * Where an example's training pass goes, layer by layer: the model's top-level layers (a residual
 * block counts as one) run one at a time on a synthetic batch, forward then backward, and each
 * call's wall time is averaged over the passes after a warm-up.
 *
 *   npm run bench -- layers [--model resnet-small] [--backend onednn] [--batch 64] [--frames 200] [--passes 20] [--unfused]
 *
 * The layers run as `Sequential` runs them: a conv2d → max pool pair that the backend fuses (onednn
 * with AVX-512) as one step, one row; `--unfused` runs every layer on its own. The loss and the
 * optimizer step are left out: `bench train` times the whole step. Sequence models get `--frames`
 * frames per sample, all valid. The first layer computes no input gradient, as in training.
 */
import { loadConfig } from '../src/config/index.ts';
import { buildModel } from '../src/nn/model.ts';
import { passSteps, type PassStep } from '../src/nn/convPool.ts';
import { getBackend } from '../src/kernels/index.ts';
import { Tensor } from '../src/tensor/tensor.ts';
import type { ForwardContext } from '../src/nn/layer.ts';
import { flag } from './args.ts';
import { peakLine } from './peak.ts';

export async function main(args: string[]): Promise<void> {
  const model = flag(args, 'model') ?? 'resnet-small',
    backendName = flag(args, 'backend') ?? 'auto';
  const N = Number(flag(args, 'batch') ?? 64),
    frames = Number(flag(args, 'frames') ?? 200),
    passes = Number(flag(args, 'passes') ?? 20);
  const config = loadConfig(new URL(`../examples/${model}.yaml`, import.meta.url).pathname);
  const backend = await getBackend(backendName);
  const net = buildModel(backend, config.model);
  net.initialize(1);
  // a sequence model's unknown frame count (null or negative in the spec) becomes --frames
  const shape = (config.model.input as (number | null)[]).map((v) => (v === null || v < 0 ? frames : v));
  const size = N * shape.reduce((a, v) => a * v, 1);
  // filled in place: the batch stays in the backend's memory (map would make a plain array)
  const data = backend.alloc(size);
  for (let i = 0, seed = 1; i < size; i++) data[i] = ((seed = (seed * 16807) % 2147483647) / 2147483647) * 2 - 1;
  const x = new Tensor([N, ...shape], data);
  const ctx: ForwardContext = { training: true, seed: 1, step: 0, sampleOffset: 0 };
  const layers = net.layers,
    unfused = args.includes('--unfused');
  const steps: PassStep[] = unfused
    ? layers.map((layer, i) => ({
        first: i,
        last: i,
        forward: (h, c) => layer.forward(h, c),
        backward: (g, need) => layer.backward(g, need),
      }))
    : passSteps(backend, layers);
  const forward = steps.map(() => 0),
    backward = steps.map(() => 0);
  const warmup = 5;
  for (let pass = 0; pass < warmup + passes; pass++) {
    ctx.step = pass;
    let h = x;
    for (const [k, step] of steps.entries()) {
      const t0 = performance.now();
      h = step.forward(h, ctx);
      if (pass >= warmup) forward[k]! += performance.now() - t0;
    }
    let g: Tensor | null = new Tensor(h.shape, backend.alloc(h.size).fill(0.01));
    for (let k = steps.length - 1; k >= 0 && g; k--) {
      const t0 = performance.now();
      g = steps[k]!.backward(g, steps[k]!.first > 0);
      if (pass >= warmup) backward[k]! += performance.now() - t0;
    }
  }
  console.log(peakLine());
  console.log(
    `${model} on ${backend.name}, batch ${N}${shape.length === 2 ? `, ${frames} frames` : ''}: ms per pass, mean of ${passes} after ${warmup}, ` +
      (unfused ? 'layers one by one' : 'layers as the model runs them (a fused pair as one row)'),
  );
  const names = steps.map((s) =>
    Array.from({ length: s.last - s.first + 1 }, (_, j) => layers[s.first + j]!.name).join(' + '),
  );
  const width = Math.max(...names.map((n) => n.length));
  console.log(`${'layer'.padEnd(width)}  forward  backward`);
  for (const [k, name] of names.entries()) {
    console.log(
      `${name.padEnd(width)}  ${(forward[k]! / passes).toFixed(3).padStart(7)}  ${(backward[k]! / passes).toFixed(3).padStart(8)}`,
    );
  }
  const sum = (a: number[]) => a.reduce((s, v) => s + v, 0) / passes;
  console.log(
    `${'total'.padEnd(width)}  ${sum(forward).toFixed(3).padStart(7)}  ${sum(backward).toFixed(3).padStart(8)}`,
  );
}
