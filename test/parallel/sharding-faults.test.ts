import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ADAM, CONV, MLP, MOMENTUM, shardConfig, startJob, step, trainJob } from './shardingHarness.ts';
import { assertClose } from '../util/close.ts';

test('hybrid shard 1 and 2 with clipGradNorm equal unsharded hybrid (and clip)', async () => {
  // a bound below every step's norm, so every step is clipped
  const train = { clipGradNorm: 0.05 };
  for (const devices of [2, 4]) {
    const base = await startJob(shardConfig(MLP, ADAM, devices, 0, train));
    const jobs = await Promise.all([1, 2].map((shard) => startJob(shardConfig(MLP, ADAM, devices, shard, train))));
    for (let s = 0; s < 4; s++) {
      await step(base);
      const norm = base.replicas[0]!.takeGradNorm()!;
      assert.ok(norm > 0.05, `step ${s} is clipped (norm ${norm})`);
      for (const [k, job] of jobs.entries()) {
        await step(job);
        // every device reports the same global norm; stage 2 sums it from the devices' parts
        for (const [r, replica] of job.replicas.entries())
          assertClose([replica.takeGradNorm()!], [norm], {
            rtol: 1e-12,
            atol: 0,
            what: `stage ${k + 1} device ${r} norm`,
          });
      }
    }
    // stage 1 clips the whole reduced gradient as hybrid does: bit for bit. Stage 2 adds the norm's
    // squares per device (float64, then across devices), so the clip factor may differ in its last
    // bits from hybrid's one pass; after 4 Adam steps the weights agree to float32 rounding.
    const want = base.replicas[0]!.model.params;
    for (const replica of jobs[0]!.replicas)
      assert.deepEqual(replica.model.params, want, `stage 1, ${devices} devices`);
    for (const replica of jobs[1]!.replicas)
      assertClose(replica.model.params, want, { rtol: 1e-6, atol: 1e-7, what: `stage 2, ${devices} devices` });
  }
});

test('hybrid shard 1 and 2: a NaN loss on one device skips the step on every device', async () => {
  for (const shard of [1, 2]) {
    const job = await startJob(shardConfig(CONV, MOMENTUM, 4, shard));
    const base = await startJob(shardConfig(CONV, MOMENTUM, 4, 0));
    for (const j of [job, base]) await step(j, 0.05);
    const before = job.replicas.map((r) => r.model.params.slice());
    // device 3's inputs are NaN: only its loss is non-finite; in stage 2 the NaN reaches each device
    // only in its own slice of the gradient, so the skip must be agreed on
    const stats = await step(job, 0.05, 3);
    await step(base, 0.05, 3);
    for (const [r, s] of stats.entries()) assert.equal(s?.skipped, true, `stage ${shard}: device ${r} skips`);
    for (const [r, replica] of job.replicas.entries())
      assert.deepEqual(replica.model.params, before[r], `stage ${shard}: device ${r}'s weights are untouched`);
    // and training goes on as unsharded hybrid's does, from finite weights
    for (const j of [job, base]) await step(j, 0.05);
    for (const replica of job.replicas) {
      assert.ok(replica.model.params.every(Number.isFinite));
      assert.deepEqual(replica.model.params, base.replicas[0]!.model.params, `stage ${shard} after the skip`);
    }
  }
});

test("hybrid shard 2: one NaN in one device's gradient, seen by the one device owning it after the reduce-scatter, skips the step everywhere", async () => {
  const job = await startJob(shardConfig(MLP, ADAM, 4, 2));
  await step(job);
  const before = job.replicas.map((r) => r.model.params.slice());
  // grads[0] lies in device 0's part of the last bucket: devices 1–3 reduce finite parts
  const stats = await step(job, 0.01, undefined, 3);
  for (const [r, s] of stats.entries()) assert.equal(s?.skipped, true, `device ${r} skips`);
  for (const [r, replica] of job.replicas.entries()) assert.deepEqual(replica.model.params, before[r]);
});

// Each micro-batch's gradient is reduce-scattered and added to the owned part (no whole gradient
// is kept between them): Σ_k mean_d instead of hybrid's mean_d Σ_k, equal to float32 rounding.
test('hybrid shard 2 with micro-batching follows unsharded hybrid with micro-batching to 1e-5', async () => {
  const train = { microBatches: 2 };
  const base = await trainJob(shardConfig(CONV, ADAM, 2, 0, train), 3);
  const sharded = await trainJob(shardConfig(CONV, ADAM, 2, 2, train), 3);
  for (const [r, p] of sharded.params.entries())
    assertClose(p, base.params[0]!, { rtol: 1e-5, atol: 1e-7, what: `device ${r}` });
});
