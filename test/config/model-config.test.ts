import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { loadConfig, parseConfig, parseYaml, toYamlForm, ConfigError } from '../../src/config/index.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { buildModel } from '../../src/nn/model.ts';

/** The issue lines of the ConfigError thrown by parsing `yaml` as file `f.yaml`. */
function issuesOf(yaml: string): string[] {
  try {
    parseConfig(parseYaml(yaml, 'f.yaml'), 'f.yaml');
  } catch (e) {
    assert.ok(e instanceof ConfigError, `expected a ConfigError, got ${String(e)}`);
    return e.issues;
  }
  assert.fail('expected the config to be rejected');
}
const parse = (yaml: string) => parseConfig(parseYaml(yaml, 'f.yaml'), 'f.yaml');
const flat = (layers: string, rest = '') => `model:\n  input: [6]\n  layers:\n${layers}${rest}`;

test('loss: a name, { type, …options } or a one-key map; label smoothing defaults to 0', () => {
  const dense = '    - dense: { units: 3 }\n';
  assert.deepEqual(parse(flat(dense)).loss, { type: 'softmaxCrossEntropy', labelSmoothing: 0 });
  assert.deepEqual(parse(flat(dense, 'loss: meanSquaredError\n')).loss, { type: 'meanSquaredError' });
  assert.deepEqual(parse(flat(dense, 'loss: { type: softmaxCrossEntropy, labelSmoothing: 0.1 }\n')).loss, {
    type: 'softmaxCrossEntropy',
    labelSmoothing: 0.1,
  });
  assert.deepEqual(parse(flat(dense, 'loss: { softmaxCrossEntropy: { labelSmoothing: 0.2 } }\n')).loss, {
    type: 'softmaxCrossEntropy',
    labelSmoothing: 0.2,
  });
  assert.deepEqual(parse(flat(dense, 'loss: { type: binaryCrossEntropy }\n')).loss, { type: 'binaryCrossEntropy' });
  assert.deepEqual(issuesOf(flat(dense, 'loss: { type: softmaxCrossEntropy, labelSmoothing: 1 }\n')), [
    'f.yaml: loss.labelSmoothing: expected a number ≥ 0 and < 1, got 1',
  ]);
  assert.deepEqual(issuesOf(flat(dense, 'loss: { type: meanSquareError }\n')), [
    "f.yaml: loss.type: unknown loss 'meanSquareError' (did you mean 'meanSquaredError'?); expected one of softmaxCrossEntropy, meanSquaredError, binaryCrossEntropy, ctc, tokenCrossEntropy",
  ]);
  assert.match(
    issuesOf(flat(dense, 'loss: crossEntropy\n'))[0]!,
    /^f\.yaml: loss: unknown loss 'crossEntropy'.*expected one of softmaxCrossEntropy, meanSquaredError, binaryCrossEntropy/,
  );
  assert.match(
    issuesOf(flat(dense, 'loss: { type: meanSquaredError, reduction: sum }\n'))[0]!,
    /^f\.yaml: loss: unknown option 'reduction'; meanSquaredError takes no options/,
  );
});

test('a last layer that squashes what the loss takes as logits is refused, naming loss and the layer', () => {
  assert.deepEqual(issuesOf(flat('    - dense: { units: 3 }\n    - softmax: {}\n')), [
    'f.yaml: loss: softmaxCrossEntropy takes logits and applies softmax itself, but model.layers[1] is a softmax layer; ' +
      'remove it (predictions apply softmax to the logits), or use loss: meanSquaredError to train on the probabilities',
  ]);
  assert.match(
    issuesOf(flat('    - dense: { units: 3, activation: sigmoid }\n', 'loss: binaryCrossEntropy\n'))[0]!,
    /^f\.yaml: loss: binaryCrossEntropy takes logits and applies the sigmoid itself, but model\.layers\[0\] ends in a sigmoid/,
  );
  // a softmax output trained on probabilities is fine
  assert.equal(
    parse(flat('    - dense: { units: 3 }\n    - softmax: {}\n', 'loss: meanSquaredError\n')).model.layers[1]!.type,
    'softmax',
  );
});

