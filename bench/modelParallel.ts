/**
 * "One weird trick" against pure data parallelism on alexnet-small (FC layers ≈ 97% of the weights):
 * the same network, per-device batch 64, hybrid strategy, on 2 and 4 devices (worker threads), once
 * with every layer data-parallel (all gradients all-reduced every step) and once as the example is
 * written (FC layers model-parallel: activations exchanged, FC weights never leave their device),
 * and once with the last convolution channel-split in the same section (`conv2d … parallel: model`:
 * its input images and output channels exchanged, its kernel never all-reduced), and once with that
 * convolution in a spatialSplit whose G×1 tiles run on the G devices (`spatialSplit … parallel: model`:
 * input images and output tiles exchanged, its kernel still all-reduced: the split divides work).
 * Prints, per run: bytes a device communicated per step (median; as the transport counts them) and
 * steady-state samples/s after warm-up, plus one device as the baseline.
 *   npm run bench -- model-parallel [--steps 40] [--devices 2,4] [--batch 64]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../src/config/index.ts';
import { train } from '../src/runtime/run/train.ts';
import type { RunConfig } from '../src/config/runConfig.ts';

function option(args: string[], name: string, fallback: string): string {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] ? args[i + 1]! : fallback;
}

const WARMUP_STEPS = 5;
const SUBSET = new URL('../data/fashion-mnist-subset/', import.meta.url).pathname;

type Mode = 'one device' | 'data parallel' | 'trick' | 'trick + conv' | 'trick + spatial';
const MODES = ['data parallel', 'trick', 'trick + conv', 'trick + spatial'] as const;

function configFor(mode: Mode, devices: number, batch: number, steps: number): RunConfig {
  const base = loadConfig(new URL('../examples/alexnet-small.yaml', import.meta.url).pathname);
  const trick = mode !== 'one device' && mode !== 'data parallel';
  const lastConv = base.model.layers.map((l) => l.type).lastIndexOf('conv2d');
  const layers = base.model.layers.map((l, i) => {
    if (l.type === 'dense' && !trick) return { ...l, parallel: 'data' as const };
    if (l.type === 'conv2d' && i === lastConv && mode === 'trick + conv') return { ...l, parallel: 'model' as const };
    if (l.type === 'conv2d' && i === lastConv && mode === 'trick + spatial') {
      return {
        type: 'spatialSplit' as const,
        tiles: [devices, 1] as [number, number],
        parallel: 'model' as const,
        layers: [l],
      };
    }
    return l;
  });
  return {
    ...base,
    model: { ...base.model, layers },
    data: {
      ...base.data,
      dir: SUBSET,
      batchSize: batch,
      batchSizeScope: 'perDevice',
      trainLimit: (steps + WARMUP_STEPS) * batch * devices,
      testLimit: 100,
    },
    train: {
      ...base.train,
      devices,
      epochs: 1,
      evalEvery: 0,
      strategy: { type: 'hybrid', bucketBytes: 4 * 1024 * 1024 },
    },
  };
}

interface Figures {
  samplesPerSecond: number;
  bytesPerStep: number;
}

async function run(config: RunConfig): Promise<Figures> {
  const out = mkdtempSync(join(tmpdir(), 'paratrain-bench-mp-'));
  const bytes: number[] = [];
  let samples = 0,
    t0 = 0,
    t1 = 0;
  try {
    await train(config, {
      out: join(out, 'run'),
      onEvent: (e) => {
        if (e.type !== 'step' || e.step < WARMUP_STEPS) return;
        bytes.push(e.bytes);
        if (t0 === 0) t0 = performance.now();
        else samples += e.samples; // the first counted event opens the window
        t1 = performance.now();
      },
    });
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
  bytes.sort((a, b) => a - b);
  return { samplesPerSecond: samples / ((t1 - t0) / 1000), bytesPerStep: bytes[bytes.length >> 1] ?? 0 };
}

const mb = (b: number) => `${(b / 1e6).toFixed(2)} MB`;

export async function main(args: string[]): Promise<void> {
  const steps = Number(option(args, 'steps', '40'));
  const batch = Number(option(args, 'batch', '64'));
  const devices = option(args, 'devices', '2,4').split(',').map(Number);
  const one = await run(configFor('one device', 1, batch, steps));
  const rows: { mode: Mode; g: number; f: Figures }[] = [];
  for (const g of devices) {
    for (const mode of MODES) rows.push({ mode, g, f: await run(configFor(mode, g, batch, steps)) });
  }
  console.log(`alexnet-small, hybrid, per-device batch ${batch}, ${steps} steps after ${WARMUP_STEPS} warm-up steps`);
  console.log(
    '| devices | mode | bytes / step / device | trick vs data parallel (bytes) | samples/s | vs 1 device | trick vs data parallel (samples/s) |',
  );
  console.log('| --- | --- | --- | --- | --- | --- | --- |');
  console.log(`| 1 | one device | 0 | | ${one.samplesPerSecond.toFixed(0)} | 1.00× | |`);
  for (const { mode, g, f } of rows) {
    const dp = rows.find((r) => r.g === g && r.mode === 'data parallel')!.f;
    const vs = mode !== 'data parallel';
    console.log(
      `| ${g} | ${mode} | ${mb(f.bytesPerStep)} | ${vs ? `${(f.bytesPerStep / dp.bytesPerStep).toFixed(2)}×` : ''} | ` +
        `${f.samplesPerSecond.toFixed(0)} | ${(f.samplesPerSecond / one.samplesPerSecond).toFixed(2)}× | ${vs ? `${(f.samplesPerSecond / dp.samplesPerSecond).toFixed(2)}×` : ''} |`,
    );
  }
  console.log(
    'bytes: what the shared-memory transport counts (read from peers + written), the comm stats of the step events',
  );
}
