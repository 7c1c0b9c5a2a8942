import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ADAM, CONV, shardConfig, checkpointJob, resumeJob, startJob, step, type Job } from './shardingHarness.ts';
import { assertClose } from '../util/close.ts';

async function steps(job: Job, n: number): Promise<Float32Array> {
  for (let s = 0; s < n; s++) await step(job);
  return job.replicas[0]!.model.params.slice();
}

const cfg = (devices: number, shard: number) => shardConfig(CONV, ADAM, devices, shard);

test('a sharded run checkpointed mid-run and resumed at the same stage continues bit for bit', async () => {
  for (const shard of [1, 2]) {
    const job = await startJob(cfg(2, shard));
    await steps(job, 3);
    const dir = await checkpointJob(job);
    const straight = await steps(job, 3);
    const resumed = await resumeJob(cfg(2, shard), dir, 2, 3);
    await steps(resumed, 3);
    for (const r of resumed.replicas) assert.deepEqual(r.model.params, straight, `stage ${shard}`);
  }
});

test("a stage-1 checkpoint holds the unsharded optimizer's whole state, and resumes unsharded, at stage 2, and on 4 devices", async () => {
  const sharded = await startJob(cfg(2, 1));
  const plain = await startJob(cfg(2, 0));
  for (const job of [sharded, plain]) await steps(job, 3);
  const dir = await checkpointJob(sharded);
  // the assembled state is the unsharded run's, buffer for buffer, on every device
  const whole = plain.replicas[0]!.optimizer.state();
  for (const r of sharded.replicas) {
    const state = r.optimizer.state();
    assert.equal(state.step, whole.step);
    assert.deepEqual(
      state.buffers.map((b) => [b.name, b.data]),
      whole.buffers.map((b) => [b.name, b.data]),
    );
  }
  const straight = await steps(plain, 3);
  // on the same devices, unsharded or at stage 2: exactly the unsharded run
  for (const shard of [0, 2]) {
    const resumed = await resumeJob(cfg(2, shard), dir, 2, 3);
    const after = await steps(resumed, 3);
    assert.deepEqual(after, straight, `resumed with shard ${shard}`);
  }
  // on 4 devices: sharded and unsharded resume alike (bit for bit), and follow the 2-device run up to
  // summation order (each device sums 2 samples instead of 4)
  const four = await Promise.all([0, 1].map(async (shard) => steps(await resumeJob(cfg(4, shard), dir, 2, 3), 3)));
  assert.deepEqual(four[1], four[0], '4 devices: stage 1 equals unsharded');
  assertClose(four[1]!, straight, { rtol: 1e-4, atol: 1e-6, what: '4 devices against 2' });
});

test('an unsharded checkpoint resumes at stage 2 on the same devices bit for bit', async () => {
  const plain = await startJob(cfg(2, 0));
  await steps(plain, 2);
  const dir = await checkpointJob(plain);
  const straight = await steps(plain, 3);
  const resumed = await resumeJob(cfg(2, 2), dir, 2, 2);
  assert.deepEqual(await steps(resumed, 3), straight);
});
