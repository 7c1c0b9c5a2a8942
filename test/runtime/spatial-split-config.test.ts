import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tinyConfig } from '../parallel/helpers.ts';
import { runCli } from '../cli/helpers.ts';
import { assertClose } from '../util/close.ts';
import { train, type TrainOptions } from '../../src/runtime/run/train.ts';
import { readCheckpoint } from '../../src/runtime/checkpoint/checkpoint.ts';
import { configToYaml } from '../../src/config/index.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';
import type { TrainEvent } from '../../src/runtime/events/events.ts';

// Tolerance (float32): tiles compute the same sums as the whole image, but weight gradients add the
// tiles' partial sums in another order (~1e-7 relative per step); after 6 steps the weights agree to
// ~1e-6 relative; we allow 1e-5 relative (atol 1e-6 for weights near zero).
const TOL = { rtol: 1e-5, atol: 1e-6 };

const STACK = [
  { conv2d: { filters: 4, kernelSize: 3, padding: 'same', activation: 'relu' } },
  { maxPool2d: { poolSize: 2 } },
  { conv2d: { filters: 6, kernelSize: 3, strides: 2, activation: 'tanh' } },
  { relu: {} },
];
const FIRST = { conv2d: { filters: 3, kernelSize: 3, padding: 'same', activation: 'relu' } };
const HEAD = [{ flatten: {} }, { dense: { units: 10 } }];

/**
 * The tiny model with its convolution stack plain or inside a spatialSplit with `tiles` (after a
 * first convolution, so the split's input gradient — overlapping halos added — is used too).
 */
function config(
  tiles: [number, number] | null,
  o: { optimizer?: unknown; train?: Record<string, unknown> } = {},
): RunConfig {
  const layers = tiles ? [FIRST, { spatialSplit: { tiles, layers: STACK } }, ...HEAD] : [FIRST, ...STACK, ...HEAD];
  return tinyConfig({ ...o, layers, data: { batchSize: 8, trainLimit: 48 } });
}

/** Final weights by the unsplit model's names: 'layers.1.<k>.kernel' of a split model is 'layers.<1+k>.kernel'. */
async function weights(
  c: RunConfig,
  options: TrainOptions = {},
): Promise<{ byName: Map<string, Float32Array>; checkpoint: string; testAccuracy: number }> {
  const out = join(mkdtempSync(join(tmpdir(), 'paratrain-spatial-')), 'run');
  const result = await train(c, { out, ...options });
  const split = c.model.layers[1]!.type === 'spatialSplit' ? STACK.length : 0;
  const byName = new Map<string, Float32Array>();
  for (const [name, t] of readCheckpoint(result.checkpoint).tensors) {
    const m = /^layers\.(\d+)\.(?:(\d+)\.)?(\w+)$/.exec(name);
    if (!m) continue;
    const outer = Number(m[1]);
    const index = split && outer === 1 ? 1 + Number(m[2]) : outer + (split && outer > 1 ? split - 1 : 0);
    byName.set(`layers.${index}.${m[3]}`, t.data);
  }
  return { byName, checkpoint: result.checkpoint, testAccuracy: result.testAccuracy };
}

function assertSameWeights(a: Map<string, Float32Array>, b: Map<string, Float32Array>, what: string): void {
  assert.deepEqual([...a.keys()].sort(), [...b.keys()].sort(), `${what}: tensor names`);
  for (const [name, data] of b) assertClose(a.get(name)!, data, { ...TOL, what: `${what} ${name}` });
}

test('spatialSplit from the config: training equals the unsplit model (1 device SGD, with micro-batches too; hybrid on 2 devices Adam)', {
  timeout: 120_000,
}, async () => {
  const plain = await weights(config(null));
  for (const tiles of [
    [2, 1],
    [3, 2],
  ] as [number, number][]) {
    assertSameWeights((await weights(config(tiles))).byName, plain.byName, `tiles ${tiles.join('×')} SGD`);
  }
  // the split is a layer like any other: micro-batches of it too
  assertSameWeights(
    (await weights(config([2, 1], { train: { microBatches: 3 } }))).byName,
    plain.byName,
    'tiles 2×1 with microBatches 3',
  );
  const hybrid = { optimizer: { adam: { lr: 0.01 } }, train: { devices: 2, strategy: 'hybrid' } };
  const plainHybrid = await weights(config(null, hybrid));
  assertSameWeights((await weights(config([2, 2], hybrid))).byName, plainHybrid.byName, 'tiles 2×2 hybrid G=2 Adam');
});

test('spatialSplit: the activation bytes in the step events fall with more tiles', { timeout: 60_000 }, async () => {
  const peak = async (tiles: [number, number] | null) => {
    const events: TrainEvent[] = [];
    // wasm: onednn runs the stack's conv → max pool as one step that keeps no conv output at all
    // (src/nn/convPool.ts), which tiles of this tiny image, with their halos, cannot undercut
    await weights(config(tiles, { train: { backend: 'wasm' } }), { onEvent: (e) => events.push(e) });
    const steps = events.filter((e): e is Extract<TrainEvent, { type: 'step' }> => e.type === 'step');
    return Math.max(...steps.map((e) => e.activationBytes!));
  };
  const [whole, two, four] = [await peak(null), await peak([2, 1]), await peak([4, 1])];
  // the split keeps its input (28×28×3) and one tile's arrays; the plain stack keeps all of its own
  assert.ok(two < whole && four < two, `activation bytes: unsplit ${whole}, 2 tiles ${two}, 4 tiles ${four}`);
});

test('paratrain eval loads a checkpoint of a model with a spatialSplit (names layers.<i>.<k>.kernel)', {
  timeout: 60_000,
}, async () => {
  const c = config([2, 1]);
  const run = await weights(c);
  const names = [...readCheckpoint(run.checkpoint).tensors.keys()].filter((n) => n.startsWith('layers.')).sort();
  assert.deepEqual(names, [
    'layers.0.bias',
    'layers.0.kernel',
    'layers.1.0.bias',
    'layers.1.0.kernel',
    'layers.1.2.bias',
    'layers.1.2.kernel',
    'layers.3.bias',
    'layers.3.kernel',
  ]);
  const dir = mkdtempSync(join(tmpdir(), 'paratrain-spatial-eval-'));
  try {
    const file = join(dir, 'split.yaml');
    writeFileSync(file, configToYaml(c));
    const e = await runCli(['eval', file, '--checkpoint', run.checkpoint]);
    assert.equal(e.code, 0, e.stderr);
    assert.equal((JSON.parse(e.stdout.trim()) as { testAccuracy: number }).testAccuracy, run.testAccuracy);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
