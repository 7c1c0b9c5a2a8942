import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig, parseYaml, configToYaml, toYamlForm, ConfigError } from '../../src/config/index.ts';
import { buildModel } from '../../src/nn/model.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';

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

const model = (layers: string, input = '[28, 28, 1]') =>
  `model:\n  input: ${input}\n  layers:\n${layers}    - flatten: {}\n    - dense: { units: 10 }\n`;
const CONV = '{ conv2d: { filters: 4, kernelSize: 3, activation: relu } }';

test('spatialSplit parses into a container of conv/pool/activation specs and round-trips through YAML', () => {
  const c = parseConfig(
    parseYaml(
      model(`    - spatialSplit: { tiles: [2, 3], layers: [${CONV}, { maxPool2d: { poolSize: 2 } }, tanh] }\n`),
      'f.yaml',
    ),
    'f.yaml',
  );
  assert.deepStrictEqual(c.model.layers[0], {
    type: 'spatialSplit',
    tiles: [2, 3],
    layers: [
      {
        type: 'conv2d',
        filters: 4,
        kernelSize: [3, 3],
        strides: [1, 1],
        padding: 'valid',
        activation: 'relu',
        useBias: true,
      },
      { type: 'maxPool2d', poolSize: [2, 2], strides: [2, 2], padding: 'valid' },
      { type: 'tanh' },
    ],
  });
  assert.deepStrictEqual(parseConfig(parseYaml(configToYaml(c), 'round-trip'), 'round-trip'), c);
  assert.deepStrictEqual(parseConfig(toYamlForm(c)), c);
  // the built model names the container and checkpoints its layers' tensors as layers.<i>.<k>.<name>
  const m = buildModel(jsBackend, c.model);
  assert.equal(m.layers[0]!.name, 'model.layers[0] spatialSplit');
  assert.deepEqual(
    m.paramEntries.map((e) => e.name),
    ['layers.0.0.kernel', 'layers.0.0.bias', 'layers.2.kernel', 'layers.2.bias'],
  );
});

test('layers that cannot be split spatially are refused, naming the layer and the fix', () => {
  const issues = issuesOf(
    model(`    - spatialSplit:
        tiles: [2, 1]
        layers: [${CONV}, { dense: { units: 3 } }, { batchNorm: {} }, { dropout: { rate: 0.1 } }, flatten, { spatialSplit: { tiles: [1, 1], layers: [relu] } }, { conv3d: {} }]
`),
  );
  const allowed =
    'only conv2d, maxPool2d, avgPool2d, relu, tanh, sigmoid, clippedRelu, gelu, leakyRelu can — end the spatialSplit before this layer';
  assert.deepStrictEqual(issues, [
    `f.yaml: model.layers[0].spatialSplit.layers[1]: dense cannot be inside a spatialSplit (its outputs depend on the whole input, not on a window of pixels); ${allowed}`,
    `f.yaml: model.layers[0].spatialSplit.layers[2]: batchNorm cannot be inside a spatialSplit (its statistics span the whole image); ${allowed}`,
    `f.yaml: model.layers[0].spatialSplit.layers[3]: dropout cannot be inside a spatialSplit (its masks are drawn per whole sample); ${allowed}`,
    `f.yaml: model.layers[0].spatialSplit.layers[4]: flatten cannot be inside a spatialSplit (its outputs depend on the whole input, not on a window of pixels); ${allowed}`,
    'f.yaml: model.layers[0].spatialSplit.layers[5]: a spatialSplit cannot hold another spatialSplit; list all the layers to split in one spatialSplit',
    "f.yaml: model.layers[0].spatialSplit.layers[6]: unknown layer type 'conv3d' (did you mean 'conv2d'?); expected one of conv2d, maxPool2d, avgPool2d, relu, tanh, sigmoid, clippedRelu, gelu, leakyRelu",
  ]);
  assert.deepStrictEqual(
    issuesOf(
      model(
        '    - spatialSplit: { tiles: [2, 1], layers: [{ conv2d: { filters: 4, kernelSize: 3, parallel: model } }] }\n',
      ),
    ),
    [
      "f.yaml: model.layers[0].spatialSplit.layers[0].conv2d.parallel: 'parallel: model' cannot be used on a layer inside a spatialSplit; to run the tiles on different devices put it on the spatialSplit itself (`spatialSplit: { tiles: [2, 1], parallel: model, layers: [...] }`), or move the convolution out of the spatialSplit",
    ],
  );
});

