// Training with the onednn backend equals training with the wasm backend: examples/mnist-small.yaml's
// network (two convolutions with ReLU and max pooling — the first pair fused into one step where the
// CPU has AVX-512, see src/nn/convPool.ts — dense layers, dropout) from the same initial
// weights on the same batches (synthetic images with a class-dependent pattern), step by step. The
// backends round differently (oneDNN's blocked float32 sums vs wasm's), so they agree to a stated
// tolerance, not bit for bit:
// - with SGD + momentum (linear in the gradients): every step's loss within 1e-5 relative, and
//   after STEPS steps every weight within 1e-6 (measured here: 7e-7 and 6e-8);
// - with the shipped Adam: every step's loss within 1e-3 relative (measured: 7e-5). Its weights are
//   not compared one by one: Adam's first steps move each weight by ±lr·sign(gradient), so a weight
//   whose gradient is ~0 may move either way under either backend's rounding.
// Skipped when the addon is not built.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { createOneDnnBackend, onednnUnavailableReason } from '../../src/kernels/onednn/index.ts';
import { createWasmBackend } from '../../src/kernels/wasm/index.ts';
import { parseConfig } from '../../src/config/index.ts';
import { Replica } from '../../src/runtime/device/replica.ts';
import type { Backend } from '../../src/kernels/backend.ts';

const onednn = await createOneDnnBackend();
const wasm = await createWasmBackend();
const skip = !onednn
  ? `onednn backend unavailable: ${onednnUnavailableReason()}`
  : !wasm
    ? 'wasm backend unavailable (npm run build:wasm)'
    : false;

const STEPS = 8,
  BATCH = 16,
  PER = 28 * 28;

/** Batch `k`: each image is noise plus a bright row at its class's height, so the network has something to learn. */
function batch(k: number): { images: Float32Array; labels: Int32Array } {
  const images = new Float32Array(BATCH * PER),
    labels = new Int32Array(BATCH);
  let s = ((k + 1) * 2654435761) >>> 0;
  for (let n = 0; n < BATCH; n++) {
    const label = (n * 7 + k * 3) % 10;
    labels[n] = label;
    for (let i = 0; i < PER; i++) {
      s ^= s << 13;
      s >>>= 0;
      s ^= s >>> 17;
      s ^= s << 5;
      s >>>= 0;
      images[n * PER + i] = 0.3 * (s / 4294967296) + (Math.floor(i / 28) === 2 + label * 2 ? 0.7 : 0);
    }
  }
  return { images, labels };
}

/** Trains STEPS steps of mnist-small (with `optimizer` when given) and returns the per-step mean losses and the final weights. */
function trainWith(backend: Backend, optimizer?: unknown): { losses: number[]; params: Float32Array } {
  const raw = parse(readFileSync(new URL('../../examples/mnist-small.yaml', import.meta.url), 'utf8')) as Record<
    string,
    unknown
  >;
  if (optimizer) raw.optimizer = optimizer;
  const config = parseConfig(raw, 'mnist-small');
  const replica = new Replica(backend, config);
  const losses: number[] = [];
  for (let k = 0; k < STEPS; k++) {
    const { images, labels } = batch(k);
    replica.model.zeroGrads();
    const r = replica.computeGradients(
      images,
      labels,
      { training: true, seed: 1, step: k, sampleOffset: k * BATCH },
      1 / BATCH,
    );
    replica.optimizer.step(replica.model.params, replica.model.grads, optimizer ? 0.01 : 0.001);
    losses.push(r.lossSum / BATCH);
  }
  return { losses, params: replica.model.params.slice() };
}

function assertLossesClose(a: number[], b: number[], rtol: number, what: string): void {
  a.forEach((loss, k) => {
    assert.ok(
      Math.abs(loss - b[k]!) <= rtol * Math.abs(b[k]!),
      `${what} step ${k}: loss ${loss} (onednn) vs ${b[k]} (wasm)`,
    );
  });
  assert.ok(b[STEPS - 1]! < b[0]!, `${what}: the loss falls: ${b.join(', ')}`);
}

test(`training mnist-small with onednn equals training with wasm within tolerance after ${STEPS} steps (SGD: losses and weights)`, {
  skip,
}, () => {
  const sgd = { sgd: { lr: 0.01, momentum: 0.9 } };
  const a = trainWith(onednn!, sgd),
    b = trainWith(wasm!, sgd);
  assertLossesClose(a.losses, b.losses, 1e-5, 'sgd');
  let worst = 0,
    at = -1;
  for (let i = 0; i < a.params.length; i++) {
    const d = Math.abs(a.params[i]! - b.params[i]!);
    if (d > worst) {
      worst = d;
      at = i;
    }
  }
  assert.ok(worst <= 1e-6, `weight ${at} differs by ${worst} (onednn ${a.params[at]}, wasm ${b.params[at]})`);
});

test(`training mnist-small with onednn equals training with wasm within tolerance after ${STEPS} steps (Adam: losses)`, {
  skip,
}, () => {
  const a = trainWith(onednn!),
    b = trainWith(wasm!);
  assertLossesClose(a.losses, b.losses, 1e-3, 'adam');
  // every kernel of the step ran in oneDNN or the addon's own (none was handed back to wasm)
  const stats = onednn!.stats();
  for (const [kind, s] of Object.entries(stats)) if (typeof s === 'object') assert.equal(s.unsupported, 0, kind);
  // with AVX-512 the first convolution and its pool ran as one fused step (native/onednn/convpool.c), every step
  if (onednn!.onednn.isa.startsWith('avx512')) {
    assert.ok(stats.convForward.direct >= STEPS && stats.convBackwardWeights.direct >= STEPS, JSON.stringify(stats));
  }
});
