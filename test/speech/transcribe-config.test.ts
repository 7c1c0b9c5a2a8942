/**
 * `paratrain transcribe` reads the config from the checkpoint, as `eval` and `predict` do: a first
 * CONFIG.yaml is optional, and with or without it the transcripts are the same. The checkpoint is a
 * CTC model written here with its seeded initial weights (no training: the transcripts need only be
 * the same both ways).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseConfig } from '../../src/config/index.ts';
import { configToYaml } from '../../src/config/writeYaml.ts';
import { buildModel } from '../../src/nn/model.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { saveModelCheckpoint } from '../../src/runtime/checkpoint/modelCheckpoint.ts';
import { transcribe } from '../../src/runtime/infer/transcribe.ts';
import { REPO, runCli } from '../cli/helpers.ts';
import { tmpDir } from './helpers.ts';

const MINI = join(REPO, 'data/speech-mini');

function speechCheckpoint(dir: string) {
  const config = parseConfig({
    model: {
      input: [null, 78],
      layers: [{ dense: { units: 12, activation: 'clippedRelu' } }, { lstm: { units: 8 } }, { dense: { units: 29 } }],
    },
    loss: 'ctc',
    data: { dataset: 'speech', dir: MINI, features: { context: 1 }, cacheDir: join(dir, 'cache') },
    train: { backend: 'js', seed: 3 },
  });
  const model = buildModel(jsBackend, config.model);
  model.initialize(config.train.seed);
  const checkpoint = join(dir, 'model.safetensors');
  saveModelCheckpoint(checkpoint, model, null, { config: JSON.stringify(config) });
  const yaml = join(dir, 'speech.yaml');
  writeFileSync(yaml, configToYaml(config));
  return { config, checkpoint, yaml };
}

const wavs = readFileSync(join(MINI, 'test.csv'), 'utf8')
  .split('\n')
  .slice(1, 3)
  .map((l) => join(MINI, l.split(',')[0]!));

test('transcribe without a config reads the one stored in the checkpoint', async () => {
  const dir = tmpDir();
  const { config, checkpoint, yaml } = speechCheckpoint(dir);
  const given = await transcribe(config, checkpoint, wavs);
  const stored = await transcribe(undefined, checkpoint, wavs);
  assert.deepEqual(stored, given);

  const expected = given.map((t) => `${t.file}\t${t.text}\n`).join('');
  const bare = await runCli(['transcribe', '--checkpoint', checkpoint, ...wavs]);
  assert.equal(bare.code, 0, bare.stderr);
  assert.equal(bare.stdout, expected);
  const withConfig = await runCli(['transcribe', yaml, '--checkpoint', checkpoint, ...wavs]);
  assert.equal(withConfig.code, 0, withConfig.stderr);
  assert.equal(withConfig.stdout, expected, 'a first CONFIG.yaml still works');
});

test('transcribe with a config but no WAV file: one line naming the fix', async () => {
  const dir = tmpDir();
  const { checkpoint, yaml } = speechCheckpoint(dir);
  const r = await runCli(['transcribe', yaml, '--checkpoint', checkpoint]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /^paratrain: transcribe: no WAV files; give the \.wav files to transcribe after the options/);
});
