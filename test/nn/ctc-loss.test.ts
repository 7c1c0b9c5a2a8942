import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { Tensor } from '../../src/tensor/tensor.ts';
import { CtcLoss, ctcGradScale, ctcMinFrames, ctcReducedLoss, type CtcTargets } from '../../src/ctc/ctcLoss.ts';
import { assertClose, randomArray } from '../util/close.ts';
import { bruteForceCtcLoss } from './ctcBruteForce.ts';

const B = jsBackend;

function targets(
  rows: number[][],
  inputLengths: number[],
  width = Math.max(0, ...rows.map((r) => r.length)),
  pad = -1,
): CtcTargets {
  const labels = new Int32Array(rows.length * width).fill(pad);
  for (const [i, r] of rows.entries()) labels.set(r, i * width);
  return {
    labels,
    labelLengths: Int32Array.from(rows.map((r) => r.length)),
    inputLengths: Int32Array.from(inputLengths),
  };
}

// TensorFlow's ctc_loss_op_test.py, CTCLossTest.testBasic ("Input and ground truth from Alex Graves'
// implementation"): repository tensorflow/tensorflow, tensorflow/python/kernel_tests/nn_ops/ctc_loss_op_test.py
// (the same numbers are warp-ctc's options_test, baidu-research/warp-ctc tests/test_cpu.cpp). Inputs are
// probabilities whose logs are the logits; the blank is the LAST class (5); 5 valid frames of 7, the
// last two NaN (never read).
const TF_PROBS = [
  [
    [0.633766, 0.221185, 0.0917319, 0.0129757, 0.0142857, 0.0260553],
    [0.111121, 0.588392, 0.278779, 0.0055756, 0.00569609, 0.010436],
    [0.0357786, 0.633813, 0.321418, 0.00249248, 0.00272882, 0.0037688],
    [0.0663296, 0.643849, 0.280111, 0.00283995, 0.0035545, 0.00331533],
    [0.458235, 0.396634, 0.123377, 0.00648837, 0.00903441, 0.00623107],
  ],
  [
    [0.30176, 0.28562, 0.0831517, 0.0862751, 0.0816851, 0.161508],
    [0.24082, 0.397533, 0.0557226, 0.0546814, 0.0557528, 0.19549],
    [0.230246, 0.450868, 0.0389607, 0.038309, 0.0391602, 0.202456],
    [0.280884, 0.429522, 0.0326593, 0.0339046, 0.0326856, 0.190345],
    [0.423286, 0.315517, 0.0338439, 0.0393744, 0.0339315, 0.154046],
  ],
];
const TF_TARGETS = [
  [0, 1, 2, 1, 0],
  [0, 1, 1, 0],
];
const TF_LOSSES = [3.34211, 5.42262];
const TF_GRADS = [
  [
    [-0.366234, 0.221185, 0.0917319, 0.0129757, 0.0142857, 0.0260553],
    [0.111121, -0.411608, 0.278779, 0.0055756, 0.00569609, 0.010436],
    [0.0357786, 0.633813, -0.678582, 0.00249248, 0.00272882, 0.0037688],
    [0.0663296, -0.356151, 0.280111, 0.00283995, 0.0035545, 0.00331533],
    [-0.541765, 0.396634, 0.123377, 0.00648837, 0.00903441, 0.00623107],
  ],
  [
    [-0.69824, 0.28562, 0.0831517, 0.0862751, 0.0816851, 0.161508],
    [0.24082, -0.602467, 0.0557226, 0.0546814, 0.0557528, 0.19549],
    [0.230246, 0.450868, 0.0389607, 0.038309, 0.0391602, -0.797544],
    [0.280884, -0.570478, 0.0326593, 0.0339046, 0.0326856, 0.190345],
    [-0.576714, 0.315517, 0.0338439, 0.0393744, 0.0339315, 0.154046],
  ],
];

