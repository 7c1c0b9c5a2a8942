import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig, parseYaml, toYamlForm, ConfigError } from '../../src/config/index.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';
import type { Dataset } from '../../src/data/dataset.ts';
import { checkLanguageRun } from '../../src/runtime/run/languageChecks.ts';
import { checkLossMatchesData, checkOutputUnits } from '../../src/runtime/run/lossChecks.ts';

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
const model = (layers: string, rest = 'loss: tokenCrossEntropy\n') =>
  `model:\n  input: [8]\n  layers:\n${layers}${rest}`;
const GPT =
  '    - embedding: { vocab: 65, dim: 16 }\n    - positionEncoding: { encoding: sinusoidal }\n    - tiedEmbedding: {}\n';

test('token layers and tokenCrossEntropy: normalised, the tied vocab filled from the embedding, written back as parsed', () => {
  const config = parse(model(GPT));
  assert.deepEqual(config.model.layers, [
    { type: 'embedding', vocab: 65, dim: 16 },
    { type: 'positionEncoding', encoding: 'sinusoidal' },
    { type: 'tiedEmbedding', vocab: 65 },
  ]);
  assert.deepEqual(config.loss, { type: 'tokenCrossEntropy' });
  assert.deepEqual(parseConfig(toYamlForm(config)), config);
  // learned positions by default (GPT-2's); the embedding's vocab may be left for the run to name
  const plain = parse(model('    - embedding: { dim: 16 }\n    - positionEncoding: {}\n    - dense: { units: 65 }\n'));
  assert.deepEqual(plain.model.layers.slice(0, 2), [
    { type: 'embedding', dim: 16 },
    { type: 'positionEncoding', encoding: 'learned' },
  ]);
  assert.deepEqual(parseConfig(toYamlForm(plain)), plain);
});

test('an embedding past the first layer, a tiedEmbedding without one or with another vocab, a softmax last: refused', () => {
  assert.deepEqual(issuesOf(model('    - dense: { units: 4 }\n    - embedding: { vocab: 5, dim: 4 }\n')), [
    'f.yaml: model.layers[1].embedding: an embedding takes the token ids, so it must be the first layer (model.layers[0])',
  ]);
  assert.match(
    issuesOf(model('    - dense: { units: 4 }\n    - tiedEmbedding: {}\n')).join('\n'),
    /model\.layers\[1\]\.tiedEmbedding: shares the weights of the model’s embedding, but model\.layers\[0\] is not an embedding/,
  );
  assert.deepEqual(issuesOf(model('    - embedding: { vocab: 5, dim: 4 }\n    - tiedEmbedding: { vocab: 6 }\n')), [
    "f.yaml: model.layers[1].tiedEmbedding.vocab: is 6 but the embedding it shares (model.layers[0]) has vocab 5; leave it out (it is the embedding's)",
  ]);
  assert.match(
    issuesOf(model('    - embedding: { vocab: 5, dim: 4 }\n    - dense: { units: 5 }\n    - softmax: {}\n')).join('\n'),
    /tokenCrossEntropy takes logits and applies softmax itself, but model\.layers\[2\] is a softmax layer/,
  );
});

/** A text dataset as data/textWindows.ts makes it: windows of 8 ids, a vocabulary of 65. */
const text: Dataset = {
  name: 'input.txt (training part)',
  images: new Float32Array(16),
  labels: new Int32Array(16),
  count: 2,
  sampleShape: [8],
  classes: 65,
  task: 'language',
  labelsPerSample: 8,
};

test('a language run: the embedding’s vocab must be the text’s vocabulary size, named in the error', () => {
  const config = (layers: string) => parse(model(layers));
  assert.throws(
    () => checkLanguageRun(config('    - embedding: { dim: 16 }\n    - dense: { units: 65 }\n'), { train: text }),
    {
      message:
        'model.layers[0].embedding.vocab: not set; the vocabulary of input.txt (training part) has 65 tokens: set embedding: { vocab: 65, dim: 16 }',
    },
  );
  assert.throws(
    () =>
      checkLanguageRun(config('    - embedding: { vocab: 64, dim: 16 }\n    - dense: { units: 65 }\n'), {
        train: text,
      }),
    /embedding\.vocab: 64, but the vocabulary of input\.txt \(training part\) has 65 tokens .*set embedding: \{ vocab: 65, dim: 16 \}/,
  );
  checkLanguageRun(config(GPT), { train: text });
});

test('a language run: tokenCrossEntropy only on a text dataset, outputs [T, vocab]', () => {
  const gpt: RunConfig = parse(model(GPT));
  checkLossMatchesData(gpt, text, [8, 65]);
  checkOutputUnits(gpt, [8, 65], { train: text });
  assert.throws(() => checkOutputUnits(gpt, [8, 64], { train: text }), {
    message:
      "model.layers[2]: the model gives 8×64 scores per sample, but a language model gives 8×65: a score per token of input.txt (training part)'s vocabulary (65) at each of its 8 positions; end with dense: { units: 65 } or tiedEmbedding: {} on the sequence",
  });
  const images: Dataset = { ...text, name: 'digits', task: 'classification', classes: 10, labelsPerSample: 1 };
  assert.throws(
    () => checkLossMatchesData(gpt, images, [8, 65]),
    /loss: tokenCrossEntropy trains on a text dataset \(the next token at every position of a window; data: \{ dataset: text \}\), but digits is a classification dataset/,
  );
  const classifier = parse(model('    - dense: { units: 65 }\n', 'loss: softmaxCrossEntropy\n'));
  assert.throws(() => checkLossMatchesData(classifier, text, [65]), /use loss: tokenCrossEntropy for this data/);
});
