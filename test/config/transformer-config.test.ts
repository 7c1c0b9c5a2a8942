import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig, parseYaml, toYamlForm, ConfigError } from '../../src/config/index.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { buildModel } from '../../src/nn/model.ts';

const model = (layers: string) => `model:\n  input: [5, 8]\n  layers:\n${layers}`;
const parse = (yaml: string) => parseConfig(parseYaml(yaml, 'f.yaml'), 'f.yaml');
function issuesOf(yaml: string): string[] {
  try {
    parse(yaml);
  } catch (e) {
    assert.ok(e instanceof ConfigError, `expected a ConfigError, got ${String(e)}`);
    return e.issues;
  }
  assert.fail('expected the config to be rejected');
}

const GPT = model(
  [
    '    - transformerBlock: { heads: 2 }',
    '    - transformerBlock: { heads: 4, mlp: 16, dropout: 0.1, causal: false }',
    '    - residual: { layers: [ { layerNorm: {} }, { attention: { heads: 2 } } ] }',
    '    - attention: { heads: 8, causal: false, dropout: 0.2 }',
    '    - dense: { units: 3 }',
    '',
  ].join('\n'),
);

test('attention and transformerBlock: defaults filled in, mlp left absent (4·D once D is known)', () => {
  const layers = parse(GPT).model.layers;
  assert.deepEqual(layers[0], { type: 'transformerBlock', heads: 2, dropout: 0, causal: true });
  assert.deepEqual(layers[1], { type: 'transformerBlock', heads: 4, mlp: 16, dropout: 0.1, causal: false });
  assert.deepEqual(layers[2], {
    type: 'residual',
    layers: [
      { type: 'layerNorm', epsilon: 1e-5 },
      { type: 'attention', heads: 2, causal: true, dropout: 0 },
    ],
    shortcut: [],
    activation: 'linear',
  });
  assert.deepEqual(layers[3], { type: 'attention', heads: 8, causal: false, dropout: 0.2 });
});

test('a config with transformer layers written back to YAML parses to the same config', () => {
  const c = parse(GPT);
  assert.deepEqual(parseConfig(toYamlForm(c), 'again'), c);
});

test("a transformerBlock is one layer of the model: its checkpoint names are 'layers.<i>.attn…' and 'layers.<i>.mlp…'", () => {
  const names = buildModel(jsBackend, parse(GPT).model).paramEntries.map((e) => e.name);
  assert.deepEqual(
    names.filter((n) => n.startsWith('layers.1.')),
    [
      'layers.1.attn.layers.0.gamma',
      'layers.1.attn.layers.0.beta',
      'layers.1.attn.layers.1.in_proj_weight',
      'layers.1.attn.layers.1.in_proj_bias',
      'layers.1.attn.layers.1.out_proj.weight',
      'layers.1.attn.layers.1.out_proj.bias',
      'layers.1.mlp.layers.0.gamma',
      'layers.1.mlp.layers.0.beta',
      'layers.1.mlp.layers.1.kernel',
      'layers.1.mlp.layers.1.bias',
      'layers.1.mlp.layers.2.kernel',
      'layers.1.mlp.layers.2.bias',
    ],
  );
  assert.ok(names.includes('layers.2.layers.1.in_proj_weight'));
  assert.ok(names.includes('layers.3.out_proj.bias'));
});

test('bad transformer options name the field and the fix', () => {
  assert.deepEqual(issuesOf(model('    - attention: { heads: 0 }\n')), [
    'f.yaml: model.layers[0].attention.heads: expected a positive integer, got 0',
  ]);
  assert.deepEqual(issuesOf(model('    - attention: { heads: 2, dropout: 1 }\n')), [
    'f.yaml: model.layers[0].attention.dropout: expected a number ≥ 0 and < 1, got 1',
  ]);
  assert.deepEqual(issuesOf(model('    - transformerBlock: { heads: 2, mpl: 32 }\n')), [
    "f.yaml: model.layers[0].transformerBlock: unknown option 'mpl' (did you mean 'mlp'?); allowed: heads, mlp, dropout, causal, parallel",
  ]);
  assert.deepEqual(issuesOf(model('    - transformerBlock: {}\n')), [
    'f.yaml: model.layers[0].transformerBlock.heads: missing; expected a positive integer',
  ]);
  // heads that do not divide the width: the model builder says so, naming the layer
  assert.throws(
    () => buildModel(jsBackend, parse(model('    - attention: { heads: 3 }\n')).model),
    /model\.layers\[0\] attention: heads: 3 does not divide the 8 features .*use heads: 1, 2, 4, 8/,
  );
});
