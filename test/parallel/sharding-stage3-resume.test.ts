import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  ADAM,
  CONV,
  shardConfig,
  checkpointJob,
  resumeJob,
  startJob,
  step,
  wholeParams,
  type Job,
} from './shardingHarness.ts';
import { assertClose } from '../util/close.ts';

/** `n` more steps; every device's whole weights after them. */
async function steps(job: Job, n: number): Promise<Float32Array[]> {
  for (let s = 0; s < n; s++) await step(job);
  return wholeParams(job);
}

const cfg = (devices: number, shard: number) => shardConfig(CONV, ADAM, devices, shard, { clipGradNorm: 0.05 });

test('a stage-3 run checkpointed mid-run and resumed at stage 3 continues bit for bit', async () => {
  const job = await startJob(cfg(2, 3));
  await steps(job, 3);
  const dir = await checkpointJob(job);
  const straight = await steps(job, 3);
  const after = await steps(await resumeJob(cfg(2, 3), dir, 2, 3), 3);
  for (const p of after) assert.deepEqual(p, straight[0]);
});

test("a stage-3 checkpoint is whole (the unsharded run's weights and optimizer state) and resumes unsharded, at stage 2, and on 4 devices", async () => {
  const sharded = await startJob(cfg(2, 3));
  const plain = await startJob(cfg(2, 0));
  for (const job of [sharded, plain]) await steps(job, 3);
  const dir = await checkpointJob(sharded);
  const whole = plain.replicas[0]!.optimizer.state();
  for (const r of sharded.replicas) {
    assert.deepEqual(r.model.params, plain.replicas[0]!.model.params, 'the whole weights');
    const state = r.optimizer.state();
    assert.equal(state.step, whole.step);
    assert.deepEqual(
      state.buffers.map((b) => [b.name, b.data]),
      whole.buffers.map((b) => [b.name, b.data]),
    );
  }
  const straight = (await steps(plain, 3))[0]!;
  for (const shard of [0, 2]) {
    const after = await steps(await resumeJob(cfg(2, shard), dir, 2, 3), 3);
    assert.deepEqual(after[0], straight, `resumed with shard ${shard}`);
  }
  // on 4 devices: stage 3 and unsharded alike (bit for bit), and the 2-device run up to summation order
  const four = await Promise.all(
    [0, 3].map(async (shard) => (await steps(await resumeJob(cfg(4, shard), dir, 2, 3), 3))[0]!),
  );
  assert.deepEqual(four[1], four[0], '4 devices: stage 3 equals unsharded');
  assertClose(four[1]!, straight, { rtol: 1e-4, atol: 1e-6, what: '4 devices against 2' });
});

test('unsharded and stage-1 checkpoints resume at stage 3 bit for bit, on the same and on another device count', async () => {
  for (const from of [0, 1]) {
    const job = await startJob(cfg(2, from));
    await steps(job, 2);
    const dir = await checkpointJob(job);
    const straight = (await steps(job, 3))[0]!;
    assert.deepEqual((await steps(await resumeJob(cfg(2, 3), dir, 2, 2), 3))[0], straight, `from shard ${from}`);
    const four = await Promise.all(
      [0, 3].map(async (s) => (await steps(await resumeJob(cfg(4, s), dir, 2, 2), 3))[0]!),
    );
    assert.deepEqual(four[1], four[0], `from shard ${from}, on 4 devices`);
  }
});
