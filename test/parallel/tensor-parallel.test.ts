import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { Tensor } from '../../src/tensor/tensor.ts';
import { Dense } from '../../src/nn/dense.ts';
import type { ActivationKind } from '../../src/kernels/activation.ts';
import { rowSplit, takeColumns, type RowSplit } from '../../src/parallel/modelParallel/activationExchange.ts';
import {
  ColumnParallelDense,
  RowParallelDense,
  columnShardCopy,
  rowShardCopy,
  unitShards,
} from '../../src/parallel/modelParallel/tensorParallel.ts';
import { localGroup } from './localGroup.ts';
import { assertClose, randomArray } from '../util/close.ts';

// Reference: the unsplit Dense layer on the js backend. A split layer computes the same sums in
// other groupings (partial sums over devices), so float32 results agree to ~1e-6 relative; we allow
// rtol 1e-5 with atol 1e-6 for values near zero.
const TOL = { rtol: 1e-5, atol: 1e-6 };
const CTX = { training: true, seed: 1, step: 0, sampleOffset: 0 };
/** the context a section layer gets: the step's global batch, which each device's rows follow from */
const stepOf = (split: RowSplit) => ({ ...CTX, globalBatch: split.total });

interface Reference {
  y: Float32Array;
  dx: Float32Array;
  dw: Float32Array;
  db: Float32Array;
}

function reference(
  x: Float32Array,
  w: Float32Array,
  b: Float32Array,
  dy: Float32Array,
  n: number,
  inF: number,
  units: number,
  activation: ActivationKind,
): Reference {
  const layer = new Dense(jsBackend, 'ref', [inF], units, activation, true);
  const dw = new Float32Array(w.length),
    db = new Float32Array(b.length);
  layer.bind([w, b], [dw, db]);
  const y = layer.forward(new Tensor([n, inF], x), CTX).data.slice();
  const dx = layer.backward(new Tensor([n, units], dy), true)!.data.slice();
  return { y, dx, dw, db };
}

const rowsOf = (a: Float32Array, split: RowSplit, rank: number, width: number) =>
  a.slice(split.starts[rank]! * width, (split.starts[rank]! + split.counts[rank]!) * width);
const columnsOf = (a: Float32Array, rows: number, total: number, range: { start: number; end: number }) => {
  const out = new Float32Array(rows * (range.end - range.start));
  takeColumns(a, rows, total, range.start, range.end, out);
  return out;
};

test('unitShards splits unevenly like ownedSlice (10 units on 4 devices: 3, 3, 2, 2) and refuses more devices than units', () => {
  assert.deepStrictEqual(
    unitShards(10, 4, 'L').ranges.map((r) => r.end - r.start),
    [3, 3, 2, 2],
  );
  assert.throws(
    () => unitShards(3, 4, 'model.layers[5] dense'),
    /model\.layers\[5\] dense: 'parallel: model' splits its 3 units over 4 devices, but every device needs at least one; use at most 3 devices/,
  );
});

for (const { devices, n, activation } of [
  { devices: 2, n: 6, activation: 'relu' as const },
  { devices: 3, n: 7, activation: 'tanh' as const },
  { devices: 4, n: 5, activation: 'linear' as const },
]) {
  const inF = 9,
    units = 10;
  test(`column-parallel dense on ${devices} devices (uneven units and rows) equals the unsplit layer: output, input and weight gradients`, async () => {
    const x = randomArray(n * inF, 1),
      w = randomArray(inF * units, 2),
      b = randomArray(units, 3),
      dy = randomArray(n * units, 4);
    const ref = reference(x, w, b, dy, n, inF, units, activation);
    const split = rowSplit(n, devices);
    for (const mode of [
      { inputRows: false, gatherOutput: false },
      { inputRows: true, gatherOutput: true },
    ]) {
      await Promise.all(
        localGroup(devices).map(async (comm) => {
          const r = comm.rank,
            what = `G=${devices} rank ${r} ${JSON.stringify(mode)}`;
          const layer = new ColumnParallelDense(jsBackend, comm, 'col', inF, units, activation, true, mode);
          const range = { start: layer.start, end: layer.end },
            width = range.end - range.start;
          const sw = new Float32Array(inF * width),
            sb = new Float32Array(width),
            dw = new Float32Array(sw.length),
            db = new Float32Array(width);
          columnShardCopy({ kernel: w, bias: b }, { kernel: sw, bias: sb }, inF, units, range, true);
          layer.bind([sw, sb], [dw, db]);
          const input = mode.inputRows ? rowsOf(x, split, r, inF) : x;
          const y = await layer.forwardAsync(new Tensor([input.length / inF, inF], input), stepOf(split));
          assertClose(y.data, mode.gatherOutput ? ref.y : columnsOf(ref.y, n, units, range), {
            ...TOL,
            what: `${what} y`,
          });
          const dx = await layer.backwardAsync(
            new Tensor(y.shape, mode.gatherOutput ? dy : columnsOf(dy, n, units, range)),
          );
          assertClose(dx!.data, mode.inputRows ? rowsOf(ref.dx, split, r, inF) : ref.dx, {
            ...TOL,
            what: `${what} dx`,
          });
          assertClose(dw, columnsOf(ref.dw, inF, units, range), { ...TOL, what: `${what} dW` });
          assertClose(db, ref.db.slice(range.start, range.end), { ...TOL, what: `${what} db` });
        }),
      );
    }
  });

  test(`row-parallel dense on ${devices} devices (uneven input features and rows) equals the unsplit layer`, async () => {
    const x = randomArray(n * inF, 5),
      w = randomArray(inF * units, 6),
      b = randomArray(units, 7),
      dy = randomArray(n * units, 8);
    const ref = reference(x, w, b, dy, n, inF, units, activation);
    const split = rowSplit(n, devices);
    for (const scatterRows of [false, true]) {
      await Promise.all(
        localGroup(devices).map(async (comm) => {
          const r = comm.rank,
            what = `G=${devices} rank ${r} scatterRows=${scatterRows}`;
          const layer = new RowParallelDense(jsBackend, comm, 'row', inF, units, activation, true, { scatterRows });
          const range = { start: layer.start, end: layer.end },
            width = range.end - range.start;
          const sw = new Float32Array(width * units),
            sb = new Float32Array(units),
            dw = new Float32Array(sw.length),
            db = new Float32Array(units);
          rowShardCopy({ kernel: w, bias: b }, { kernel: sw, bias: sb }, units, range, true);
          layer.bind([sw, sb], [dw, db]);
          const y = await layer.forwardAsync(new Tensor([n, width], columnsOf(x, n, inF, range)), stepOf(split));
          assertClose(y.data, scatterRows ? rowsOf(ref.y, split, r, units) : ref.y, { ...TOL, what: `${what} y` });
          const dx = await layer.backwardAsync(new Tensor(y.shape, scatterRows ? rowsOf(dy, split, r, units) : dy));
          assertClose(dx!.data, columnsOf(ref.dx, n, inF, range), { ...TOL, what: `${what} dx` });
          assertClose(dw, ref.dw.slice(range.start * units, range.end * units), { ...TOL, what: `${what} dW` });
          assertClose(db, ref.db, { ...TOL, what: `${what} db` });
        }),
      );
    }
  });
}

