import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ADAM, CONV, MLP, MOMENTUM, shardConfig, startJob, step, trainJob, wholeParams } from './shardingHarness.ts';
import { WeightShards } from '../../src/parallel/sharding/weightShards.ts';
import { assertClose } from '../util/close.ts';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** V8's collector, made callable without --expose-gc. */
function collectGarbage(): void {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}

const STEPS = 4;

/** A recurrent speech-like model: GRU over frames, a dense head per frame reduced by flatten. */
const RECURRENT = {
  input: [5, 3],
  layers: [
    { gru: { units: 6 } },
    { flatten: {} },
    { dense: { units: 8, activation: 'tanh' } },
    { dense: { units: 4 } },
  ],
};

// Stage 3's units are hybrid's buckets (the harness's 64 bytes: about a layer each), so each
// unit's reduce-scatter sums what stage 2's does and every device gathers exactly the stepped
// weights: bit for bit equal to unsharded hybrid with one micro-batch. Clipped, the norm is summed
// from the devices' parts as stage 2 sums it (float64 per device, then over the devices), so
// stage 3 equals stage 2 bit for bit, and hybrid (one pass over the whole gradient) to the clip
// factor's last bit (1e-6, as stage 2 in sharding-faults.test.ts).
for (const [modelName, model] of [
  ['MLP', MLP],
  ['conv net', CONV],
  ['recurrent net', RECURRENT],
] as const) {
  test(`hybrid shard 3 equals unsharded hybrid bit for bit, and stage 2 clipped: ${modelName}, 2 and 4 devices, Adam and momentum`, async () => {
    for (const devices of [2, 4]) {
      for (const optimizer of [ADAM, MOMENTUM]) {
        const base = await trainJob(shardConfig(model, optimizer, devices, 0), STEPS);
        const { params } = await trainJob(shardConfig(model, optimizer, devices, 3), STEPS);
        for (let r = 0; r < devices; r++)
          assert.deepEqual(params[r], base.params[0], `${devices} devices, device ${r}'s weights`);
        const clip = { clipGradNorm: 0.05 };
        const hybrid = await trainJob(shardConfig(model, optimizer, devices, 0, clip), STEPS);
        const two = await trainJob(shardConfig(model, optimizer, devices, 2, clip), STEPS);
        const three = await trainJob(shardConfig(model, optimizer, devices, 3, clip), STEPS);
        // the clip acted: the norm before clipping was above the limit
        assert.ok(three.job.replicas[0]!.takeGradNorm()! > clip.clipGradNorm, 'clipped');
        for (let r = 0; r < devices; r++) {
          assert.deepEqual(three.params[r], two.params[0], `clipped, ${devices} devices, device ${r}: stage 2`);
          assertClose(three.params[r]!, hybrid.params[0]!, { rtol: 1e-6, atol: 1e-7, what: `clipped, device ${r}` });
        }
      }
    }
  });
}

test('hybrid shard 3: a NaN loss on one device skips the step on every device, weights and optimizer unchanged', async () => {
  const job = await startJob(shardConfig(CONV, ADAM, 4, 3));
  await step(job);
  const before = await wholeParams(job);
  const stats = await step(job, 0.01, 2);
  assert.ok(
    stats.every((s) => s?.skipped === true),
    'every device skips',
  );
  assert.deepEqual(await wholeParams(job), before);
  // and goes on as an unsharded run that skipped the same step
  const plain = await startJob(shardConfig(CONV, ADAM, 4, 0));
  await step(plain);
  await step(plain, 0.01, 2);
  await step(plain);
  await step(job);
  assert.deepEqual((await wholeParams(job))[0], (await wholeParams(plain))[0]);
});

// With k micro-batches every micro-batch's gradient is reduce-scattered and added to the owned
// part (no whole gradient is kept between them): Σ_k mean_d instead of mean_d Σ_k, the same sums
// in another order, so equal to float32 rounding (a few ulps per step).
test('hybrid shard 3 with micro-batches and clipping follows unsharded hybrid to 1e-5', async () => {
  for (const [model, devices] of [
    [CONV, 2],
    [RECURRENT, 4],
  ] as const) {
    const train = { microBatches: 2, clipGradNorm: 0.05 };
    const base = await trainJob(shardConfig(model, ADAM, devices, 0, train), STEPS);
    const { params } = await trainJob(shardConfig(model, ADAM, devices, 3, train), STEPS);
    for (let r = 0; r < devices; r++)
      assertClose(params[r]!, base.params[0]!, { rtol: 1e-5, atol: 1e-7, what: `${devices} devices, device ${r}` });
  }
});

test('a stage-3 device holds its part of the weights and gradients and one unit gathered, never the whole buffers', async () => {
  const devices = 4;
  const job = await startJob(shardConfig(CONV, ADAM, devices, 3));
  const psi = job.replicas[0]!.model.params.length;
  // nothing keeps the whole buffers once dropped (no view, closure or strategy): the collector frees them
  const dropped = job.replicas.flatMap((r) => [new WeakRef(r.model.params.buffer), new WeakRef(r.model.grads.buffer)]);
  for (let s = 0; s < 2; s++) await step(job);
  await new Promise((resolve) => setImmediate(resolve));
  collectGarbage();
  assert.equal(dropped.filter((ref) => ref.deref() !== undefined).length, 0, 'the whole buffers were collected');
  for (const [rank, replica] of job.replicas.entries()) {
    const { model } = replica;
    const view = job.views[rank]!;
    // the model and what strategies see hold no whole buffer during training
    assert.equal(model.params.length + model.grads.length, 0, 'the whole buffers are dropped');
    assert.equal(view.params.length + view.grads.length, 0);
    const shards = (replica as unknown as { optimizers: { weights: WeightShards } }).optimizers.weights;
    assert.ok(shards instanceof WeightShards);
    const largest = Math.max(...shards.layout.pieces.map((p) => p.end - p.start));
    assert.ok(shards.ownedParams.length <= Math.ceil(psi / devices) + shards.layout.pieces.length);
    // one ordinary workspace of the largest unit; the one for units other layers read holds a float (none here)
    assert.equal(shards.gatheredFloats, largest + 1);
    assert.equal(shards.heldFloats, 2 * shards.layout.ownedFloats + 2 * shards.gatheredFloats);
    assert.ok(largest < psi, `a unit (${largest} floats) is a layer's, not the model's ${psi}`);
  }
  // the whole model comes back for evaluation and checkpoints (collective), and goes at the next step
  const whole = await wholeParams(job);
  assert.equal(whole[0]!.length, psi);
  await step(job);
  assert.equal(job.replicas[0]!.model.params.length, 0);
});

test('hybrid shard 3 with initFrom.freeze: the frozen layer stays as it started and out of the clip norm, as at stage 2', async () => {
  const train = { clipGradNorm: 0.05, initFrom: { path: 'unused.safetensors', reinit: [], freeze: ['layers.0'] } };
  const start = (await startJob(shardConfig(CONV, ADAM, 2, 0))).replicas[0]!.model.params.slice();
  const two = await trainJob(shardConfig(CONV, ADAM, 2, 2, train), STEPS);
  const three = await trainJob(shardConfig(CONV, ADAM, 2, 3, train), STEPS);
  const kernel = three.job.replicas[0]!.model.paramEntries.filter((e) => e.name.startsWith('layers.0.'));
  assert.ok(kernel.length > 0);
  for (const e of kernel)
    assert.deepEqual(
      three.params[0]!.subarray(e.offset, e.offset + e.size),
      start.subarray(e.offset, e.offset + e.size),
    );
  for (const p of three.params) assert.deepEqual(p, two.params[0]);
});
