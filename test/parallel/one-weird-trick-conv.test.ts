import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { train } from '../../src/runtime/run/train.ts';
import { tinyConfig } from './helpers.ts';
import { compareWithOneDevice } from './trickHelpers.ts';

// Channel-split convolutions in the model-parallel section: G devices must equal ONE device training
// on the G·b batch (as in one-weird-trick.test.ts). The runs differ only in float32 summation order
// (input gradients summed over filter slices, weight gradients over the whole batch at once), so after
// ~24 steps of SGD with momentum or Adam the weights and optimizer state agree to ~1e-6 relative; we
// allow rtol 1e-4 with atol 1e-5, as that test does (Adam amplifies rounding slightly).

const compare = (
  layers: unknown[],
  devices: number,
  optimizer: unknown,
  watch: string,
  what: string,
  trainLimit?: number,
) => compareWithOneDevice(layers, devices, optimizer, watch, what, { trainLimit });

// The section is layers 0–2: a channel-split conv as the very first layer (its input rows are the
// batch itself), pooling between, a second channel-split conv with 'same' padding; the data-parallel
// tail gets its rows back as images. 5 and 6 filters split unevenly over 2, 3, 4 devices.
const convs = [
  { conv2d: { filters: 5, kernelSize: 3, strides: 2, activation: 'relu', parallel: 'model' } },
  { maxPool2d: { poolSize: 2 } },
  { conv2d: { filters: 6, kernelSize: 3, padding: 'same', activation: 'tanh', parallel: 'model' } },
  { maxPool2d: { poolSize: 2 } },
  { flatten: {} },
  { dense: { units: 10 } },
];

for (const devices of [2, 3, 4]) {
  test(`channel-split convs on ${devices} devices (uneven filters and rows) equal one device on the ${devices}·b batch: SGD and Adam`, async () => {
    await compare(convs, devices, { sgd: { lr: 0.05, momentum: 0.9 } }, 'layers.2.kernel', `G=${devices} sgd`);
    await compare(convs, devices, { adam: { lr: 0.01 } }, 'layers.0.kernel', `G=${devices} adam`);
  });
}

test('a data-parallel conv, then a channel-split conv, pooling, flatten and a column→row dense pair in one section equals one device', async () => {
  const layers = [
    { conv2d: { filters: 3, kernelSize: 3, strides: 2, activation: 'relu' } },
    { conv2d: { filters: 7, kernelSize: 3, activation: 'relu', parallel: 'model' } },
    { avgPool2d: { poolSize: 2 } },
    { flatten: {} },
    { dense: { units: 13, activation: 'relu', parallel: 'model' } },
    { dropout: { rate: 0.3, masks: 'per-sample' } },
    { dense: { units: 10, parallel: 'model' } },
  ];
  await compare(layers, 3, { adam: { lr: 0.01 } }, 'layers.1.kernel', 'G=3 conv + dense section');
  // 73 = 3·24 + 1: devices 1 and 2 enter the section with no rows of their own (empty images)
  await compare(layers, 3, { sgd: { lr: 0.05 } }, 'layers.4.kernel', 'G=3 conv + dense section, empty devices', 73);
});

test('channel-split convs where some devices get no samples of the last batch', async () => {
  // 97 = 3·32 + 1: the last step's single sample is device 0's; devices 1–3 still take part
  await compare(convs, 4, { sgd: { lr: 0.05, momentum: 0.9 } }, 'layers.0.kernel', 'G=4 empty devices', 97);
});

test('errors: more devices than filters names the conv; an unmarked conv inside the section', async () => {
  const run = (layers: unknown[], devices: number) =>
    train(tinyConfig({ layers, train: { devices, strategy: 'hybrid' } }), {
      out: join(mkdtempSync(join(tmpdir(), 'paratrain-trick-conv-err-')), 'run'),
    });
  await assert.rejects(
    run([{ conv2d: { filters: 3, kernelSize: 3, parallel: 'model' } }, { flatten: {} }, { dense: { units: 10 } }], 4),
    /model\.layers\[0\] conv2d: 'parallel: model' splits its 3 filters over 4 devices, but every device needs at least one; use at most 3 devices or a layer with at least 4 filters/,
  );
  await assert.rejects(
    run(
      [
        { conv2d: { filters: 4, kernelSize: 3, parallel: 'model' } },
        { conv2d: { filters: 4, kernelSize: 3 } },
        { conv2d: { filters: 4, kernelSize: 3, parallel: 'model' } },
        { flatten: {} },
        { dense: { units: 10 } },
      ],
      2,
    ),
    /model\.layers\[1\] conv2d: lies between the model-parallel layers model\.layers\[0\] and model\.layers\[2\] but is not marked; add 'parallel: model' to it too/,
  );
});
