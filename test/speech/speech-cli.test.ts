/**
 * A speech run end to end on the shipped subset: train(), CER/WER in metrics.jsonl, the run result and the checkpoint's metadata;
 * then `paratrain transcribe` (the command's function, in this process) on WAVs of the held-out test set (the output's format), `eval`'s
 * error rates and the report's error-rate chart.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseConfig } from '../../src/config/index.ts';
import { configToYaml } from '../../src/config/writeYaml.ts';
import { train } from '../../src/runtime/run/train.ts';
import { readCheckpoint } from '../../src/runtime/checkpoint/checkpoint.ts';
import { readDataMetadata } from '../../src/data/metadata.ts';
import { transcribe } from '../../src/runtime/infer/transcribe.ts';
import { runEval } from '../../src/cli/evalCommand.ts';
import { runTranscribe } from '../../src/cli/transcribeCommand.ts';
import { loadReportRuns, renderHtml } from '../../src/report/index.ts';
import { REPO } from '../cli/helpers.ts';
import { tmpDir } from './helpers.ts';
import { syntheticSpeech } from './trainHelpers.ts';
import { shareDataset } from '../../src/data/dataset.ts';

const MINI = join(REPO, 'data/speech-mini');
const TEXT = /^[a-z' ]*$/;

/** What a command prints on stdout (the CLI's own functions, run in this process). */
async function stdoutOf(run: () => Promise<void>): Promise<string> {
  let printed = '';
  const write = process.stdout.write;
  process.stdout.write = ((s: string) => {
    printed += s;
    return true;
  }) as typeof process.stdout.write;
  try {
    await run();
  } finally {
    process.stdout.write = write;
  }
  return printed;
}

test("device threads share a speech dataset's arrays instead of copying them", () => {
  const ds = shareDataset(syntheticSpeech(5));
  const copy = structuredClone(ds); // what posting it to a worker thread does
  copy.speech!.features[3] = 42;
  copy.speech!.labels[1] = 7;
  assert.equal(ds.speech!.features[3], 42);
  assert.equal(ds.speech!.labels[1], 7);
  for (const a of [
    ds.speech!.features,
    ds.speech!.frames,
    ds.speech!.frameOffsets,
    ds.speech!.labels,
    ds.speech!.labelOffsets,
  ])
    assert.ok(a.buffer instanceof SharedArrayBuffer);
});

test('train on speech-mini, then transcribe, eval and report', { timeout: 120_000 }, async () => {
  const dir = tmpDir();
  const raw = {
    model: {
      input: [null, 78],
      layers: [
        { dense: { units: 12, activation: 'clippedRelu' } },
        { lstm: { units: 8, bidirectional: 'concat' } },
        { dense: { units: 29 } },
      ],
    },
    loss: 'ctc',
    optimizer: { adam: { lr: 0.01 } },
    data: {
      dataset: 'speech',
      dir: MINI,
      features: { context: 1 },
      cacheDir: join(dir, 'cache'),
      batchSize: 8,
      batchSizeScope: 'global',
      trainLimit: 16,
      testLimit: 6,
    },
    train: { epochs: 1, backend: 'wasm' },
  };
  const config = parseConfig(raw);
  const result = await train(config, { out: join(dir, 'run') });
  assert.ok(result.testCER! >= 0 && result.testWER! >= 0, `testCER ${result.testCER}, testWER ${result.testWER}`);
  const events = readFileSync(join(dir, 'run/metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  const evalEvent = events.find((e) => e.type === 'eval')!,
    end = events.find((e) => e.type === 'end')!,
    epoch = events.find((e) => e.type === 'epoch')!;
  for (const k of ['testCER', 'testWER', 'valCER', 'valWER'])
    assert.equal(typeof evalEvent[k], 'number', `eval has ${k}`);
  assert.equal(end.testCER, result.testCER);
  assert.equal(typeof epoch.cer, 'number', "the epoch reports the training batches' CER");
  const meta = readDataMetadata(readCheckpoint(result.checkpoint).metadata)!;
  assert.equal(meta.task, 'transcription');
  assert.equal(meta.speech!.alphabet.length, 28);
  assert.equal(meta.speech!.features.context, 1);

  // transcribe: two WAVs of the test set (voices never heard in training), greedy and beam
  const wavs = readFileSync(join(MINI, 'test.csv'), 'utf8')
    .split('\n')
    .slice(1, 3)
    .map((l) => join(MINI, l.split(',')[0]!));
  const greedy = await transcribe(config, result.checkpoint, wavs);
  const beam = await transcribe(config, result.checkpoint, wavs, { beam: 4 });
  for (const t of [...greedy, ...beam]) assert.match(t.text, TEXT);
  const configFile = join(dir, 'speech.yaml');
  writeFileSync(configFile, configToYaml(config));
  const lines = (await stdoutOf(() => runTranscribe(configFile, wavs, { checkpoint: result.checkpoint }))).split('\n');
  assert.equal(lines.pop(), '', 'ends with a newline');
  assert.deepEqual(
    lines.map((l) => l.split('\t')[0]),
    wavs,
    'one line per file, in order',
  );
  for (const [i, l] of lines.entries())
    assert.equal(l.split('\t')[1], greedy[i]!.text, 'file, a tab, the greedy transcript');

  // eval prints the error rates; report charts them
  const r = JSON.parse(
    await stdoutOf(() => runEval(configFile, { checkpoint: result.checkpoint, quiet: true })),
  ) as Record<string, number>;
  assert.equal(r.testSamples, 6);
  assert.equal(r.testCER, result.testCER);
  assert.match(renderHtml(loadReportRuns([result.runDir])), /id="chart-error-rates"/);
});
