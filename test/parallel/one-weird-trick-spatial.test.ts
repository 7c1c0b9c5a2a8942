import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { train } from '../../src/runtime/run/train.ts';
import { readCheckpoint } from '../../src/runtime/checkpoint/checkpoint.ts';
import { tinyConfig } from './helpers.ts';
import { assertClose } from '../util/close.ts';
import { compareWithOneDevice, TOL } from './trickHelpers.ts';

// A spatialSplit marked `parallel: model` in the model-parallel section: its tiles run on different
// devices on the job's whole batch. G devices must equal ONE device training on the G·b batch (which
// runs the same spatialSplit serially — itself tested equal to the unsplit stack). The runs differ
// only in float32 summation order (the stack's weight gradient is summed over tiles and devices,
// overlapping halo input gradients over devices), so after ~24 steps of SGD with momentum or Adam the
// weights and optimizer state agree to ~1e-6 relative; we allow rtol 1e-4 with atol 1e-5 like the
// other trick tests (Adam amplifies rounding slightly). A double-counted or unscaled weight gradient
// (the hybrid all-reduce and the section both summing it) would be off by a factor G, far outside.

// small gradient buckets: the hybrid all-reduce starts while the section still runs, so the order in
// which the stack's (replicated) gradients are declared ready is exercised
const BUCKET_BYTES = 256;

const compare = (
  layers: unknown[],
  devices: number,
  optimizer: unknown,
  watch: string,
  what: string,
  trainLimit?: number,
) => compareWithOneDevice(layers, devices, optimizer, watch, what, { trainLimit, bucketBytes: BUCKET_BYTES });

/** The section is the spatialSplit alone, the model's first layer (its input rows are the batch itself). */
const stack = (tiles: [number, number]) => [
  {
    spatialSplit: {
      tiles,
      parallel: 'model',
      layers: [
        { conv2d: { filters: 4, kernelSize: 3, strides: 2, activation: 'relu' } },
        { maxPool2d: { poolSize: 2 } },
        { conv2d: { filters: 5, kernelSize: 3, padding: 'same' } },
        { tanh: {} },
      ],
    },
  },
  { maxPool2d: { poolSize: 2 } },
  { flatten: {} },
  { dense: { units: 10 } },
];

for (const [devices, tiles] of [
  [2, [2, 1]],
  [3, [3, 1]],
  [4, [2, 2]],
] as [number, [number, number]][]) {
  test(`a parallel spatialSplit with ${tiles.join('×')} tiles on ${devices} devices equals one device on the ${devices}·b batch: SGD and Adam`, async () => {
    await compare(stack(tiles), devices, { sgd: { lr: 0.05, momentum: 0.9 } }, 'layers.0.2.kernel', `G=${devices} sgd`);
    await compare(stack(tiles), devices, { adam: { lr: 0.01 } }, 'layers.0.0.kernel', `G=${devices} adam`);
  });
}

test('uneven tile assignment: 3 tiles on 2 devices, 2 tiles on 4 devices (two idle), devices without samples', async () => {
  await compare(stack([3, 1]), 2, { sgd: { lr: 0.05, momentum: 0.9 } }, 'layers.0.0.kernel', 'G=2, 3 tiles');
  // 97 = 3·32 + 1: the last step's single sample is device 0's; devices 1–3 still take part
  await compare(stack([1, 2]), 4, { adam: { lr: 0.01 } }, 'layers.0.2.kernel', 'G=4, 2 tiles, empty devices', 97);
});

test('a data-parallel conv, a parallel spatialSplit, a channel-split conv and a column→row dense pair in one section equal one device', async () => {
  const layers = [
    { conv2d: { filters: 3, kernelSize: 3, activation: 'relu' } },
    {
      spatialSplit: {
        tiles: [2, 2],
        parallel: 'model',
        layers: [
          { conv2d: { filters: 4, kernelSize: 3, strides: 2, padding: 'same', activation: 'relu' } },
          { maxPool2d: { poolSize: 2 } },
        ],
      },
    },
    { conv2d: { filters: 5, kernelSize: 3, activation: 'relu', parallel: 'model' } },
    { flatten: {} },
    { dense: { units: 13, activation: 'relu', parallel: 'model' } },
    { dropout: { rate: 0.3, masks: 'per-sample' } },
    { dense: { units: 10, parallel: 'model' } },
  ];
  await compare(layers, 3, { adam: { lr: 0.01 } }, 'layers.1.0.kernel', 'G=3 mixed section');
});

test('on worker threads (wasm, shared memory) with evaluation: the same weights and test accuracy as one device', async () => {
  const layers = stack([2, 1]);
  const data = { trainLimit: 64, testLimit: 50 };
  const out = () => join(mkdtempSync(join(tmpdir(), 'paratrain-trick-spatial-threads-')), 'run');
  const single = await train(tinyConfig({ layers, data: { ...data, batchSize: 16 } }), { out: out() });
  const split = await train(tinyConfig({ layers, data, train: { devices: 2, strategy: 'hybrid' } }), { out: out() });
  const weights = (path: string) => readCheckpoint(path).tensors;
  for (const [name, t] of weights(single.checkpoint))
    assertClose(weights(split.checkpoint).get(name)!.data, t.data, { ...TOL, what: `threads ${name}` });
  assert.equal(split.testAccuracy, single.testAccuracy, 'evaluation on the gathered model');
});

test('errors: an unmarked spatialSplit inside the section; more tiles than output rows', async () => {
  const run = async (layers: unknown[], devices: number) =>
    train(tinyConfig({ layers, train: { devices, strategy: 'hybrid' } }), {
      out: join(mkdtempSync(join(tmpdir(), 'paratrain-trick-spatial-err-')), 'run'),
    });
  const inner = [{ conv2d: { filters: 2, kernelSize: 3 } }];
  await assert.rejects(
    run(
      [
        { spatialSplit: { tiles: [2, 1], parallel: 'model', layers: inner } },
        { spatialSplit: { tiles: [2, 1], layers: inner } },
        { spatialSplit: { tiles: [2, 1], parallel: 'model', layers: inner } },
        { flatten: {} },
        { dense: { units: 10 } },
      ],
      2,
    ),
    /model\.layers\[1\] spatialSplit: lies between the model-parallel layers model\.layers\[0\] and model\.layers\[2\] but is not marked; add 'parallel: model' to it too/,
  );
  await assert.rejects(
    run(
      [
        {
          spatialSplit: {
            tiles: [20, 1],
            parallel: 'model',
            layers: [{ conv2d: { filters: 2, kernelSize: 3, strides: 2 } }],
          },
        },
        { flatten: {} },
        { dense: { units: 10 } },
      ],
      2,
    ),
    /model\.layers\[0\]\.spatialSplit\.tiles: \[20, 1\] asks for 20 tiles along the rows but the split's output .* has only 13 rows/,
  );
});
