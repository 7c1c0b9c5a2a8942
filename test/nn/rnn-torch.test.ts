/**
 * paratrain's lstm/gru against torch.nn.LSTM/GRU (fixtures/make_rnn_fixture.py, float64, a padded
 * batch through pack_padded_sequence with non-zero padding): torch's state dict loaded by NAME into
 * the layer's parameters (same shapes, same gate order), then outputs, final states (h_n) and the
 * gradients of the input and every weight compared, on every available backend (onednn both ways:
 * each direction as one oneDNN primitive, its default with AVX-512, and stepping).
 * Tolerance: rtol 1e-5, atol 1e-6 (float32 against a float64 reference over 5 steps).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Tensor } from '../../src/tensor/tensor.ts';
import { Recurrent } from '../../src/nn/recurrent.ts';
import { Sequential } from '../../src/nn/model.ts';
import type { Backend } from '../../src/kernels/backend.ts';
import { assertClose } from '../util/close.ts';
import { availableBackends, withLengths } from './sequenceHelpers.ts';

interface Case {
  kind: 'lstm' | 'gru';
  bidirectional: boolean;
  params: Record<string, { shape: number[]; values: number[] }>;
  output: number[];
  last: number[];
  rSeq: number[];
  rLast: number[];
  gradsSeq: Record<string, number[]>;
  gradsLast: Record<string, number[]>;
}
const fixture = JSON.parse(readFileSync(new URL('./fixtures/rnn.json', import.meta.url), 'utf8')) as {
  N: number;
  T: number;
  F: number;
  H: number;
  lengths: number[];
  x: number[];
  cases: Case[];
};
const { N, T, F, H } = fixture;
const tol = { rtol: 1e-5, atol: 1e-6 };

type SequenceCells = ('lstm' | 'gru')[];
type WithCells = { setSequenceCells?(cells: SequenceCells): SequenceCells };

/** The fixture's case through one layer on B: outputs, final states, input and weight gradients, both outputs. */
function check(B: Backend, c: Case, label: string): void {
  for (const returnSequences of [true, false]) {
    const layer = new Recurrent(B, `torch ${label}`, [T, F], c.kind, H, {
      returnSequences,
      ...(c.bidirectional ? { bidirectional: 'concat' as const } : {}),
    });
    const model = new Sequential(B, [layer], [T, F]);
    // torch's state dict, by name: the layouts are the same
    assert.deepStrictEqual(
      model.paramEntries.map((e) => e.name.replace('layers.0.', '')),
      Object.keys(c.params),
    );
    for (const e of model.paramEntries) {
      const p = c.params[e.name.replace('layers.0.', '')]!;
      assert.deepStrictEqual(e.shape, p.shape, e.name);
      model.params.set(p.values, e.offset);
    }
    const ctx = withLengths(...fixture.lengths);
    const y = model.forward(new Tensor([N, T, F], Float32Array.from(fixture.x)), ctx);
    assertClose(y.data, returnSequences ? c.output : c.last, { ...tol, what: `${label} output` });
    model.zeroGrads();
    const dx = layer.backward(new Tensor(y.shape, Float32Array.from(returnSequences ? c.rSeq : c.rLast)), true)!;
    const want = returnSequences ? c.gradsSeq : c.gradsLast;
    assertClose(dx.data, want.input!, { ...tol, what: `${label} d/dinput` });
    for (const e of model.paramEntries) {
      assertClose(model.grads.subarray(e.offset, e.offset + e.size), want[e.name.replace('layers.0.', '')]!, {
        ...tol,
        what: `${label} d/d${e.name}`,
      });
    }
  }
}

for (const B of await availableBackends()) {
  const cellsOf = B as Backend & WithCells;
  for (const c of fixture.cases) {
    const label = `${c.kind}${c.bidirectional ? ' bidirectional' : ''}`;
    // onednn runs a direction as one oneDNN primitive (with AVX-512) unless told to step: both
    const variants: { on: string; cells: SequenceCells | null }[] = [{ on: B.name, cells: null }];
    if (cellsOf.setSequenceCells) variants.push({ on: `${B.name}, stepping`, cells: [] });
    for (const { on, cells } of variants) {
      test(`${label} equals torch.nn.${c.kind.toUpperCase()} on a packed batch, on ${on}`, () => {
        const was = cells ? cellsOf.setSequenceCells!(cells) : null;
        try {
          check(B, c, label);
        } finally {
          if (was) cellsOf.setSequenceCells!(was);
        }
      });
    }
  }
}