/** The TF case as [2, 7, 6] logits with classes permuted by `cls` (old class → new class). */
function tfCase(cls: (k: number) => number): { logits: Tensor; grads: Float32Array } {
  const T = 7,
    C = 6;
  const logits = new Float32Array(2 * T * C).fill(NaN),
    grads = new Float32Array(2 * T * C);
  for (let i = 0; i < 2; i++) {
    for (let t = 0; t < 5; t++) {
      for (let k = 0; k < C; k++) {
        logits[(i * T + t) * C + cls(k)] = Math.log(Math.fround(TF_PROBS[i]![t]![k]!));
        grads[(i * T + t) * C + cls(k)] = TF_GRADS[i]![t]![k]!;
      }
    }
  }
  return { logits: new Tensor([2, T, C], logits), grads };
}

test('CTC loss: TensorFlow testBasic known answers, blank last and remapped to blank 0; NaN padding frames never read', () => {
  // tolerances: the published values have 6 significant digits
  for (const [blank, cls] of [
    [5, (k: number) => k],
    [0, (k: number) => (k + 1) % 6],
  ] as const) {
    const { logits, grads } = tfCase(cls);
    const loss = new CtcLoss(B, { blank, reduction: 'sum' });
    const r = loss.compute(
      logits,
      targets(
        TF_TARGETS.map((row) => row.map(cls)),
        [5, 5],
      ),
      1,
    );
    assertClose(r.losses, TF_LOSSES, { atol: 1e-5, rtol: 0, what: `losses (blank ${blank})` });
    assert.ok(Math.abs(r.lossSum - (TF_LOSSES[0]! + TF_LOSSES[1]!)) < 2e-5);
    assertClose(r.dlogits.data, grads, { atol: 2e-6, rtol: 0, what: `gradient (blank ${blank})` });
  }
});

test('CTC loss: warp-ctc small_test (T = 2, labels 1 2: the one alignment) ', () => {
  // baidu-research/warp-ctc tests/test_cpu.cpp small_test: score = softmax[0][1] · softmax[1][2]
  const acts = Float32Array.from([0.1, 0.6, 0.1, 0.1, 0.1, 0.1, 0.1, 0.6, 0.1, 0.1]);
  const sm = (row: number, k: number) => {
    const r = [...acts.subarray(row * 5, row * 5 + 5)];
    return Math.exp(r[k]!) / r.reduce((s, v) => s + Math.exp(v), 0);
  };
  const r = new CtcLoss(B, { blank: 0, reduction: 'sum' }).compute(
    new Tensor([1, 2, 5], acts),
    targets([[1, 2]], [2]),
    1,
  );
  assert.ok(Math.abs(r.lossSum + Math.log(sm(0, 1) * sm(1, 2))) < 1e-9, `${r.lossSum}`);
});

test('CTC loss: equals brute-force enumeration of every alignment (T ≤ 5, C ≤ 3, repeats, blanks 0 and 2)', () => {
  const cases: { frames: number; classes: number; blank: number; labels: number[] }[] = [
    { frames: 1, classes: 2, blank: 0, labels: [] },
    { frames: 1, classes: 2, blank: 0, labels: [1] },
    { frames: 3, classes: 3, blank: 0, labels: [1, 1] },
    { frames: 4, classes: 3, blank: 0, labels: [1, 2] },
    { frames: 5, classes: 3, blank: 0, labels: [2, 2, 1] },
    { frames: 5, classes: 3, blank: 2, labels: [0, 1, 0] },
    { frames: 5, classes: 3, blank: 1, labels: [0, 0] },
    { frames: 5, classes: 2, blank: 1, labels: [0, 0, 0] },
    { frames: 4, classes: 3, blank: 0, labels: [] },
  ];
  for (const [n, c] of cases.entries()) {
    const logits = randomArray(c.frames * c.classes, 40 + n).map((v) => 2 * v);
    const r = new CtcLoss(B, { blank: c.blank, reduction: 'sum' }).compute(
      new Tensor([1, c.frames, c.classes], logits),
      targets([c.labels], [c.frames]),
      1,
    );
    const expected = bruteForceCtcLoss(logits, c.frames, c.classes, c.labels, c.blank);
    assert.ok(
      Math.abs(r.lossSum - expected) < 1e-9 * Math.max(1, expected),
      `case ${n}: ${r.lossSum} vs brute force ${expected}`,
    );
  }
});