test('gelu, leakyRelu (slope ≥ 0, default 0.01), softmax as layers and as activations; gelu is refused on a model-parallel dense', () => {
  const c = parse(
    flat(
      '    - dense: { units: 4, activation: gelu }\n    - leakyRelu: {}\n    - dense: { units: 4, activation: leakyRelu }\n    - leakyRelu: { slope: 0.2 }\n    - gelu: {}\n    - dense: { units: 3 }\n',
    ),
  );
  assert.deepEqual(
    c.model.layers.map((l) =>
      l.type === 'dense' ? `dense:${l.activation}` : l.type === 'leakyRelu' ? `leakyRelu:${l.slope}` : l.type,
    ),
    ['dense:gelu', 'leakyRelu:0.01', 'dense:leakyRelu', 'leakyRelu:0.2', 'gelu', 'dense:linear'],
  );
  assert.deepEqual(issuesOf(flat('    - leakyRelu: { slope: -0.1 }\n')), [
    'f.yaml: model.layers[0].leakyRelu.slope: expected a number ≥ 0, got -0.1',
  ]);
  assert.match(
    issuesOf(
      flat(
        '    - dense: { units: 4, activation: gelu, parallel: model }\n    - dense: { units: 3, parallel: model }\n',
      ),
    )[0]!,
    /^f\.yaml: model\.layers\[0\]\.dense\.activation: gelu cannot be fused into a 'parallel: model' dense layer; leave its activation linear and add a `- gelu: \{\}` layer after it/,
  );
  const image = parse(
    'model:\n  input: [8, 8, 1]\n  layers:\n    - spatialSplit: { tiles: [2, 1], layers: [ { conv2d: { filters: 2, kernelSize: 3, activation: gelu } }, { leakyRelu: {} }, { gelu: {} } ] }\n    - flatten: {}\n    - dense: { units: 2 }\n',
  );
  assert.equal(image.model.layers[0]!.type, 'spatialSplit');
});

const RESNET = `model:
  input: [8, 8, 2]
  layers:
    - conv2d: { filters: 4, kernelSize: 3, padding: same }
    - residual:
        layers:
          - conv2d: { filters: 4, kernelSize: 3, padding: same }
          - batchNorm: {}
          - relu: {}
          - conv2d: { filters: 4, kernelSize: 3, padding: same }
        activation: relu
    - residual:
        layers: [ { conv2d: { filters: 8, kernelSize: 3, strides: 2, padding: same } } ]
        shortcut: [ { conv2d: { filters: 8, kernelSize: 1, strides: 2 } } ]
    - add: { branches: [ [ { dropout: { rate: 0.1 } } ], [], [ { residual: { layers: [ { tanh: {} } ] } } ] ], activation: gelu }
    - flatten: {}
    - dense: { units: 3 }
`;

test('residual and add blocks: normalised specs, defaults (identity shortcut, linear activation), nested blocks', () => {
  const c = parse(RESNET);
  const block = c.model.layers[1]!;
  assert.equal(block.type, 'residual');
  if (block.type !== 'residual') return;
  assert.deepEqual(
    block.layers.map((l) => l.type),
    ['conv2d', 'batchNorm', 'relu', 'conv2d'],
  );
  assert.deepEqual(block.shortcut, []);
  assert.equal(block.activation, 'relu');
  const add = c.model.layers[3]!;
  assert.ok(
    add.type === 'add' &&
      add.branches.length === 3 &&
      add.branches[1]!.length === 0 &&
      add.branches[2]![0]!.type === 'residual',
  );
  const model = buildModel(jsBackend, c.model);
  assert.deepEqual(model.outputShape, [3]);
  assert.ok(model.paramEntries.some((e) => e.name === 'layers.2.shortcut.0.kernel'));
  assert.ok(model.stateEntries.some((e) => e.name === 'layers.1.layers.1.runningMean'));
});

