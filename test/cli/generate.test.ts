/**
 * `paratrain generate`: the sampling rule on given scores (temperature 0 and top-k 1 are the
 * arg-max, the draw follows the softmax's cumulative weights, a seed repeats a text); a language
 * model with known weights continued from its checkpoint, reading the scores at the prompt's last
 * position; the errors for a prompt character outside the vocabulary and a checkpoint that is not
 * a text model; and, once the transformer layers exist, a model trained on a text and continued.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseConfig, type ConfigInput } from '../../src/config/index.ts';
import { LAYER_TYPES, LOSS_TYPES } from '../../src/config/schema/index.ts';
import { writeCheckpoint } from '../../src/runtime/checkpoint/checkpoint.ts';
import { DATA_METADATA_KEY } from '../../src/data/metadata.ts';
import { argmax, checkSampling, sampleToken } from '../../src/runtime/infer/sampling.ts';
import { loadTextGenerator } from '../../src/runtime/infer/generate.ts';
import { train } from '../../src/index.ts';
import { runCli, tmpDir } from './helpers.ts';

const dir = tmpDir('paratrain-generate-');
const us = Array.from({ length: 50 }, (_, i) => (i + 0.5) / 50);

test('sampling: temperature 0 and top-k 1 take the arg-max; otherwise the draw follows softmax(scores / temperature) over the top k', () => {
  const logits = Float32Array.of(0.3, 2.1, -1, 2.0, 0.5);
  assert.equal(argmax(logits), 1);
  for (const u of us) {
    assert.equal(sampleToken(logits, { temperature: 0 }, u), 1);
    assert.equal(sampleToken(logits, { temperature: 1e-3 }, u), 1, 'temperature → 0 is the arg-max');
    assert.equal(sampleToken(logits, { temperature: 5, topK: 1 }, u), 1);
  }
  // equal best scores: the lower id
  assert.equal(sampleToken(Float32Array.of(1, 3, 3), { temperature: 0 }, 0.9), 1);
  // probabilities 0.5, 0.3, 0.2 at temperature 1: u picks by the cumulative weights
  const p = Float32Array.from([0.5, 0.3, 0.2], Math.log);
  assert.deepEqual(
    [0.1, 0.49, 0.51, 0.79, 0.81, 0.99].map((u) => sampleToken(p, { temperature: 1 }, u)),
    [0, 0, 1, 1, 2, 2],
  );
  // top 2 of them: 0.5 / 0.8 and 0.3 / 0.8; the third is never drawn
  assert.deepEqual(
    [0.6, 0.64, 0.99].map((u) => sampleToken(p, { temperature: 1, topK: 2 }, u)),
    [0, 1, 1],
  );
  // temperature 2 flattens: weights ∝ √p
  const w = [0.5, 0.3, 0.2].map(Math.sqrt);
  const first = w[0]! / (w[0]! + w[1]! + w[2]!);
  assert.equal(sampleToken(p, { temperature: 2 }, first - 0.01), 0);
  assert.equal(sampleToken(p, { temperature: 2 }, first + 0.01), 1);
  // large scores do not overflow
  assert.equal(sampleToken(Float32Array.of(1000, 999), { temperature: 1 }, 0.5), 0);
  assert.throws(() => sampleToken(Float32Array.of(1, NaN), { temperature: 1 }, 0.5), /score of token 1 is NaN/);
  assert.throws(() => checkSampling({ temperature: -1 }), /--temperature: expected a number ≥ 0/);
  assert.throws(() => checkSampling({ temperature: 1, topK: 0 }), /--top-k: expected a positive integer/);
});

const VOCAB = [...'\nabcde'];
const T = 4;

/**
 * A language model with input [T, 1] and one dense layer to the 6 characters at each position, set
 * so that the most likely character after id x is id x + 1 (the last id: itself): scores
 * 2(v − 1)x − (v − 1)², which are −(x − (v − 1))² up to a term the same for every v.
 */
function writeSuccessorModel(path: string, metadata: Record<string, string> = {}): string {
  const v = VOCAB.length;
  const config = parseConfig({
    model: { input: [T, 1], layers: [{ dense: { units: v } }] },
    train: { backend: 'js' },
    data: { dataset: 'text', file: 'unused.txt' },
  } satisfies ConfigInput);
  const kernel = Float32Array.from({ length: v }, (_, k) => 2 * (k - 1));
  const bias = Float32Array.from({ length: v }, (_, k) => -((k - 1) ** 2));
  const data = { task: 'language', inputShape: [T], text: { vocabulary: VOCAB, fingerprint: 'sha256:00' } };
  writeCheckpoint(
    path,
    [
      { name: 'layers.0.kernel', shape: [1, v], data: kernel },
      { name: 'layers.0.bias', shape: [v], data: bias },
    ],
    { config: JSON.stringify(config), [DATA_METADATA_KEY]: JSON.stringify(data), ...metadata },
  );
  return path;
}