test('CTC loss: gradient of each reduction against finite differences; padding frames get none', () => {
  // sample 3 has exactly the frames it needs (1 _ 1 2 _ 2: every frame on the band's edge)
  const N = 4,
    T = 6,
    C = 4;
  const logits = new Tensor(
    [N, T, C],
    randomArray(N * T * C, 5).map((v) => 1.5 * v),
  );
  const tg = targets([[1, 1, 2], [3], [], [1, 1, 2, 2]], [6, 4, 5, 6]);
  for (const reduction of ['sum', 'mean', 'batchMean'] as const) {
    const loss = new CtcLoss(B, { reduction });
    const scale = ctcGradScale(reduction, 1 / N, N);
    const objective = () => ctcReducedLoss(reduction, loss.compute(logits, tg, 0).lossSum, N);
    const grad = loss.compute(logits, tg, scale).dlogits.data.slice();
    const eps = 1e-3;
    for (let i = 0; i < logits.size; i++) {
      const saved = logits.data[i]!;
      logits.data[i] = saved + eps;
      const up = objective();
      logits.data[i] = saved - eps;
      const down = objective();
      logits.data[i] = saved;
      const numeric = (up - down) / (2 * eps);
      assert.ok(
        Math.abs(grad[i]! - numeric) < 1e-4 + 1e-3 * Math.abs(numeric),
        `${reduction} dlogits[${i}]: ${grad[i]} vs ${numeric}`,
      );
    }
    // sample 1 has 4 valid frames of 6
    for (let i = (1 * T + 4) * C; i < 2 * T * C; i++) assert.equal(grad[i], 0, `padding frame value ${i}`);
  }
});

test('CTC loss: reductions are sum, PyTorch mean (by label count, empty counts 1) and the batch mean', () => {
  const N = 3,
    T = 5,
    C = 3;
  const logits = new Tensor([N, T, C], randomArray(N * T * C, 9));
  const tg = targets([[1, 2], [2, 2, 1], []], [5, 5, 3]);
  const per = new CtcLoss(B, { reduction: 'sum' }).compute(logits, tg, 1).losses.slice();
  const sum = new CtcLoss(B, { reduction: 'sum' }).compute(logits, tg, 1).lossSum;
  const mean = new CtcLoss(B, { reduction: 'mean' }).compute(logits, tg, 1).lossSum;
  const batchMean = new CtcLoss(B, { reduction: 'batchMean' }).compute(logits, tg, 1).lossSum;
  assert.ok(Math.abs(sum - (per[0]! + per[1]! + per[2]!)) < 1e-12);
  assert.ok(Math.abs(ctcReducedLoss('mean', mean, N) - (per[0]! / 2 + per[1]! / 3 + per[2]!) / 3) < 1e-12);
  assert.ok(Math.abs(ctcReducedLoss('batchMean', batchMean, N) - sum / 3) < 1e-12);
  assert.equal(ctcReducedLoss('sum', sum, N), sum);
  assert.equal(ctcGradScale('sum', 2 / 8, 8), 2);
  assert.equal(ctcGradScale('mean', 2 / 8, 8), 0.25);
});

test('CTC loss: a sample too short for its transcript is named (index and describe hook), unless zeroInfinity', () => {
  assert.equal(ctcMinFrames([1, 1, 2, 2, 2]), 8);
  assert.equal(ctcMinFrames([]), 0);
  assert.equal(ctcMinFrames([9, 1, 1, 2], 3, 1), 4);
  const logits = new Tensor([2, 4, 3], randomArray(24, 2));
  const tg = {
    ...targets(
      [
        [1, 2],
        [1, 1, 2],
      ],
      [4, 3],
    ),
    describe: (i: number) => `train.csv line ${i + 2}`,
  };
  assert.throws(
    () => new CtcLoss(B).compute(logits, tg, 1),
    /CTC loss: sample 1 of the batch \(train\.csv line 3\) is too short for its transcript: 3 frames, but its 3 labels with 1 repeated adjacent label \(a blank must separate them\) need at least 4; .*zeroInfinity/,
  );
  const z = new CtcLoss(B, { zeroInfinity: true, reduction: 'sum' });
  const r = z.compute(logits, tg, 1);
  assert.equal(r.impossible, 1);
  assert.equal(r.losses[1], 0);
  assert.ok(Number.isFinite(r.lossSum) && Math.abs(r.lossSum - r.losses[0]!) < 1e-12);
  assert.ok(
    r.dlogits.data.subarray(12).every((v) => v === 0),
    'an impossible sample has zero gradient',
  );
  assert.ok(r.dlogits.data.subarray(0, 12).some((v) => v !== 0));
  assert.ok(r.dlogits.data.every(Number.isFinite));
});

