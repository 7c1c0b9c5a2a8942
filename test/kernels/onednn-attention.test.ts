// The onednn backend's attention kernels (native/onednn/attention.c: batched matmul primitives, the
// softmax rows and their backward in C) against the js kernels (src/kernels/js/attention.ts, the
// definition) within 1e-5 (P within 2e-6): P, O, dP→dS, dV, dQ and dK of the four passes in a layer's order, on
// shapes across the 16-lane edges of the rows (T 1, 15, 17, 33), odd head widths, causal or not,
// lengths of 0, short, whole and past T, and enough heads that the score kernels run in several
// chunks with a shorter last one. Every row path: the vector one here (AVX-512 where oneDNN dispatches
// to it, else AVX2), AVX2 in a child under ONEDNN_MAX_CPU_ISA=AVX2 where this CPU has AVX-512, and
// the scalar float64 rows setDirect(false) selects. Skipped when the addon is not built.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { assertClose, randomArray } from '../util/close.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import type { AttentionGeometry } from '../../src/kernels/attentionKernels.ts';
import type { Backend } from '../../src/kernels/backend.ts';
import { createOneDnnBackend, onednnUnavailableReason } from '../../src/kernels/onednn/index.ts';

const onednn = await createOneDnnBackend();
const skip = onednn ? false : `onednn backend unavailable: ${onednnUnavailableReason()}`;
const TOL = { rtol: 1e-5, atol: 1e-6 };
// the weights themselves within a few float32 roundings: an exp off by 1e-5 would pass TOL
const PROBS_TOL = { rtol: 2e-6, atol: 1e-9 };

type Case = [N: number, heads: number, T: number, headDim: number, causal: boolean, lengths: number[] | null];
const CASES: Case[] = [
  [1, 1, 1, 1, false, null],
  [1, 1, 1, 3, true, [1]],
  [2, 3, 17, 5, true, [17, 9]],
  [3, 2, 33, 7, false, [0, 33, 40]],
  [2, 2, 16, 16, true, null],
  [1, 2, 15, 4, false, null],
  [1, 2, 64, 32, true, [31]],
  // 10,000 scores a head: the score kernels take 13 heads a chunk, here 13 and then 1
  [2, 7, 100, 8, true, [100, 57]],
];

/** The four passes on `b`, every output first filled with NaN so that each must be written. */
function passes(b: Backend, g: AttentionGeometry, lengths: Int32Array | null, seed: number) {
  const heads = g.N * g.heads * g.T * g.headDim,
    scores = g.N * g.heads * g.T * g.T;
  const [q, k, v, dout] = [0, 1, 2, 3].map((i) => randomArray(heads, seed + i)) as [
    Float32Array,
    Float32Array,
    Float32Array,
    Float32Array,
  ];
  // scores of a few units, as trained attention has: the softmax rows far from uniform
  for (const a of [q, k]) for (let i = 0; i < a.length; i++) a[i] = a[i]! * 3;
  const [probs, dprobs] = [scores, scores].map((n) => new Float32Array(n).fill(Number.NaN)) as [
    Float32Array,
    Float32Array,
  ];
  const [out, dv, dq, dk] = [0, 1, 2, 3].map(() => new Float32Array(heads).fill(Number.NaN)) as [
    Float32Array,
    Float32Array,
    Float32Array,
    Float32Array,
  ];
  b.attentionWeights(q, k, lengths, g, probs);
  b.attentionApply(probs, v, g, out);
  b.attentionApplyBackward(probs, v, dout, g, dprobs, dv);
  const dP = dprobs.slice();
  b.attentionWeightsBackward(q, k, probs, dprobs, g, dq, dk);
  return { probs, out, dP, dS: dprobs, dv, dq, dk };
}

for (const rows of ['vector', 'scalar'] as const) {
  test(`onednn attention kernels equal the js kernels (${rows} rows)`, { skip }, () => {
    const b = onednn!;
    // oneDNN at AVX2 or above: the CPU has AVX2 (and FMA), so the rows run in vectors
    const vectorHere = rows === 'vector' && /avx2|avx512/.test(b.onednn.isa);
    const was = b.setDirect(rows === 'vector');
    try {
      for (const [i, [N, heads, T, headDim, causal, lens]] of CASES.entries()) {
        const g: AttentionGeometry = { N, heads, T, headDim, causal };
        const lengths = lens && Int32Array.from(lens);
        const before = b.stats().attention;
        const want = passes(jsBackend, g, lengths, 10 * i + 1);
        const got = passes(b, g, lengths, 10 * i + 1);
        const after = b.stats().attention;
        // the addon declines only by counting a product oneDNN refused: none, so it ran every call
        assert.equal(after.unsupported, before.unsupported, 'oneDNN took every product');
        if (vectorHere) assert.equal(after.direct - before.direct, 2, 'both score kernels ran their rows in vectors');
        if (rows === 'scalar') assert.equal(after.direct, before.direct, 'setDirect(false): scalar rows');
        const what = `N ${N}, ${heads} heads, T ${T}, headDim ${headDim}, causal ${causal}, lengths ${lens ?? 'none'}`;
        for (const key of Object.keys(want) as (keyof typeof want)[])
          assertClose(got[key], want[key], { ...(key === 'probs' ? PROBS_TOL : TOL), what: `${key} (${what})` });
      }
    } finally {
      b.setDirect(was);
    }
  });
}

/** This environment without the test runner's own marker, so the child reports its tests as TAP on stdout. */
function childEnv(): NodeJS.ProcessEnv {
  const { NODE_TEST_CONTEXT: _, ...env } = process.env;
  return env;
}

test('the AVX2 rows equal the js kernels too (this file in a child under ONEDNN_MAX_CPU_ISA=AVX2)', {
  skip:
    skip ||
    (process.env.ONEDNN_MAX_CPU_ISA
      ? 'already the child'
      : !onednn!.onednn.isa.startsWith('avx512') && 'no AVX-512 here: the vector case above ran the AVX2 rows'),
}, () => {
  const r = spawnSync(
    process.execPath,
    ['--import', 'tsx', '--test', '--test-name-pattern=vector rows', fileURLToPath(import.meta.url)],
    { env: { ...childEnv(), ONEDNN_MAX_CPU_ISA: 'AVX2' }, encoding: 'utf8' },
  );
  assert.equal(r.status, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /^ok \d+ - onednn attention kernels equal the js kernels \(vector rows\)$/m);
});

test('onednn attention kernels refuse short arrays before writing', { skip }, () => {
  const b = onednn!;
  const g: AttentionGeometry = { N: 2, heads: 2, T: 4, headDim: 3, causal: true };
  const q = new Float32Array(48),
    probs = new Float32Array(63).fill(7);
  assert.throws(() => b.attentionWeights(q, q, null, g, probs), RangeError);
  assert.ok(probs.every((p) => p === 7));
  assert.throws(() => b.attentionWeights(q, q, new Int32Array(1), g, new Float32Array(64)), /lengths/);
});
