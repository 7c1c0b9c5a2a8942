/**
 * A resume honours or refuses every change to the run's config (runtime/run/resumeChanges.ts): each
 * honoured change is said in one line (`resume: optimizer.lr 0.002 → 0.001`), each refused one is an
 * error line naming both values and the fix; nothing is silently ignored.
 */
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { train } from '../../src/runtime/run/train.ts';
import { loadConfig } from '../../src/config/load.ts';
import { readMetrics } from '../../src/runtime/events/metrics.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';
import { DECIDED_FIELDS, verdictOf } from '../../src/runtime/run/resumeChanges.ts';
import { parseConfig } from '../../src/config/load.ts';
import { freshDir, writeResumeConfig } from './resumeHelpers.ts';
import { runCli, stderrLines, tmpDir } from '../cli/helpers.ts';

/** A run of the resume config (1 device: 60 steps an epoch, sets every 5 steps) crashed at step 12: its newest set is step 10. */
let oneDevice: { runDir: string; config: () => RunConfig; path: string };
/** The same on 2 devices under hybrid (30 steps an epoch), crashed at step 7: its newest set is step 5. */
let twoDevices: { runDir: string; config: () => RunConfig };

before(async () => {
  const dir = tmpDir();
  const path = writeResumeConfig(dir);
  oneDevice = { runDir: freshDir(), config: () => loadConfig(path), path };
  await assert.rejects(train(oneDevice.config(), { out: oneDevice.runDir, failAt: { rank: 0, step: 12 } }), /injected/);
  const path2 = writeResumeConfig(tmpDir(), { devices: 2 });
  twoDevices = { runDir: freshDir(), config: () => loadConfig(path2) };
  await assert.rejects(
    train(twoDevices.config(), { out: twoDevices.runDir, failAt: { rank: 1, step: 7 } }),
    /injected/,
  );
});

/** The error of resuming `runDir` with `config` (the resume must be refused before any training). */
async function refusal(runDir: string, config: RunConfig): Promise<string> {
  let message = '';
  await assert.rejects(train(config, { resume: runDir, log: () => {} }), (err: Error) => {
    message = err.message;
    return true;
  });
  return message;
}