test('block errors name the path inside the block', () => {
  const block = (inner: string) =>
    `model:\n  input: [8, 8, 2]\n  layers:\n    - residual: ${inner}\n    - flatten: {}\n    - dense: { units: 2 }\n`;
  assert.deepEqual(issuesOf(block('{ layers: [ { relu: {} }, { conv2d: { filters: 0, kernelSize: 3 } } ] }')), [
    'f.yaml: model.layers[0].residual.layers[1].conv2d.filters: expected a positive integer, got 0',
  ]);
  assert.deepEqual(issuesOf(block('{ layers: [] }')), [
    'f.yaml: model.layers[0].residual.layers: expected at least one layer (the block; its shortcut is added to their output), got []',
  ]);
  assert.match(
    issuesOf(block('{ layers: [ { spatialSplit: { tiles: [2, 1], layers: [ { relu: {} } ] } } ] }'))[0]!,
    /^f\.yaml: model\.layers\[0\]\.residual\.layers\[0\]: a spatialSplit cannot be inside a residual or add block/,
  );
  assert.match(
    issuesOf(block('{ layers: [ { conv2d: { filters: 2, kernelSize: 1, parallel: model } } ] }'))[0]!,
    /^f\.yaml: model\.layers\[0\]\.residual\.layers\[0\]\.conv2d\.parallel: 'parallel: model' cannot be used inside a residual or add block/,
  );
  assert.ok(
    issuesOf(block('{ layer: [ { relu: {} } ] }')).some((i) =>
      /^f\.yaml: model\.layers\[0\]\.residual: unknown option 'layer' \(did you mean 'layers'\?\)/.test(i),
    ),
  );
  assert.match(
    issuesOf('model:\n  input: [4]\n  layers:\n    - add: { branches: [ [ { relu: {} } ] ] }\n')[0]!,
    /^f\.yaml: model\.layers\[0\]\.add\.branches: expected at least two branches to add/,
  );
  // shapes are checked when the model is built, naming the block and its branches
  assert.throws(
    () => buildModel(jsBackend, parse(block('{ layers: [ { conv2d: { filters: 3, kernelSize: 3 } } ] }')).model),
    /^Error: model\.layers\[0\] residual: its branches must end in the same shape to be added, but model\.layers\[0\]\.residual\.layers ends in \[6, 6, 3\] and model\.layers\[0\]\.residual\.shortcut is the identity: \[8, 8, 2\]; change the layers/,
  );
});

test('train.clipGradNorm: a positive number, absent by default', () => {
  const dense = '    - dense: { units: 3 }\n';
  assert.equal('clipGradNorm' in parse(flat(dense)).train, false);
  assert.equal(parse(flat(dense, 'train: { clipGradNorm: 1.5 }\n')).train.clipGradNorm, 1.5);
  assert.deepEqual(issuesOf(flat(dense, 'train: { clipGradNorm: 0 }\n')), [
    'f.yaml: train.clipGradNorm: expected a positive number, got 0',
  ]);
});

test('configs with the new losses, layers, blocks and clipping write back to YAML that parses to the same config', () => {
  const c = parse(`${RESNET}loss: { type: softmaxCrossEntropy, labelSmoothing: 0.1 }\ntrain: { clipGradNorm: 2 }\n`);
  assert.deepStrictEqual(parseConfig(toYamlForm(c), 'yaml form'), c);
  const m = parse(flat('    - dense: { units: 2 }\n', 'loss: meanSquaredError\n'));
  assert.deepStrictEqual(parseConfig(toYamlForm(m), 'yaml form'), m);
});

test('examples/resnet-small.yaml parses and builds: three residual blocks, a projection shortcut, label smoothing, clipping', () => {
  const c = loadConfig(fileURLToPath(new URL('../../examples/resnet-small.yaml', import.meta.url)));
  assert.deepEqual(c.model.layers.filter((l) => l.type === 'residual').length, 3);
  assert.deepEqual(c.loss, { type: 'softmaxCrossEntropy', labelSmoothing: 0.05 });
  assert.equal(c.train.clipGradNorm, 5);
  assert.deepEqual(buildModel(jsBackend, c.model).outputShape, [10]);
});

test('a residual block inside a spatialSplit is refused with the fix', () => {
  const yaml =
    'model:\n  input: [8, 8, 1]\n  layers:\n    - spatialSplit: { tiles: [2, 1], layers: [ { residual: { layers: [ { relu: {} } ] } } ] }\n    - flatten: {}\n    - dense: { units: 2 }\n';
  assert.deepEqual(issuesOf(yaml), [
    'f.yaml: model.layers[0].spatialSplit.layers[0]: a residual block cannot be inside a spatialSplit (nor a spatialSplit inside it); end the spatialSplit before the block',
  ]);
});
