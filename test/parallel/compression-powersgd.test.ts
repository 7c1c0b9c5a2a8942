/**
 * PowerSGD: at full rank it is hybrid (the projection onto the span of M̄Q is M̄ itself); at low
 * rank one round is the projection of the mean gradient onto the span of M̄Q, checked against
 * normal equations in float64; before startStep it (and oneBit) is hybrid bit for bit.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PowerSgd } from '../../src/parallel/compression/powerSgd.ts';
import { tensorPlaces } from '../../src/parallel/compression/tensors.ts';
import { compressedHybridStrategy } from '../../src/parallel/compression/compressedHybrid.ts';
import type { CompressionSpec } from '../../src/parallel/compression/spec.ts';
import { hybridStrategy } from '../../src/parallel/strategies/hybrid.ts';
import type { Strategy } from '../../src/parallel/strategy.ts';
import type { Communicator } from '../../src/comm/communicator.ts';
import { localGroup } from './localGroup.ts';
import { sgdReplica, stepInfo } from './strategyHarness.ts';
import { assertClose, randomArray } from '../util/close.ts';

/** A 6 × 8 and a 10 × 4 matrix with a bias between them, aligned as the flat layout aligns. */
const TENSORS = [
  { name: 'a.kernel', shape: [6, 8], offset: 0 },
  { name: 'a.bias', shape: [8], offset: 48 },
  { name: 'b.kernel', shape: [10, 4], offset: 64 },
];
const N = 112;
const G = 3;

const powerSGD = (o: Partial<Extract<CompressionSpec, { type: 'powerSGD' }>> = {}): CompressionSpec => ({
  type: 'powerSGD',
  rank: 4,
  startStep: 0,
  warmStart: true,
  minCompressionRate: 2,
  ...o,
});

/**
 * Runs `make`'s strategy on G replicas for `steps` steps of SGD (lr 0.5) on fixed per-rank
 * gradients, backward reporting offsets 64 and 48 as a model's would; every rank's weights after each step.
 */
async function run(make: (c: Communicator) => Strategy, steps: number): Promise<Float32Array[][]> {
  const comms = localGroup(G);
  const reps = comms.map((_, r) => Object.assign(sgdReplica([...randomArray(N, 100 + r)]), { tensors: TENSORS }));
  const strategies = comms.map(make);
  await Promise.all(strategies.map((s, r) => s.onStart!(reps[r]!)));
  const after: Float32Array[][] = [];
  for (let step = 0; step < steps; step++) {
    const info = stepInfo(step, 0.5);
    for (const [r, s] of strategies.entries()) await s.beforeStep?.(reps[r]!, info);
    for (const [r, rep] of reps.entries()) rep.grads.set(randomArray(N, 10 * step + r + 1));
    for (const offset of [64, 48]) for (const [r, s] of strategies.entries()) s.onGradientsReady?.(reps[r]!, offset);
    await Promise.all(strategies.map((s, r) => s.applyUpdate!(reps[r]!, info)));
    after.push(reps.map((rep) => rep.params.slice()));
  }
  return after;
}

// Full rank: P = M̄Q spans M̄'s columns, so P Pᵀ M̄ = M̄ and the mean of the devices' errors is 0;
// what differs is float32 rounding of P (orthonormalised in float64, stored in float32) and Q,
// about 1e-7 of the gradient's size per step, over 4 steps of lr 0.5 on gradients of size ≤ 1.
test('powerSGD at full rank (rank ≥ min(n, m) for every matrix, all compressed) equals hybrid to 1e-5', async () => {
  const full = powerSGD({ rank: 10, minCompressionRate: 0.1 });
  const places = tensorPlaces(N, TENSORS);
  const p = new PowerSgd(localGroup(1)[0]!, N, places, { rank: 10, warmStart: true, minCompressionRate: 0.1, seed: 1 });
  assert.deepEqual(
    p.factors.map((f) => [f.n, f.m, f.r]),
    [
      [6, 8, 6],
      [10, 4, 4],
    ],
    'both matrices compressed, at their full rank',
  );
  const plain = await run((c) => hybridStrategy(c, 32), 4);
  const compressed = await run((c) => compressedHybridStrategy(c, hybridStrategy(c, 32), full, 1), 4);
  for (const [step, ws] of compressed.entries())
    for (const [r, w] of ws.entries())
      assertClose(w, plain[step]![r]!, { rtol: 1e-5, atol: 1e-5, what: `rank ${r} after step ${step + 1}` });
  const low = await run(
    (c) => compressedHybridStrategy(c, hybridStrategy(c, 32), powerSGD({ rank: 1, minCompressionRate: 0.1 }), 1),
    1,
  );
  assert.ok(
    low[0]![0]!.some((v, i) => Math.abs(v - plain[0]![0]![i]!) > 1e-3),
    'rank 1 differs from hybrid (the comparison is not vacuous)',
  );
});

test('powerSGD and oneBit before startStep are hybrid bit for bit (their buckets too), then compress', async () => {
  const plain = await run((c) => hybridStrategy(c, 32), 3);
  for (const spec of [powerSGD({ rank: 1, startStep: 2 }), { type: 'oneBit' as const, startStep: 2 }]) {
    const late = await run((c) => compressedHybridStrategy(c, hybridStrategy(c, 32), spec, 1), 3);
    assert.deepEqual(late.slice(0, 2), plain.slice(0, 2), spec.type);
    assert.notDeepEqual(late[2], plain[2], spec.type);
  }
});