test('a changed batch size is refused in one line naming both, where it was silently ignored', async () => {
  const config = oneDevice.config();
  config.data.batchSize = 4;
  const message = await refusal(oneDevice.runDir, config);
  assert.equal(message.split('\n').length, 1, message);
  assert.match(
    message,
    /^--resume .*: data\.batchSize 8 → 4, a global batch of 8 → 4 on the run's 1 device: a resumed run keeps its global batch .*; resume with the run's batch \(the run's own config, .*config\.yaml\), or start a new run from its weights with --init-from .*step-00000010\/model\.safetensors$/,
  );
});

test('a changed strategy is refused naming both strategies, before any work (not "the strategy state has no \'start\'")', async () => {
  const config = twoDevices.config();
  config.train.strategy = { type: 'bmuf', period: 1, blockLr: 1, nesterov: false };
  const message = await refusal(twoDevices.runDir, config);
  assert.match(
    message,
    /^--resume .*: train\.strategy hybrid → bmuf: the checkpoint set holds hybrid's state, which bmuf cannot take up; resume with --strategy hybrid, or start a new run from its weights with --init-from .*step-00000005\/model\.safetensors$/,
  );
});

test('another optimizer, loss, seed or training data: refused, one line each, all at once', async () => {
  const config = oneDevice.config();
  config.optimizer = { type: 'sgd', lr: 0.002, momentum: 0.9, nesterov: false, weightDecay: 0 };
  config.loss = { type: 'softmaxCrossEntropy', labelSmoothing: 0.1 };
  config.train.seed = 6;
  config.data.trainLimit = 240;
  const lines = (await refusal(oneDevice.runDir, config)).split('\n');
  assert.equal(lines.length, 4, lines.join('\n'));
  assert.ok(lines.every((l) => l.startsWith(`--resume ${oneDevice.runDir}: `) && l.includes('--init-from')));
  assert.match(
    lines.join('\n'),
    /loss\.labelSmoothing 0 → 0\.1: the checkpoint set was trained with 0, and a resumed run keeps the loss it trained with/,
  );
  assert.match(
    lines.join('\n'),
    /optimizer \{ adam: \{ lr: 0\.002, .* \} \} → \{ sgd: \{ lr: 0\.002, momentum: 0\.9, .* \} \}: .*keeps the optimizer's kind/,
  );
  assert.match(lines.join('\n'), /data\.trainLimit 480 → 240: .*keeps its training data and their order/);
  assert.match(lines.join('\n'), /train\.seed 5 → 6: .*keeps its seed/);
});

test('lr, epochs, evaluation and checkpoint cadence, clipping: honoured, one line each, and the run trains with them', async () => {
  const runDir = freshDir();
  await assert.rejects(train(oneDevice.config(), { out: runDir, failAt: { rank: 0, step: 12 } }), /injected/);
  const config = oneDevice.config();
  config.optimizer = { ...config.optimizer, lr: 0.001 };
  config.train.epochs = 1;
  config.train.evalEvery = 1;
  config.train.checkpointEvery = { steps: 20 };
  config.train.clipGradNorm = 5;
  const lines: string[] = [];
  await train(config, { resume: runDir, log: (m) => lines.push(m) });
  assert.deepEqual(
    lines.filter((l) => l.startsWith('resume: ')),
    [
      'resume: optimizer.lr 0.002 → 0.001',
      'resume: train.epochs 2 → 1',
      'resume: train.evalEvery 0 → 1',
      'resume: train.checkpointEvery.steps 5 → 20',
      'resume: train.clipGradNorm none → 5',
    ],
  );
  const events = readMetrics(join(runDir, 'metrics.jsonl'));
  const resumed = events.slice(events.findIndex((e) => e.type === 'resume')).filter((e) => e.type === 'step');
  assert.equal(resumed.length, 50, 'steps 10 to 59: one epoch');
  assert.ok(resumed.every((e) => e.lr === 0.001 && e.gradNorm !== undefined));
});

test('the run resumed on another device count says so, and that its global batch stays; hybrid resumes on one device', async () => {
  const lines: string[] = [];
  const config = twoDevices.config();
  config.train.devices = 1;
  config.train.epochs = 1;
  await train(config, { resume: twoDevices.runDir, log: (m) => lines.push(m) });
  assert.deepEqual(
    lines.filter((l) => l.startsWith('resume: ')),
    [
      "resume: devices 2 → 1: the global batch (16, where data.batchSize 8 per device would make 8), the data order and the learning rate stay the run's",
      'resume: train.epochs 2 → 1',
    ],
  );
});

test('more epochs on a finished cosine schedule: one line says where the learning rate goes', async () => {
  const config = oneDevice.config();
  config.schedule = { warmupSteps: 0, decay: { type: 'cosine', minLr: 0 } };
  config.train.epochs = 1;
  config.train.checkpointEvery = { steps: 30 };
  const runDir = freshDir();
  await train(config, { out: runDir });
  const more = { ...config, train: { ...config.train, epochs: 2 } };
  const lines: string[] = [];
  await train(more, { resume: runDir, log: (m) => lines.push(m) });
  assert.deepEqual(
    lines.filter((l) => l.startsWith('resume: ')),
    [
      'resume: train.epochs 1 → 2 spreads the cosine decay over 2 epochs: the learning rate at step 61 is 0.001, not 0, where the finished schedule had ended',
    ],
  );
});

test('every train field has a verdict (a new one is refused until decided)', () => {
  const base = { model: { input: [4], layers: [{ dense: { units: 2 } }] } };
  let allowed: string[] = [];
  try {
    parseConfig({ ...base, train: { __field: 1 } });
  } catch (err) {
    allowed = /allowed: (.+)$/m.exec((err as Error).message)![1]!.split(', ');
  }
  assert.ok(allowed.length > 10, allowed.join(', '));
  const undecided = allowed.filter((k) => !DECIDED_FIELDS.includes(`train.${k}`));
  assert.deepEqual(undecided, []);
  assert.equal(verdictOf('optimizer.lr'), 'honour');
  assert.equal(verdictOf('optimizer.type'), 'refuse');
  assert.equal(verdictOf('data.normalize'), 'refuse');
  assert.equal(verdictOf('train.somethingNew'), 'refuse');
});

test('paratrain train --resume: --batch-size is refused in one line; --lr is honoured and said', async () => {
  const runDir = join(tmpDir(), 'run');
  await assert.rejects(train(oneDevice.config(), { out: runDir, failAt: { rank: 0, step: 12 } }), /injected/);
  const refused = await runCli(['train', '--resume', runDir, '--batch-size', '4'], { timeoutMs: 120_000 });
  assert.equal(refused.code, 1, refused.stderr);
  const lines = stderrLines(refused);
  assert.equal(lines.length, 1, lines.join('\n'));
  assert.match(
    lines[0]!,
    /^paratrain: --resume .*: data\.batchSize 8 → 4, a global batch of 8 → 4 on the run's 1 device: .*--init-from/,
  );
  const honoured = await runCli(['train', '--resume', runDir, '--lr', '0.001', '--epochs', '1'], {
    timeoutMs: 240_000,
  });
  assert.equal(honoured.code, 0, honoured.stderr);
  assert.match(honoured.stderr, /^resume: optimizer\.lr 0\.002 → 0\.001$/m);
});
