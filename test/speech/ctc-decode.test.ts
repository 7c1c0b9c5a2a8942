import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Tensor } from '../../src/tensor/tensor.ts';
import { greedyDecode, greedyDecodeBatch, labelsToText } from '../../src/ctc/ctcDecode.ts';
import { beamSearchBatch, prefixBeamSearch } from '../../src/ctc/prefixBeamSearch.ts';
import { labellingProbabilities, softmaxRows } from '../nn/ctcBruteForce.ts';
import { randomArray } from '../util/close.ts';

/** Logits whose softmax is the given probability rows (log of them). */
const fromProbs = (rows: number[][]): Float32Array => Float32Array.from(rows.flat().map(Math.log));
/** One-hot-ish logits: class k of each frame gets `high`. */
const peaked = (classes: number, path: number[], high = 8): Float32Array => {
  const out = new Float32Array(path.length * classes);
  path.forEach((k, t) => {
    out[t * classes + k] = high;
  });
  return out;
};

test('greedy decoding: best path, repeats merged, blanks dropped; blank anywhere; text by the class convention', () => {
  assert.deepEqual([...greedyDecode(peaked(3, [0, 1, 1, 0, 1, 2, 2, 0]), 8, 3)], [1, 1, 2]);
  assert.deepEqual([...greedyDecode(peaked(3, [1, 1, 1]), 3, 3)], [1]);
  assert.deepEqual([...greedyDecode(peaked(3, [0, 0]), 2, 3)], []);
  assert.deepEqual([...greedyDecode(peaked(3, []), 0, 3)], []);
  // blank last (DeepSpeech): class 2 is the blank
  assert.deepEqual([...greedyDecode(peaked(3, [0, 2, 0, 1, 1, 2]), 6, 3, 2)], [0, 0, 1]);
  // ties: the first maximum wins (frame 0: blank over 1; frame 1: 1 over 2)
  assert.deepEqual([...greedyDecode(new Float32Array([1, 1, 0, 0, 1, 1]), 2, 3)], [1]);
  const symbols = [' ', 'a', 'b'];
  assert.equal(labelsToText([2, 3, 1, 2], symbols, 0), 'ab a');
  assert.equal(labelsToText([1, 2, 0, 1], symbols, 3), 'ab a');
  assert.throws(() => labelsToText([4], symbols, 0), /class 4 is not a symbol of the 3-symbol alphabet with blank 0/);
  assert.throws(() => labelsToText([0], symbols, 0), /class 0 is not a symbol/);
});

test("greedy and beam decoding of a batch read only each sample's valid frames", () => {
  const N = 2,
    T = 4,
    C = 3;
  const logits = new Float32Array(N * T * C);
  logits.set(peaked(3, [1, 0, 2, 2]), 0);
  logits.set(peaked(3, [2, 2, 1, 1]), T * C);
  // sample 1 has 2 valid frames: the rest is padding that would decode as 1
  const t = new Tensor([N, T, C], logits);
  assert.deepEqual(
    greedyDecodeBatch(t, [4, 2]).map((l) => [...l]),
    [[1, 2], [2]],
  );
  assert.deepEqual(
    beamSearchBatch(t, [4, 2], { beamWidth: 4 }).map((h) => [...h.labels]),
    [[1, 2], [2]],
  );
  assert.throws(() => greedyDecodeBatch(t, [4, 5]), /sample 1 of the batch has input length 5, outside 0 … 4/);
  assert.throws(() => beamSearchBatch(t, [4]), /2 samples need 2 input lengths/);
  assert.throws(() => prefixBeamSearch(logits, 4, 3, { beamWidth: 0 }), /beamWidth must be an integer ≥ 1/);
  assert.throws(() => prefixBeamSearch(logits, 4, 3, { blank: 3 }), /blank 3 is not a class of the 3 logits/);
});

test('beam search finds the most probable labelling where the best path is wrong', () => {
  // two frames, P(blank) = 0.6, P(a) = 0.4: the best path is "" (0.36) but "a" has 0.24 + 0.24 + 0.16 = 0.64
  const logits = fromProbs([
    [0.6, 0.4],
    [0.6, 0.4],
  ]);
  assert.deepEqual([...greedyDecode(logits, 2, 2)], []);
  const beam = prefixBeamSearch(logits, 2, 2, { beamWidth: 2 });
  assert.deepEqual([...beam[0]!.labels], [1]);
  assert.ok(Math.abs(beam[0]!.logProb - Math.log(0.64)) < 1e-6, `${beam[0]!.logProb}`);
  assert.deepEqual([...beam[1]!.labels], []);
  assert.ok(Math.abs(beam[1]!.logProb - Math.log(0.36)) < 1e-6);
  // a repeated label needs a blank between: a, blank, a is "aa"; a, a is "a"
  assert.deepEqual([...prefixBeamSearch(peaked(2, [1, 0, 1]), 3, 2)[0]!.labels], [1, 1]);
  assert.deepEqual([...prefixBeamSearch(peaked(2, [1, 1]), 2, 2)[0]!.labels], [1]);
});

test("beam search against brute force: an unpruned beam gives every labelling's exact probability, the best first", () => {
  // T ≤ 5, C ≤ 3: at most 3^5 alignments; a width of 64 never prunes (at most 1 + 2 + … labellings)
  let greedyWrong = 0;
  for (let n = 0; n < 40; n++) {
    const frames = 1 + (n % 5),
      classes = 2 + (n % 2),
      blank = n % classes;
    const logits = randomArray(frames * classes, 100 + n).map((v) => 1.5 * v);
    const exact = labellingProbabilities(softmaxRows(logits, frames, classes), blank);
    const beam = prefixBeamSearch(logits, frames, classes, { beamWidth: 64, blank });
    for (const h of beam) {
      const p = exact.get([...h.labels].join(','))!;
      assert.ok(Math.abs(h.logProb - Math.log(p)) < 1e-9, `case ${n}: ${[...h.labels]} ${h.logProb} vs ${Math.log(p)}`);
    }
    const best = Math.max(...exact.values());
    assert.ok(
      Math.abs(Math.exp(beam[0]!.logProb) - best) < 1e-12,
      `case ${n}: beam's best ${Math.exp(beam[0]!.logProb)} vs ${best}`,
    );
    assert.equal(beam.length, [...exact.values()].filter((p) => p > 0).length, `case ${n}: every labelling`);
    const greedyP = exact.get([...greedyDecode(logits, frames, classes, blank)].join(','))!;
    assert.ok(Math.exp(beam[0]!.logProb) >= greedyP - 1e-12, `case ${n}: beam worse than greedy`);
    if (greedyP < best - 1e-12) greedyWrong++;
  }
  assert.ok(greedyWrong > 0, 'some random case should have greedy miss the best labelling');
});

test('beam search equals greedy where the best path dominates (width 1 and wider)', () => {
  for (let n = 0; n < 20; n++) {
    const frames = 3 + (n % 8),
      classes = 3 + (n % 4),
      blank = n % classes;
    const path = Array.from(randomArray(frames, 300 + n), (v) => Math.floor(((v + 1) / 2) * classes));
    const logits = peaked(classes, path, 12);
    const greedy = [...greedyDecode(logits, frames, classes, blank)];
    for (const beamWidth of [1, 4]) {
      assert.deepEqual(
        [...prefixBeamSearch(logits, frames, classes, { beamWidth, blank })[0]!.labels],
        greedy,
        `case ${n}, width ${beamWidth}`,
      );
    }
  }
});
