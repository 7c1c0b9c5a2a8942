/**
 * `TrainOptions.log` receives the notes for people that the command line prints: which data the
 * run trains on (the `start` event's dataSource, once), before the first epoch.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { tinyConfig } from '../parallel/helpers.ts';
import { train, type TrainEvent } from '../../src/index.ts';
import { freshDir } from './resumeHelpers.ts';

test('log receives the data-source note, once, before the first epoch', async () => {
  const order: string[] = [];
  let source = '';
  await train(tinyConfig({ train: { backend: 'js' } }), {
    out: freshDir(),
    log: (m) => order.push(`log ${m}`),
    onEvent: (e: TrainEvent) => {
      if (e.type === 'start') source = e.dataSource;
      if (e.type === 'start' || e.type === 'epoch') order.push(e.type);
    },
  });
  assert.ok(source.includes('fashion-mnist-subset'), source);
  const notes = order.filter((l) => l.startsWith('log data: '));
  assert.deepEqual(notes, [`log data: ${source}`]);
  assert.ok(order.indexOf(notes[0]!) < order.indexOf('epoch'), order.join('\n'));
});
