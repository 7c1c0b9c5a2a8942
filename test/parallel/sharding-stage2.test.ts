/**
 * ZeRO stage 2 keeps only its part of the reduced gradient (gradientShards.ts): each unit's
 * gradient is written into a shared workspace and reduce-scattered right after the unit's
 * backward, the whole gradient buffer is dropped, the weights stay whole.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { ADAM, CONV, shardConfig, startJob, step, trainJob, wholeParams } from './shardingHarness.ts';
import { GradientShards } from '../../src/parallel/sharding/gradientShards.ts';
import { assertClose } from '../util/close.ts';

/** V8's collector, made callable without --expose-gc. */
function collectGarbage(): void {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}

/** Seven dense layers of about Ψ/7 each: a unit (the harness's 64-byte buckets: a layer) is far below Ψ. */
const DEEP = {
  input: [16],
  layers: [...Array.from({ length: 6 }, () => ({ dense: { units: 16, activation: 'tanh' } })), { dense: { units: 4 } }],
};

test('a stage-2 device holds its part of the gradient and one unit of workspace, never the whole gradient; the weights stay whole', async () => {
  const devices = 4;
  const job = await startJob(shardConfig(DEEP, ADAM, devices, 2));
  const psi = job.replicas[0]!.model.params.length;
  // nothing keeps the whole gradient once dropped (no view, closure, registration or strategy): the collector frees it
  const dropped = job.replicas.map((r) => new WeakRef(r.model.grads.buffer));
  for (let s = 0; s < 2; s++) await step(job);
  await new Promise((resolve) => setImmediate(resolve));
  collectGarbage();
  assert.equal(dropped.filter((ref) => ref.deref() !== undefined).length, 0, 'the whole gradient was collected');
  for (const [rank, replica] of job.replicas.entries()) {
    const { model } = replica;
    assert.equal(model.params.length, psi, 'the weights are whole');
    assert.equal(model.grads.length + job.views[rank]!.grads.length, 0, 'no whole gradient');
    const shards = (replica as unknown as { optimizers: { gradients: GradientShards } }).optimizers.gradients;
    assert.ok(shards instanceof GradientShards);
    const { layout } = shards;
    const largest = Math.max(...layout.pieces.map((p) => p.end - p.start));
    assert.ok(shards.ownedGrads.length <= Math.ceil(psi / devices) + layout.pieces.length);
    // one workspace of the largest unit; the one for units other layers read holds a float (none here)
    assert.equal(shards.workspaceFloats, largest + 1);
    assert.equal(shards.heldFloats, layout.ownedFloats + largest + 1);
    // Ψ/N + a layer: well under the whole gradient's Ψ
    assert.ok(shards.heldFloats < psi / 2, `${shards.heldFloats} floats held of Ψ = ${psi}`);
  }
  // and the run goes on: every device's weights are unsharded hybrid's
  const base = await trainJob(shardConfig(DEEP, ADAM, devices, 0), 3);
  await step(job);
  for (const p of await wholeParams(job)) assert.deepEqual(p, base.params[0]);
});

test('hybrid shard 2 with micro-batches and clipping follows unsharded hybrid to 1e-5', async () => {
  const train = { microBatches: 2, clipGradNorm: 0.05 };
  for (const devices of [2, 4]) {
    const base = await trainJob(shardConfig(DEEP, ADAM, devices, 0, train), 4);
    const { job, params } = await trainJob(shardConfig(DEEP, ADAM, devices, 2, train), 4);
    assert.ok(job.replicas[0]!.takeGradNorm()! > train.clipGradNorm, 'clipped');
    for (const [r, p] of params.entries())
      assertClose(p, base.params[0]!, { rtol: 1e-5, atol: 1e-7, what: `${devices} devices, device ${r}` });
  }
});

test('hybrid shard 2 with initFrom.freeze: the frozen layer stays as it started and out of the clip norm, as at stage 1', async () => {
  const train = { clipGradNorm: 0.05, initFrom: { path: 'unused.safetensors', reinit: [], freeze: ['layers.0'] } };
  const start = (await startJob(shardConfig(CONV, ADAM, 2, 0))).replicas[0]!.model.params.slice();
  const one = await trainJob(shardConfig(CONV, ADAM, 2, 1, train), 4);
  const two = await trainJob(shardConfig(CONV, ADAM, 2, 2, train), 4);
  const kernel = two.job.replicas[0]!.model.paramEntries.filter((e) => e.name.startsWith('layers.0.'));
  assert.ok(kernel.length > 0);
  for (const e of kernel)
    assert.deepEqual(two.params[0]!.subarray(e.offset, e.offset + e.size), start.subarray(e.offset, e.offset + e.size));
  // stage 1 clips the whole reduced gradient, stage 2 by the norm from the parts: the same bits
  for (const p of two.params) assert.deepEqual(p, one.params[0]!, 'stage 2 against 1');
});
