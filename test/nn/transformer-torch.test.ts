/**
 * A 2-block transformer trained 4 AdamW steps by paratrain equals PyTorch's training of the same
 * model from the same weights on the same batches (fixtures/transformer-torch.py, float64; the run
 * is defined in transformerTorchRun.ts). Each step's loss agrees within 1e-5·|loss|, and every
 * final weight w within |w − w_torch| ≤ 1e-5·max|w_torch| over its tensor (weights cross zero, so a
 * tolerance relative to each weight alone cannot hold: the error is measured against the tensor's
 * scale). On the js backend, and on the fastest CPU backend here (TOLERANCE says where it is looser).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { getBackend } from '../../src/kernels/index.ts';
import type { Backend } from '../../src/kernels/backend.ts';
import { paratrainRun, torchInputs, type ParatrainRun, type Tensors } from './transformerTorchRun.ts';

const fixture = JSON.parse(
  readFileSync(new URL('./fixtures/transformer-torch.json', import.meta.url), 'utf8'),
) as ReturnType<typeof torchInputs> & { losses: number[]; final: Record<string, number[]> };
const REGENERATE =
  'the run changed: regenerate the fixture with /usr/bin/python3 test/nn/fixtures/transformer-torch.py && ' +
  'npx biome check --write test/nn/fixtures/transformer-torch.json';

/**
 * 1e-5 for js (float64 sums in its gemm and cross-entropy), wasm and native; oneDNN's float32 matmul
 * and log-softmax round more (its losses are 5e-7 from PyTorch's, js's 3e-9), and Adam carries that
 * into the weights: 1.5e-5 of a tensor's scale at worst.
 */
const TOLERANCE: Record<string, number> = { onednn: 3e-5 };
const toleranceOf = (b: Backend) => TOLERANCE[b.name] ?? 1e-5;

const js = await paratrainRun(jsBackend);

test('the fixture holds the run paratrain makes today: model, optimizer, initial weights and batches', () => {
  const now = torchInputs(js);
  assert.deepEqual(fixture.model, now.model, `model: ${REGENERATE}`);
  assert.deepEqual(fixture.optimizer, now.optimizer, `optimizer: ${REGENERATE}`);
  assert.equal(fixture.batchSize, now.batchSize, `batch size: ${REGENERATE}`);
  assert.deepEqual(fixture.batches, now.batches, `batches: ${REGENERATE}`);
  const shapes = (ts: Tensors[]) => ts.map((t) => `${t.name} [${t.shape.join(', ')}]`);
  assert.deepEqual(shapes(fixture.params), shapes(js.initial), `parameter tensors: ${REGENERATE}`);
  // the fixture gives each float32 to 9 digits: it reads back as exactly paratrain's initial weight
  for (const [k, t] of js.initial.entries()) {
    const given = fixture.params[k]!.values;
    const at = t.values.findIndex((v, i) => Math.fround(given[i]!) !== v);
    assert.equal(at, -1, `${t.name}[${at}]: fixture ${given[at]}, paratrain ${t.values[at]}; ${REGENERATE}`);
  }
});

/** Every step's loss and every final weight against PyTorch's; the worst error relative to its scale. */
function compare(run: ParatrainRun, tolerance: number): { loss: number; weight: number; where: string } {
  assert.equal(run.losses.length, fixture.losses.length, 'steps');
  let loss = 0;
  for (const [s, want] of fixture.losses.entries()) {
    const err = Math.abs(run.losses[s]! - want) / Math.abs(want);
    assert.ok(err <= tolerance, `step ${s}: loss ${run.losses[s]} vs PyTorch's ${want} (${err.toExponential(2)})`);
    loss = Math.max(loss, err);
  }
  let weight = 0,
    where = '';
  for (const t of run.final) {
    const want = fixture.final[t.name]!;
    assert.equal(t.values.length, want.length, `${t.name}: size`);
    const scale = want.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
    for (const [i, v] of t.values.entries()) {
      const err = Math.abs(v - want[i]!) / scale;
      assert.ok(
        err <= tolerance,
        `${t.name}[${i}] after ${run.losses.length} steps: ${v} vs PyTorch's ${want[i]} ` +
          `(${err.toExponential(2)} of the tensor's scale ${scale.toExponential(3)})`,
      );
      if (err > weight) [weight, where] = [err, `${t.name}[${i}]`];
    }
  }
  return { loss, weight, where };
}

for (const name of ['js', 'auto']) {
  test(`${name} backend: 4 AdamW steps of a 2-block transformer equal PyTorch's (losses and every final weight)`, async (t) => {
    const backend = name === 'js' ? jsBackend : await getBackend('auto');
    const run = backend === jsBackend ? js : await paratrainRun(backend);
    const tolerance = toleranceOf(backend);
    const worst = compare(run, tolerance);
    t.diagnostic(
      `${backend.name}: worst loss error ${worst.loss.toExponential(2)}, worst weight error ` +
        `${worst.weight.toExponential(2)} of its tensor's scale (${worst.where}); tolerance ${tolerance}`,
    );
  });
}
