/**
 * train.best: RUN_DIR/model-best.safetensors is written when the watched metric improves, and only
 * then; its metadata names the evaluation; the record lives in checkpoint sets, so a resumed run
 * ends with the same best file as an uninterrupted one and never replaces a better best by a worse one.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { readCheckpoint } from '../../src/runtime/checkpoint/checkpoint.ts';
import { latestCompleteSet, SET_STATE_FILE } from '../../src/runtime/checkpoint/checkpointSet.ts';
import { MetricTracker } from '../../src/runtime/events/tracking.ts';
import { trainOnData } from '../../src/runtime/run/train.ts';
import { tmpDir } from '../cli/helpers.ts';
import { evalConfig, eventsOf, ofType, splitData, trainSplit } from './evalHelpers.ts';
import { assertSameTensors, tensorsOf } from './resumeHelpers.ts';

test('a tracker improves only by more than minDelta, never on NaN, and ignores an evaluation it has recorded', () => {
  const t = new MetricTracker({ metric: 'valLoss', mode: 'min' }, 0.01);
  assert.equal(t.update(NaN, 0, 10), 'worse');
  assert.equal(t.update(1.0, 1, 20), 'improved');
  assert.equal(t.update(0.995, 2, 30), 'worse', 'less than minDelta better');
  assert.equal(t.update(0.98, 3, 40), 'improved');
  assert.equal(t.update(0.5, 3, 40), 'repeat', 'the same step again (a resumed run re-evaluating)');
  assert.deepEqual(t.state, {
    metric: 'valLoss',
    mode: 'min',
    best: 0.98,
    bestEpoch: 3,
    bestStep: 40,
    wait: 0,
    lastStep: 40,
  });
  const up = new MetricTracker({ metric: 'valAccuracy', mode: 'max' }, 0, t.state);
  assert.equal(up.state.best, null, 'a record of another metric is not taken over');
  assert.equal(up.update(0.5, 0, 1), 'improved');
  assert.equal(up.update(0.5, 1, 2), 'worse', 'equal is no improvement');
  assert.equal(up.state.wait, 1);
});

test('model-best.safetensors follows the improvements of the watched metric, and only those', async () => {
  const dir = tmpDir('paratrain-best-');
  const result = await trainSplit(evalConfig(dir, { train: 'epochs: 4, best: { metric: valLoss }' }), {
    out: join(dir, 'run'),
  });
  const events = eventsOf(result.runDir);
  let best = Infinity;
  const improved: number[] = [];
  for (const e of ofType(events, 'eval'))
    if ((e.valLoss as number) < best) {
      best = e.valLoss as number;
      improved.push(e.step as number);
    }
  const written = ofType(events, 'best');
  assert.deepEqual(
    written.map((e) => e.step),
    improved,
    'a best event exactly where valLoss improved',
  );
  const last = written.at(-1)!;
  assert.equal(last.value, best);
  const file = join(result.runDir, 'model-best.safetensors');
  const { metadata, tensors } = readCheckpoint(file);
  assert.deepEqual(
    [metadata['best.metric'], metadata['best.mode'], Number(metadata['best.value']), metadata.step, metadata.epoch],
    ['valLoss', 'min', best, String(last.step), String((last.epoch as number) + 1)],
  );
  assert.ok(![...tensors.keys()].some((n) => n.startsWith('optimizer.')), 'weights and state only');
  assert.deepEqual(result.bestCheckpoint, {
    path: file,
    metric: 'valLoss',
    mode: 'min',
    value: best,
    epoch: last.epoch,
    step: last.step,
  });
  const state = JSON.parse(readFileSync(join(latestCompleteSet(result.runDir)!.dir, SET_STATE_FILE), 'utf8'));
  assert.equal(state.tracking.best.metric, 'valLoss', 'the record is in state.json');
});

test('crashed and resumed, a run ends with the same best checkpoint as an uninterrupted one', async () => {
  const dir = tmpDir('paratrain-best-');
  const config = evalConfig(dir, { train: 'epochs: 4, best: { metric: valLoss }' });
  const data = await splitData(config);
  const whole = await trainOnData(config, data, { out: join(dir, 'whole') });
  const runDir = join(dir, 'crashed');
  // the set at step 24 was taken before epoch 2's evaluation: the resumed run evaluates it again first
  await assert.rejects(trainOnData(config, data, { out: runDir, failAt: { rank: 0, step: 30 } }), /injected failure/);
  const resumed = await trainOnData(config, data, { resume: runDir });
  assert.deepEqual(resumed.bestCheckpoint, { ...whole.bestCheckpoint, path: join(runDir, 'model-best.safetensors') });
  assertSameTensors(tensorsOf(join(runDir, 'model-best.safetensors')), tensorsOf(whole.bestCheckpoint!.path));
  assertSameTensors(tensorsOf(resumed.checkpoint), tensorsOf(whole.checkpoint));
});

test('a resumed run keeps its best-so-far: a worse evaluation after the resume does not replace model-best', async () => {
  const dir = tmpDir('paratrain-best-');
  const config = evalConfig(dir, { train: 'epochs: 2, best: { metric: valLoss }' });
  const data = await splitData(config);
  const first = await trainOnData(config, data, { out: join(dir, 'run') });
  const bestFile = first.bestCheckpoint!.path;
  // make the record unbeatable (as if an earlier evaluation had been far better): nothing after the resume may replace the file
  const set = latestCompleteSet(first.runDir)!;
  const statePath = join(set.dir, SET_STATE_FILE);
  const state = JSON.parse(readFileSync(statePath, 'utf8'));
  writeFileSync(
    statePath,
    JSON.stringify({ ...state, tracking: { best: { ...state.tracking.best, best: -1, bestEpoch: 0, bestStep: 12 } } }),
  );
  const before = readFileSync(bestFile);
  const resumed = await trainOnData({ ...config, train: { ...config.train, epochs: 4 } }, data, {
    resume: first.runDir,
  });
  const attempt = eventsOf(first.runDir).slice(eventsOf(first.runDir).findIndex((e) => e.type === 'resume'));
  assert.equal(ofType(attempt, 'best').length, 0, 'no evaluation beat the record');
  assert.ok(readFileSync(bestFile).equals(before), 'model-best.safetensors untouched');
  assert.equal(resumed.bestCheckpoint!.step, first.bestCheckpoint!.step);

  // the control: without a record (nor a file to take it from) the resumed run writes a best of its own
  const again = await trainOnData(config, data, { out: join(dir, 'control') });
  const s2 = join(latestCompleteSet(again.runDir)!.dir, SET_STATE_FILE);
  const { tracking: _, ...bare } = JSON.parse(readFileSync(s2, 'utf8'));
  writeFileSync(s2, JSON.stringify(bare));
  rmSync(again.bestCheckpoint!.path);
  await trainOnData({ ...config, train: { ...config.train, epochs: 4 } }, data, { resume: again.runDir });
  const control = eventsOf(again.runDir);
  assert.ok(ofType(control.slice(control.findIndex((e) => e.type === 'resume')), 'best').length > 0);
});