test('column-parallel then row-parallel (Megatron pair, no communication in between) equals two unsplit layers', async () => {
  const devices = 3,
    n = 8,
    inF = 6,
    hidden = 11,
    out = 5;
  const x = randomArray(n * inF, 11),
    w1 = randomArray(inF * hidden, 12),
    b1 = randomArray(hidden, 13);
  const w2 = randomArray(hidden * out, 14),
    b2 = randomArray(out, 15),
    dy = randomArray(n * out, 16);
  const l1 = new Dense(jsBackend, 'a', [inF], hidden, 'relu', true),
    l2 = new Dense(jsBackend, 'b', [hidden], out, 'linear', true);
  const g = {
    w1: new Float32Array(w1.length),
    b1: new Float32Array(hidden),
    w2: new Float32Array(w2.length),
    b2: new Float32Array(out),
  };
  l1.bind([w1, b1], [g.w1, g.b1]);
  l2.bind([w2, b2], [g.w2, g.b2]);
  const yRef = l2.forward(l1.forward(new Tensor([n, inF], x), CTX), CTX).data.slice();
  const dxRef = l1.backward(l2.backward(new Tensor([n, out], dy), true)!, true)!.data.slice();
  const split = rowSplit(n, devices);
  const group = localGroup(devices);
  let collectives = 0;
  for (const comm of group) {
    for (const op of ['allreduce', 'allgather', 'reduceScatter'] as const) {
      const inner = comm[op].bind(comm) as (...a: unknown[]) => Promise<never>;
      (comm as unknown as Record<string, unknown>)[op] = (...a: unknown[]) => {
        collectives++;
        return inner(...a);
      };
    }
  }
  await Promise.all(
    group.map(async (comm) => {
      const col = new ColumnParallelDense(jsBackend, comm, 'a', inF, hidden, 'relu', true, { inputRows: true });
      const row = new RowParallelDense(jsBackend, comm, 'b', hidden, out, 'linear', true, { scatterRows: true });
      assert.deepStrictEqual([col.start, col.end], [row.start, row.end], 'the column shard is the row shard');
      const range = { start: col.start, end: col.end },
        width = range.end - range.start;
      const p = {
        w1: new Float32Array(inF * width),
        b1: new Float32Array(width),
        w2: new Float32Array(width * out),
        b2: new Float32Array(out),
      };
      const d = {
        w1: new Float32Array(p.w1.length),
        b1: new Float32Array(width),
        w2: new Float32Array(p.w2.length),
        b2: new Float32Array(out),
      };
      columnShardCopy({ kernel: w1, bias: b1 }, { kernel: p.w1, bias: p.b1 }, inF, hidden, range, true);
      rowShardCopy({ kernel: w2, bias: b2 }, { kernel: p.w2, bias: p.b2 }, out, range, true);
      col.bind([p.w1, p.b1], [d.w1, d.b1]);
      row.bind([p.w2, p.b2], [d.w2, d.b2]);
      const mine = rowsOf(x, split, comm.rank, inF);
      const y = await row.forwardAsync(
        await col.forwardAsync(new Tensor([mine.length / inF, inF], mine), stepOf(split)),
        stepOf(split),
      );
      assertClose(y.data, rowsOf(yRef, split, comm.rank, out), { ...TOL, what: `rank ${comm.rank} y` });
      const dx = await col.backwardAsync(
        (await row.backwardAsync(new Tensor(y.shape, rowsOf(dy, split, comm.rank, out))))!,
      );
      assertClose(dx!.data, rowsOf(dxRef, split, comm.rank, inF), { ...TOL, what: `rank ${comm.rank} dx` });
      assertClose(d.w1, columnsOf(g.w1, inF, hidden, range), { ...TOL, what: `rank ${comm.rank} dW1` });
      assertClose(d.w2, g.w2.slice(range.start * out, range.end * out), { ...TOL, what: `rank ${comm.rank} dW2` });
      assertClose(d.b2, g.b2, { ...TOL, what: `rank ${comm.rank} db2` });
    }),
  );
  // per device: forward allgather (boundary) + reduce-scatter (row), backward allgather + reduce-scatter
  assert.equal(collectives, 4 * devices, 'exactly the four boundary collectives, none between the pair');
});