/** x (n × m, row-major) as rows of float64. */
const rows = (x: ArrayLike<number>, n: number, m: number) =>
  Array.from({ length: n }, (_, i) => Array.from({ length: m }, (_, j) => x[i * m + j]!));

test('powerSGD rank 2, one round: each device applies the projection of the mean gradient onto span(M̄Q) (normal equations, float64)', async () => {
  const n = 10,
    m = 4,
    r = 2;
  const tensors = [{ name: 'k', shape: [n, m], offset: 0 }];
  const comms = localGroup(2);
  const ps = comms.map(
    (c) =>
      new PowerSgd(c, n * m, tensorPlaces(n * m, tensors), {
        rank: r,
        warmStart: true,
        minCompressionRate: 1,
        seed: 5,
      }),
  );
  const Q0 = rows(ps[0]!.q, m, r);
  const grads = comms.map((_, d) => randomArray(n * m, d + 21));
  const mean = rows(
    grads[0]!.map((v, i) => (v + grads[1]![i]!) / 2),
    n,
    m,
  );
  await Promise.all(ps.map((p, d) => p.reduce(grads[d]!, 0)));
  assert.deepEqual(grads[1], grads[0], 'the same estimate on both devices');
  // A = M̄ Q0; projection = A (AᵀA)⁻¹ Aᵀ M̄
  const A = mean.map((row) => Array.from({ length: r }, (_, k) => row.reduce((s, v, j) => s + v * Q0[j]![k]!, 0)));
  const AtA = [0, 1].map((a) => [0, 1].map((b) => A.reduce((s, row) => s + row[a]! * row[b]!, 0)));
  const det = AtA[0]![0]! * AtA[1]![1]! - AtA[0]![1]! * AtA[1]![0]!;
  const inv = [
    [AtA[1]![1]! / det, -AtA[0]![1]! / det],
    [-AtA[1]![0]! / det, AtA[0]![0]! / det],
  ];
  const AtM = [0, 1].map((a) =>
    Array.from({ length: m }, (_, j) => A.reduce((s, row, i) => s + row[a]! * mean[i]![j]!, 0)),
  );
  const coef = [0, 1].map((a) =>
    Array.from({ length: m }, (_, j) => inv[a]![0]! * AtM[0]![j]! + inv[a]![1]! * AtM[1]![j]!),
  );
  const want = A.flatMap((row) => Array.from({ length: m }, (_, j) => row[0]! * coef[0]![j]! + row[1]! * coef[1]![j]!));
  assertClose(grads[0]!, want, { rtol: 1e-4, atol: 1e-5, what: 'the rank-2 estimate' });
  // error feedback: each device keeps its M − approx
  for (const [d, p] of ps.entries()) {
    const local = randomArray(n * m, d + 21);
    assertClose(
      p.error,
      local.map((v, i) => v - grads[0]![i]!),
      { rtol: 1e-6, atol: 1e-7, what: `device ${d}'s error` },
    );
  }
});

test('compression keeps hybrid’s rules: one device’s NaN loss skips the step on every device, state untouched; clipping acts on the applied estimate', async () => {
  for (const spec of [{ type: 'oneBit' } as const, powerSGD({ rank: 1, minCompressionRate: 1 })]) {
    const comms = localGroup(2);
    const clipped: number[][] = [];
    const reps = comms.map((_, r) =>
      Object.assign(sgdReplica([...randomArray(N, 100 + r)]), {
        tensors: TENSORS,
        async clipGradients(this: { grads: Float32Array }) {
          clipped.push([...this.grads]);
          for (let i = 0; i < this.grads.length; i++) this.grads[i] = this.grads[i]! / 2;
        },
      }),
    );
    const strategies = comms.map((c) => compressedHybridStrategy(c, hybridStrategy(c, 32), spec, 1));
    await Promise.all(strategies.map((s, r) => s.onStart!(reps[r]!)));
    const before = reps.map((rep) => rep.params.slice());
    const states = strategies.map((s) => JSON.stringify(s.saveState!()));
    for (const [r, rep] of reps.entries()) rep.grads.set(randomArray(N, r + 1));
    const skipped = await Promise.all(
      strategies.map((s, r) => s.applyUpdate!(reps[r]!, { ...stepInfo(0, 0.5), lossNonFinite: r === 1 })),
    );
    assert.deepEqual(skipped, [{ skipped: true }, { skipped: true }], `${spec.type}: both devices skip`);
    assert.deepEqual(
      reps.map((rep) => rep.params),
      before,
      `${spec.type}: no update`,
    );
    assert.deepEqual(
      strategies.map((s) => JSON.stringify(s.saveState!())),
      states,
      `${spec.type}: the error-feedback state is untouched`,
    );
    assert.equal(clipped.length, 0, 'a skipped step is never clipped');
    for (const [r, rep] of reps.entries()) rep.grads.set(randomArray(N, r + 1));
    await Promise.all(strategies.map((s, r) => s.applyUpdate!(reps[r]!, stepInfo(1, 0.5))));
    assert.deepEqual(clipped[1], clipped[0], `${spec.type}: every device clips the same estimate`);
    // the step applied the clipped (halved) estimate
    for (const [r, rep] of reps.entries())
      assertClose(
        rep.params,
        before[0]!.map((w, i) => w - 0.5 * (clipped[r]![i]! / 2)),
        { rtol: 1e-6, atol: 1e-7, what: `${spec.type}: rank ${r}'s weights` },
      );
  }
});
