/**
 * The simulator's profile times the layers as Sequential runs them: a convolution and the max pool
 * the backend fuses with it (nn/convPool.ts) are timed as one step, the pair's time the
 * convolution's and the pool's 0; where the backend fuses nothing, each layer is timed alone.
 * Skipped without the onednn addon's fused kernels (AVX-512), the only backend that fuses.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { measureModelCosts, type ProfileRequest } from '../../src/simulate/profile.ts';
import { getBackend } from '../../src/kernels/index.ts';
import { createOneDnnBackend } from '../../src/kernels/onednn/index.ts';
import { parseConfig } from '../../src/config/index.ts';

const onednn = await createOneDnnBackend();
const skip = !onednn
  ? 'onednn backend unavailable'
  : !onednn.onednn.isa.startsWith('avx512')
    ? `no AVX-512 here (${onednn.onednn.isa}): the fused calls decline`
    : false;

const config = parseConfig(
  {
    model: {
      input: [12, 12, 1],
      layers: [
        { conv2d: { filters: 8, kernelSize: 3, activation: 'relu' } },
        { maxPool2d: { poolSize: 2 } },
        { flatten: {} },
        { dense: { units: 4 } },
      ],
    },
    loss: 'softmaxCrossEntropy',
    optimizer: { sgd: { lr: 0.1 } },
  },
  'profile-pairs',
);
const request = (backend: string): ProfileRequest => ({
  model: config.model,
  optimizer: config.optimizer,
  backend,
  batches: [4],
  repetitions: 2,
  cacheDir: null,
});

const total = (t: { fixed: number; perSample: number }) => t.fixed + t.perSample * 4;

test('the profile times a fused conv2d + max pool as one step (the pool 0), through the fused kernels', {
  skip,
}, async () => {
  const backend = await getBackend('onednn');
  const calls = { forward: 0, backward: 0 };
  const b = backend as typeof backend & Record<string, unknown>;
  const forward = b.convPoolForward as (...a: unknown[]) => boolean,
    backward = b.conv2dBackwardFilterPooled as (...a: unknown[]) => boolean;
  b.convPoolForward = (...a: unknown[]) => {
    calls.forward++;
    return forward(...a);
  };
  b.conv2dBackwardFilterPooled = (...a: unknown[]) => {
    calls.backward++;
    return backward(...a);
  };
  try {
    const costs = await measureModelCosts(request('onednn'));
    assert.ok(calls.forward >= 3 && calls.backward >= 3, `fused calls made: ${JSON.stringify(calls)}`);
    const [conv, pool] = costs.layers;
    assert.ok(total(conv!.forward) > 0 && total(conv!.backward) > 0, 'the pair is timed as the convolution');
    assert.equal(total(pool!.forward), 0, "the pool's forward is in the pair's");
    assert.equal(total(pool!.backward), 0, "the pool's backward is in the pair's");
  } finally {
    b.convPoolForward = forward;
    b.conv2dBackwardFilterPooled = backward;
  }
});

test('without fused kernels (js) every layer is timed on its own', async () => {
  const costs = await measureModelCosts(request('js'));
  const [conv, pool] = costs.layers;
  assert.ok(total(conv!.forward) > 0 && total(pool!.forward) > 0);
  assert.ok(total(conv!.backward) > 0 && total(pool!.backward) > 0);
});
