import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { Tensor } from '../../src/tensor/tensor.ts';
import { buildModel } from '../../src/nn/model.ts';
import { TokenCrossEntropy } from '../../src/nn/tokenCrossEntropy.ts';
import { sinusoidalTable } from '../../src/nn/positionEncoding.ts';
import type { ModelSpec } from '../../src/nn/spec.ts';
import { assertClose } from '../util/close.ts';

// Made by test/nn/fixtures/embedding-torch.py (torch 1.13, float64 from the stored float32 weights).
interface Case {
  kind: 'learned' | 'sinusoidal';
  logits: number[];
  loss: number;
  weightGrad: number[];
  positionGrad?: number[];
}
const fixture = JSON.parse(readFileSync(new URL('./fixtures/embedding-torch.json', import.meta.url), 'utf8')) as {
  N: number;
  T: number;
  V: number;
  D: number;
  ids: number[];
  labels: number[];
  weight: number[];
  position: number[];
  sinusoidal: Record<'6x6' | '4x5', number[]>;
  cases: Case[];
};

test('the sinusoidal table is PyTorch tutorial’s (an even and an odd width)', () => {
  assertClose(sinusoidalTable(6, 6), fixture.sinusoidal['6x6'], { rtol: 1e-6, atol: 1e-7, what: '6×6 table' });
  assertClose(sinusoidalTable(4, 5), fixture.sinusoidal['4x5'], { rtol: 1e-6, atol: 1e-7, what: '4×5 table' });
});

test('embedding + position encoding + tied projection + cross-entropy over every position equal PyTorch', () => {
  const { N, T, V, D } = fixture;
  for (const c of fixture.cases) {
    const spec: ModelSpec = {
      input: [T],
      layers: [
        { type: 'embedding', vocab: V, dim: D },
        { type: 'positionEncoding', encoding: c.kind },
        { type: 'tiedEmbedding', vocab: V },
      ],
    };
    const model = buildModel(jsBackend, spec);
    // the tied projection holds no tensor of its own: the embedding's weight is the only shared one
    assert.deepEqual(
      model.paramEntries.map((e) => e.name),
      c.kind === 'learned' ? ['layers.0.weight', 'layers.1.weight'] : ['layers.0.weight'],
    );
    const [weight, position] = model.paramEntries;
    model.params.set(fixture.weight, weight!.offset);
    if (position) model.params.set(fixture.position, position.offset);
    model.zeroGrads();
    const x = new Tensor([N, T], Float32Array.from(fixture.ids));
    const logits = model.forward(x, { training: true, seed: 1, step: 0, sampleOffset: 0 });
    assert.deepEqual(logits.shape, [N, T, V]);
    const what = `${c.kind}:`;
    assertClose(logits.data, c.logits, { rtol: 1e-5, atol: 1e-6, what: `${what} logits` });
    const r = new TokenCrossEntropy(jsBackend).compute(logits, Int32Array.from(fixture.labels), 1 / N);
    // lossSum / N is the mean over the N·T positions: F.cross_entropy's
    assert.ok(
      Math.abs(r.lossSum / N - c.loss) <= 1e-5 * Math.abs(c.loss),
      `${what} loss ${r.lossSum / N} vs ${c.loss}`,
    );
    model.backward(r.dlogits);
    const grad = (e: typeof weight) => model.grads.subarray(e!.offset, e!.offset + e!.size);
    assertClose(grad(weight), c.weightGrad, { rtol: 1e-5, atol: 1e-6, what: `${what} embedding weight gradient` });
    if (c.positionGrad)
      assertClose(grad(position), c.positionGrad, { rtol: 1e-5, atol: 1e-6, what: `${what} position gradient` });
  }
});