test('the CLI prints the prompt and its continuation, read at the prompt’s last position; the draws repeat with a seed', async () => {
  const checkpoint = writeSuccessorModel(join(dir, 'successor.safetensors'));
  const greedy = await runCli([
    'generate',
    '--checkpoint',
    checkpoint,
    '--prompt',
    'ab',
    '--length',
    '6',
    '--temperature',
    '0',
  ]);
  assert.equal(greedy.code, 0, greedy.stderr);
  // after 'b' (id 2) comes c, d, e, then e again; padding on the right would have given 'a' (after id 0)
  assert.equal(greedy.stdout, 'abcdeeee\n');

  const generator = await loadTextGenerator(checkpoint);
  assert.equal(generator.context, T);
  // a prompt longer than the context: its last T characters are read
  assert.equal(generator.generate('eeeeeeeab', { length: 3, temperature: 0, seed: 1 }), 'cde');
  assert.equal(generator.generate('a', { length: 3, temperature: 1, topK: 1, seed: 9 }), 'bcd');
  // drawn at temperature 1: a seed repeats the text, another seed gives another
  const drawn = (seed: number) => generator.generate('a', { length: 40, temperature: 1, seed });
  assert.equal(drawn(3), drawn(3));
  assert.notEqual(drawn(3), drawn(4));
  const streamed: string[] = [];
  const text = generator.generate('a', { length: 5, temperature: 1, seed: 3, onText: (c) => streamed.push(c) });
  assert.equal(streamed.join(''), text);
  assert.equal(text, drawn(3).slice(0, 5));
  assert.equal(generator.generate('a', { length: 0, temperature: 1, seed: 3 }), '');
});

test('bad input: a prompt character outside the vocabulary, an empty prompt, a checkpoint that is no text model', async () => {
  const checkpoint = writeSuccessorModel(join(dir, 'errors.safetensors'));
  const r = await runCli(['generate', '--checkpoint', checkpoint, '--prompt', 'abz']);
  assert.equal(r.code, 1);
  assert.match(
    r.stderr,
    /--prompt \(character 3\): character 'z' \(U\+007A\) is not in the vocabulary of 6 characters; the model knows only the characters of its training text: "\\nabcde"/,
  );
  assert.equal(r.stdout, '', 'nothing is printed before the checks');
  const generator = await loadTextGenerator(checkpoint);
  assert.throws(() => generator.generate('', { length: 1, temperature: 1, seed: 1 }), /--prompt: empty/);
  assert.throws(() => generator.generate('a', { length: -1, temperature: 1, seed: 1 }), /--length: expected/);

  const plain = join(dir, 'plain.safetensors');
  const config = parseConfig({ model: { input: [T], layers: [{ dense: { units: 3 } }] }, train: { backend: 'js' } });
  writeCheckpoint(
    plain,
    [
      { name: 'layers.0.kernel', shape: [T, 3], data: new Float32Array(T * 3) },
      { name: 'layers.0.bias', shape: [3], data: new Float32Array(3) },
    ],
    {
      config: JSON.stringify(config),
      [DATA_METADATA_KEY]: JSON.stringify({ task: 'classification', inputShape: [T] }),
    },
  );
  await assert.rejects(loadTextGenerator(plain), /records no text vocabulary .* data: \{ dataset: text \}/);
  const bad = await runCli(['generate', '--checkpoint', plain, '--prompt', 'a', '--top-k', '0']);
  assert.match(bad.stderr, /--top-k: expected a positive integer, got '0'/);
});

const MISSING = [
  ...['embedding', 'positionEncoding', 'transformerBlock'].filter((l) => !(LAYER_TYPES as string[]).includes(l)),
  ...['tokenCrossEntropy'].filter((l) => !(LOSS_TYPES as string[]).includes(l)),
];

test('a transformer trained on a repeating text continues it', {
  skip: MISSING.length ? `needs the layers and loss ${MISSING.join(', ')}, which do not exist yet` : false,
}, async () => {
  writeFileSync(join(dir, 'cycle.txt'), 'abcd\n'.repeat(300));
  const result = await train(
    parseConfig({
      model: {
        input: [16],
        layers: [
          { embedding: { vocab: 5, dim: 16 } },
          { positionEncoding: { encoding: 'learned' } },
          { transformerBlock: { heads: 2 } },
          { layerNorm: {} },
          { dense: { units: 5 } },
        ],
      },
      loss: 'tokenCrossEntropy',
      optimizer: { adam: { lr: 0.01 } },
      data: { dataset: 'text', dir, file: 'cycle.txt', windows: 'random', batchSize: 16 },
      train: { epochs: 8, backend: 'js', seed: 1 },
    } as ConfigInput),
    { out: join(dir, 'run'), log: () => {} },
  );
  const r = await runCli([
    'generate',
    '--checkpoint',
    result.checkpoint,
    '--prompt',
    'abcd\nab',
    '--length',
    '12',
    '--temperature',
    '0',
  ]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, 'abcd\nabcd\nabcd\nabcd\n');
});