test('bad tiles: not a pair, or more tiles than the split has output rows/columns', () => {
  assert.deepStrictEqual(
    issuesOf(model(`    - spatialSplit: { tiles: 2, layers: [${CONV}] }\n    - spatialSplit: { layers: [] }\n`)),
    [
      'f.yaml: model.layers[0].spatialSplit.tiles: expected [rows, columns] of positive integers, such as [2, 1] for 2 tiles along the height, got 2',
      'f.yaml: model.layers[1].spatialSplit.tiles: missing; expected [rows, columns] of positive integers, such as [2, 1] for 2 tiles along the height',
      'f.yaml: model.layers[1].spatialSplit.layers: expected at least one layer (the convolutions and pooling to split), got []',
    ],
  );
  // 28 → conv 3×3 stride 2 → 13 → max pool 2 → 6 rows; then a second split 6 → 'same' conv → 6 → pool 3 → 2
  assert.deepStrictEqual(
    issuesOf(
      model(`    - spatialSplit: { tiles: [6, 7], layers: [{ conv2d: { filters: 4, kernelSize: 3, strides: 2 } }, { maxPool2d: { poolSize: 2 } }] }
    - spatialSplit: { tiles: [3, 1], layers: [{ conv2d: { filters: 4, kernelSize: 3, padding: same } }, relu, { avgPool2d: { poolSize: 3 } }] }
`),
    ),
    [
      "f.yaml: model.layers[0].spatialSplit.tiles: [6, 7] asks for 7 tiles along the columns but the split's output (model.layers[0].spatialSplit.layers[1] maxPool2d) has only 6 columns (output 6×6×4); use at most 6 tiles along the columns",
      "f.yaml: model.layers[1].spatialSplit.tiles: [3, 1] asks for 3 tiles along the rows but the split's output (model.layers[1].spatialSplit.layers[2] avgPool2d) has only 2 rows (output 2×2×4); use at most 2 tiles along the rows",
    ],
  );
});

test('shape errors inside a spatialSplit name the inner layer when the model is built', () => {
  const c = parseConfig(
    parseYaml(
      model(
        `    - spatialSplit: { tiles: [1, 1], layers: [{ conv2d: { filters: 4, kernelSize: 5 } }, { maxPool2d: { poolSize: 4 } }, ${CONV}] }\n`,
        '[8, 8, 1]',
      ),
      'f.yaml',
    ),
    'f.yaml',
  );
  assert.throws(() => buildModel(jsBackend, c.model), {
    message:
      'model.layers[0].spatialSplit.layers[2] conv2d: kernel 3×3 is larger than its 1×1 input; use padding: same or a smaller window',
  });
  const flat = parseConfig(
    parseYaml(`model:\n  input: [10]\n  layers:\n    - spatialSplit: { tiles: [1, 1], layers: [relu] }\n`, 'f.yaml'),
    'f.yaml',
  );
  assert.throws(
    () => buildModel(jsBackend, flat.model),
    /model\.layers\[0\]\.spatialSplit\.layers\[0\] relu: cannot be part of a spatially split stack/,
  );
});

test('spatialSplit parallel: model parses, round-trips through YAML, needs the hybrid strategy; a bad value is named', () => {
  const yaml = model(`    - spatialSplit: { tiles: [2, 1], parallel: model, layers: [${CONV}] }\n`);
  const c = parseConfig(parseYaml(yaml, 'f.yaml'), 'f.yaml');
  assert.equal((c.model.layers[0] as { parallel?: string }).parallel, 'model');
  assert.deepStrictEqual(parseConfig(parseYaml(configToYaml(c), 'round-trip'), 'round-trip'), c);
  // parallel: data is the serial split: the spec has no field, as before
  const serial = parseConfig(
    parseYaml(model(`    - spatialSplit: { tiles: [2, 1], parallel: data, layers: [${CONV}] }\n`), 'f.yaml'),
    'f.yaml',
  );
  assert.equal('parallel' in serial.model.layers[0]!, false);
  assert.deepStrictEqual(issuesOf(`${yaml}train: { devices: 2, strategy: bsp }\n`), [
    "f.yaml: train.strategy: 'parallel: model' (model.layers[0]) needs the synchronous hybrid strategy: the model-parallel layers exchange activations every step while the other layers all-reduce gradients; got bsp — use strategy hybrid (--strategy hybrid) or remove 'parallel: model'",
  ]);
  assert.deepStrictEqual(
    issuesOf(model(`    - spatialSplit: { tiles: [2, 1], parallel: tiles, layers: [${CONV}] }\n`)),
    ["f.yaml: model.layers[0].spatialSplit.parallel: expected one of data, model, got 'tiles'"],
  );
});
