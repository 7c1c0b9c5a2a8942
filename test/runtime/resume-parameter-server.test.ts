/**
 * The parameter server's state in checkpoint sets (`server.safetensors`: weights, optimizer slots,
 * version = updates applied = the optimizer's step count) and its return on resume:
 *   - sync on 2 devices stopped at step 7 and resumed ends bit-identical to the uninterrupted run
 *     (sync is deterministic: turns in order; a fresh server optimizer would make it differ);
 *   - async (arrival order, not deterministic): the resumed server carries on counting from the
 *     saved version, and starts with exactly the saved optimizer slots.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { tinyConfig } from '../parallel/helpers.ts';
import { assertSameTensors, crashAndResume, tensorsOf } from './resumeHelpers.ts';
import { completeSets } from '../../src/runtime/checkpoint/checkpointSet.ts';
import { readCheckpoint } from '../../src/runtime/checkpoint/checkpoint.ts';
import { SET_SERVER_FILE, serverStart } from '../../src/runtime/checkpoint/serverState.ts';
import { allocateParameterServer } from '../../src/parallel/parameterServer/shared.ts';
import { buildModel } from '../../src/nn/model.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';

const every = { steps: 4 };
const adam = { adam: { lr: 0.01 } };
const serverVersion = (setDir: string) => Number(readCheckpoint(join(setDir, SET_SERVER_FILE)).metadata.version);

test('sync on 2 devices (Adam on the server): stopped at step 7 and resumed equals the uninterrupted run, bit for bit', async () => {
  const config = tinyConfig({
    train: { epochs: 2, devices: 2, strategy: 'sync', checkpointEvery: every },
    optimizer: adam,
  });
  const { whole, resumed, runDir } = await crashAndResume(config, 7, { rank: 1 });
  assertSameTensors(whole, resumed);
  // 12 steps of 2 devices, each device's turn one server update
  const last = completeSets(runDir).at(-1)!;
  assert.equal(last.state.step, 12);
  assert.equal(serverVersion(last.dir), 24);
});

test('async on 2 devices (Adam on the server): the resumed server counts on from the saved version with the saved optimizer slots', async () => {
  const config = tinyConfig({
    train: { epochs: 2, devices: 2, strategy: 'async', checkpointEvery: every },
    optimizer: adam,
  });
  // device 0 fails: async goes on without any other device (a lost device, not a crash)
  const { runDir } = await crashAndResume(config, 7, { rank: 0 });
  const sets = completeSets(runDir);
  // sets at 4 (the one resumed from), 8 and 12 (keepLast 3)
  assert.deepEqual(
    sets.map((s) => s.state.step),
    [4, 8, 12],
  );
  // pushEvery 1, no staleness bound: every device-step is one update. Device 0 writes an async set
  // alone (no device waits for all: one may be lost), so the set at 4 holds device 0's 4 updates and
  // as many of device 1's as had arrived — device 1 never waits, so on a loaded machine that may be
  // any of its 12 steps; the resumed run counts on from it with at least device 0's 8 more updates
  const atFour = serverVersion(sets[0]!.dir),
    atEnd = serverVersion(sets[2]!.dir);
  assert.ok(atFour >= 4 && atFour <= 4 + 12, `version at step 4: ${atFour}`);
  assert.ok(atEnd >= atFour + 8 && atEnd <= atFour + 16, `version at the end ${atEnd} counts on from ${atFour}`);
  // a server started from the set holds exactly the saved weights, Adam moments and step
  const saved = tensorsOf(join(sets[2]!.dir, SET_SERVER_FILE));
  const model = buildModel(jsBackend, config.model);
  const start = serverStart(
    { runDir, processes: 1, configHash: '', resume: sets[2]!, initFrom: null },
    model,
    config.optimizer,
  );
  assert.equal(start.version, atEnd);
  assert.equal(start.optimizer!.step, atEnd);
  const memory = allocateParameterServer(model.params.length, config.optimizer, start, 2);
  const n = model.params.length;
  const slots = new Float32Array(memory.optimizerState);
  const restored = new Map<string, Float32Array>([
    ['params', new Float32Array(memory.params)],
    ['optimizer.m', slots.slice(0, n)],
    ['optimizer.v', slots.slice(n, 2 * n)],
  ]);
  assertSameTensors(saved, restored);
  assert.ok(
    saved.get('optimizer.v')!.some((x) => x !== 0),
    'the saved second moment is not all zero',
  );
});
