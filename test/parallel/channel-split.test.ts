import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Tensor } from '../../src/tensor/tensor.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { getBackend } from '../../src/kernels/index.ts';
import type { Backend } from '../../src/kernels/backend.ts';
import type { Conv2DSpec } from '../../src/nn/spec.ts';
import { ChannelSplitConv2D } from '../../src/parallel/modelParallel/channelSplit.ts';
import { localGroup } from './localGroup.ts';
import { seededModel, reference, conv, TRAIN } from './splitHelpers.ts';
import { assertClose, randomArray } from '../util/close.ts';

// Tolerance (float32): each output channel is the same sum as unsplit; the input gradient adds the
// ranks' partial sums over channel groups in another order: ~1e-6 relative, we allow 1e-5.
const TOL = { rtol: 1e-5, atol: 1e-5 };

const CASES: { input: number[]; spec: Conv2DSpec }[] = [
  { input: [9, 8, 3], spec: conv(7, 3, { padding: 'same', activation: 'relu' }) as Conv2DSpec },
  { input: [11, 7, 2], spec: conv(5, [3, 2], { strides: [2, 1], activation: 'tanh' }) as Conv2DSpec },
  { input: [6, 6, 4], spec: { ...(conv(6, 1) as Conv2DSpec), useBias: false } },
];

test('channel-split Conv2D on G devices (uneven included) equals the unsplit layer: output, input and weight gradients', async () => {
  for (const backend of [jsBackend, await getBackend('wasm')] as Backend[]) {
    for (const { input, spec } of CASES) {
      const ref = seededModel(backend, [spec], input);
      const N = 3;
      const x = new Tensor([N, ...input], randomArray(N * input.reduce((a, b) => a * b), 2));
      const r = randomArray(N * ref.outputShape.reduce((a, b) => a * b), 6);
      const want = reference(ref, x, r);
      const kernel = ref.params.subarray(
        ref.paramEntries[0]!.offset,
        ref.paramEntries[0]!.offset + ref.paramEntries[0]!.size,
      );
      const bias = spec.useBias
        ? ref.params.subarray(ref.paramEntries[1]!.offset, ref.paramEntries[1]!.offset + spec.filters)
        : null;
      for (const G of [2, 3, 4]) {
        const what = `${backend.name} conv ${spec.filters} filters ${spec.kernelSize.join('×')} on ${G} devices`;
        const outs = await Promise.all(
          localGroup(G).map(async (comm) => {
            const split = new ChannelSplitConv2D(backend, comm, { name: 'conv', inputShape: input, ...spec });
            split.loadSlice(kernel, bias);
            const y = await split.forward(x, TRAIN);
            const yCopy = y.data.slice();
            const dx = await split.backward(new Tensor(y.shape, r.slice()));
            return { split, y: yCopy, dx: dx!.data.slice() };
          }),
        );
        // every rank's weight-gradient slice, put together, is the whole layer's gradient
        const dKernel = new Float32Array(kernel.length),
          dBias = bias ? new Float32Array(spec.filters) : null;
        for (const o of outs) o.split.storeGradSlice(dKernel, dBias);
        const wantKernel = want.grads.subarray(
          ref.paramEntries[0]!.offset,
          ref.paramEntries[0]!.offset + kernel.length,
        );
        assertClose(dKernel, wantKernel, { ...TOL, what: `${what} kernel gradient` });
        if (dBias)
          assertClose(
            dBias,
            want.grads.subarray(ref.paramEntries[1]!.offset, ref.paramEntries[1]!.offset + spec.filters),
            { ...TOL, what: `${what} bias gradient` },
          );
        for (const [k, o] of outs.entries()) {
          assertClose(o.y, want.y, { ...TOL, what: `${what} rank ${k} output` });
          assertClose(o.dx, want.dx, { ...TOL, what: `${what} rank ${k} input gradient` });
        }
        assert.ok(outs.every((o) => o.split.channels.end > o.split.channels.start));
      }
    }
  }
});

test('channel split: more devices than filters is refused naming the layer', () => {
  assert.throws(
    () =>
      new ChannelSplitConv2D(jsBackend, localGroup(4)[0]!, {
        name: 'model.layers[2] conv2d',
        inputShape: [5, 5, 1],
        ...(conv(3, 3) as Conv2DSpec),
      }),
    /model\.layers\[2\] conv2d: cannot split 3 filters by channel over 4 devices; use at most 3 devices or more filters/,
  );
});