test('CTC loss: bad shapes, lengths and labels are errors naming the sample', () => {
  const loss = new CtcLoss(B);
  const logits = new Tensor([2, 3, 3], randomArray(18, 1));
  assert.throws(
    () => loss.compute(new Tensor([6, 3], logits.data), targets([[1], [1]], [3, 3]), 1),
    /logits must be \[N, T, C\]/,
  );
  assert.throws(
    () => loss.compute(logits, targets([[1], [1]], [3, 4]), 1),
    /sample 1 of the batch has input length 4, outside 0 … 3/,
  );
  assert.throws(
    () => loss.compute(logits, targets([[1], [0]], [3, 3]), 1),
    /sample 1 of the batch has label 0 at position 0: .*other than the blank \(0\)/,
  );
  assert.throws(
    () => loss.compute(logits, targets([[3], [1]], [3, 3]), 1),
    /sample 0 of the batch has label 3 at position 0/,
  );
  assert.throws(
    () => loss.compute(logits, { ...targets([[1], [1]], [3, 3]), labels: Int32Array.of(1, 1, 1) }, 1),
    /not a multiple of the 2 samples/,
  );
  assert.throws(
    () => loss.compute(logits, { ...targets([[1], [1]], [3, 3]), labelLengths: Int32Array.of(1, 2) }, 1),
    /label length 2, outside 0 … 1/,
  );
  assert.throws(
    () => new CtcLoss(B, { blank: 3 }).compute(logits, targets([[1], [1]], [3, 3]), 1),
    /blank 3 is not a class of the 3 logits/,
  );
  assert.throws(() => new CtcLoss(B, { reduction: 'avg' as never }), /reduction must be sum, mean or batchMean/);
});

test('CTC loss: huge logits stay finite; an empty batch and zero-frame samples work; buffers are reused', () => {
  const loss = new CtcLoss(B, { reduction: 'sum' });
  const big = new Tensor(
    [1, 4, 3],
    randomArray(12, 3).map((v) => 500 * v),
  );
  const r = loss.compute(big, targets([[1, 2]], [4]), 1);
  assert.ok(Number.isFinite(r.lossSum) && r.dlogits.data.every(Number.isFinite), `${r.lossSum}`);
  const expected = bruteForceCtcLoss(big.data, 4, 3, [1, 2], 0);
  assert.ok(Math.abs(r.lossSum - expected) < 1e-6 * expected, `${r.lossSum} vs ${expected}`);
  assert.equal(loss.compute(new Tensor([0, 4, 3]), targets([], []), 1).lossSum, 0);
  const z = loss.compute(new Tensor([2, 2, 3], randomArray(12, 4)), targets([[], [1]], [0, 2]), 1);
  assert.equal(z.losses[0], 0);
  assert.ok(z.dlogits.data.subarray(0, 6).every((v) => v === 0));
  // the gradient buffer grows only: a smaller batch after a larger one reuses it
  const a = loss.compute(new Tensor([2, 5, 3], randomArray(30, 6)), targets([[1], [2]], [5, 5]), 1).dlogits.data;
  const b = loss.compute(new Tensor([1, 5, 3], randomArray(15, 6)), targets([[1]], [5]), 1).dlogits.data;
  assert.equal(a.buffer, b.buffer);
});
