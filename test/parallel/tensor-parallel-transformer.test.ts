/**
 * Megatron-split transformer blocks (`transformerBlock: { parallel: model }`) against the unsplit
 * model on the same global batch: a 2-block GPT (embedding, learned positions, 2 blocks, layerNorm,
 * tied output) on 2 and 4 devices in this thread (in-process collectives, js backend), three Adam
 * steps with the training loop's arithmetic (each device's token cross-entropy scaled G/N, the
 * replicated part's gradients averaged as hybrid does, the shards' not reduced); with dropout,
 * against the same model on G data-parallel devices (the masks the split draws); and 2 × 2 on 4
 * devices (tensor-parallel pairs over src/comm/subgroup.ts, data-parallel across them).
 *
 * Tolerance: the split sums the same products in other groupings (partial sums over the devices'
 * heads and MLP units), so outputs, losses, gradients and the weights after the steps agree to
 * ~1e-7 relative (gradients differ by ≤ 1e-8 absolute); we allow rtol 1e-5 with atol 1e-6. A
 * missing or doubled 1/G gradient scale, or a head's q/k/v rows taken from the wrong place, is off
 * by far more.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { Tensor } from '../../src/tensor/tensor.ts';
import { modelSchema } from '../../src/config/schema/model.ts';
import { buildModel } from '../../src/nn/model.ts';
import type { ModelSpec } from '../../src/nn/spec.ts';
import { TokenCrossEntropy } from '../../src/nn/tokenCrossEntropy.ts';
import { createOptimizer } from '../../src/optim/optimizer.ts';
import type { OptimizerSpec } from '../../src/optim/spec.ts';
import type { Communicator } from '../../src/comm/communicator.ts';
import { subgroup } from '../../src/comm/subgroup.ts';
import { ModelParallelNet } from '../../src/parallel/modelParallel/net.ts';
import { rowSplit } from '../../src/parallel/modelParallel/activationExchange.ts';
import { planModelParallelFrom } from '../../src/parallel/modelParallel/plan.ts';
import { localGroup } from './localGroup.ts';
import { assertClose } from '../util/close.ts';

const CLOSE = { rtol: 1e-5, atol: 1e-6 };
// eps 1e-3: Adam divides by √v + eps, so a gradient element of ~1e-8 (the key projection's bias has
// no true gradient at all: softmax ignores a shift shared by all keys) whose rounding differs by
// 1e-9 would otherwise move by a different ±lr; with eps 1e-3 an update's error is at most
// lr·δg/eps ≈ 1e-8, and elements with real gradients (1e-3…1e-1) still take Adam's normalised steps
const ADAM: OptimizerSpec = { type: 'adam', lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-3, weightDecay: 0 };
const SEED = 7,
  BATCH = 6,
  T = 8,
  VOCAB = 11,
  STEPS = 3;

function tinyGpt(layers: { parallel?: 'model'; dropout?: number } = {}): ModelSpec {
  return modelSchema.parse({
    input: [T],
    layers: [
      { embedding: { vocab: VOCAB, dim: 16 } },
      { positionEncoding: { encoding: 'learned' } },
      { transformerBlock: { heads: 4, ...layers } },
      { transformerBlock: { heads: 4, mlp: 24, ...layers } },
      { layerNorm: {} },
      { tiedEmbedding: {} },
    ],
  });
}

/** Token ids and next-token labels of the global batch, fixed per step. */
function batch(step: number, N: number): { x: Float32Array; labels: Int32Array } {
  const x = new Float32Array(N * T),
    labels = new Int32Array(N * T);
  for (let i = 0; i < N * T; i++) {
    x[i] = (i * 7 + step * 3 + ((i * i) % 5)) % VOCAB;
    labels[i] = (i * 5 + step + 1) % VOCAB;
  }
  return { x, labels };
}

interface StepRecord {
  logits: Float32Array;
  loss: number;
  grads: Float32Array;
}

/**
 * The reference: the unsplit model on the whole batch, computed as G data-parallel devices would
 * (each device's rows with its rank and its own per-replica dropout masks, the loss scaled G/N, the
 * gradients averaged); without dropout G does not matter. Per step its logits, loss and gradients;
 * its weights after the last step.
 */
async function referenceRun(spec: ModelSpec, G: number, N: number, lengths?: Int32Array) {
  const model = buildModel(jsBackend, spec);
  model.initialize(SEED);
  const loss = new TokenCrossEntropy(jsBackend),
    opt = createOptimizer(jsBackend, ADAM, model.params.length);
  const rows = rowSplit(N, G);
  const steps: StepRecord[] = [];
  for (let s = 0; s < STEPS; s++) {
    const { x, labels } = batch(s, N);
    const logits = new Float32Array(N * T * VOCAB);
    let lossSum = 0;
    model.zeroGrads();
    for (let r = 0; r < G; r++) {
      const [from, n] = [rows.starts[r]!, rows.counts[r]!];
      const ctx = {
        training: true,
        seed: SEED,
        step: s,
        sampleOffset: from,
        rank: r,
        lengths: lengths?.slice(from, from + n),
      };
      const y = await model.forwardAsync(new Tensor([n, T], x.slice(from * T, (from + n) * T)), ctx);
      logits.set(y.data, from * T * VOCAB);
      const out = loss.compute(y, labels.subarray(from * T, (from + n) * T), G / N);
      lossSum += out.lossSum;
      await model.backwardAsync(out.dlogits);
    }
    for (let i = 0; i < model.grads.length; i++) model.grads[i] = model.grads[i]! / G;
    steps.push({ logits, loss: lossSum, grads: model.grads.slice() });
    opt.step(model.params, model.grads, ADAM.lr);
  }
  return { model, steps };
}

/** Counts a communicator's collectives (forward and backward phases are read off it). */
function counting(comm: Communicator) {
  const counts = { allreduce: 0, allgather: 0, reduceScatter: 0 };
  const raw = { allreduce: comm.allreduce.bind(comm) };
  for (const op of ['allreduce', 'allgather', 'reduceScatter'] as const) {
    const inner = comm[op].bind(comm) as (...a: unknown[]) => Promise<never>;
    (comm as unknown as Record<string, unknown>)[op] = (...a: unknown[]) => {
      counts[op]++;
      return inner(...a);
    };
  }
  const take = () => {
    const c = { ...counts };
    counts.allreduce = counts.allgather = counts.reduceScatter = 0;
    return c;
  };
  return { raw, take };
}

// padded sequences: the blocks mask with every device's lengths, gathered once at the section's start
const LENGTHS = Int32Array.of(8, 5, 8, 3, 8, 6);

// with dropout: every mask keyed as the sample's own device keys it, so the split equals G data-parallel devices
// 3 samples on 4 devices: one device holds none and only takes part in the collectives
for (const { G, lengths, dropout, N } of [
  { G: 2, N: BATCH },
  { G: 4, N: BATCH },
  { G: 4, N: 3 },
  { G: 2, N: BATCH, lengths: LENGTHS },
  { G: 4, N: BATCH, lengths: LENGTHS, dropout: 0.2 },
]) {
  const padded = `${N < G ? `, ${N} samples` : ''}${lengths ? ', padded sequences' : ''}${dropout ? ', dropout (masks of G data-parallel devices)' : ''}`;
  test(`a 2-block GPT with parallel: model blocks on ${G} devices${padded} equals the unsplit model: logits, loss, gradients, weights after ${STEPS} Adam steps; 2 all-reduces per block forward and 2 backward`, async () => {
    const ref = await referenceRun(tinyGpt({ dropout }), dropout ? G : 1, N, lengths);
    const spec = tinyGpt({ parallel: 'model', dropout });
    const rows = rowSplit(N, G);
    await Promise.all(
      localGroup(G).map(async (comm) => {
        const r = comm.rank,
          { raw, take } = counting(comm);
        const net = new ModelParallelNet(jsBackend, spec, comm);
        assert.deepStrictEqual(
          net.plan.layers.map((p) => [p.index, p.kind]),
          [
            [2, 'transformer'],
            [3, 'transformer'],
          ],
        );
        net.initialize(SEED);
        const loss = new TokenCrossEntropy(jsBackend),
          opt = createOptimizer(jsBackend, ADAM, net.params.length);
        const [from, count] = [rows.starts[r]!, rows.counts[r]!];
        const whole = {
          buffers: [new Float32Array(ref.model.params.length)],
          paramEntries: ref.model.paramEntries,
          state: new Float32Array(ref.model.state.length),
          stateEntries: ref.model.stateEntries,
        };
        for (let s = 0; s < STEPS; s++) {
          const want = ref.steps[s]!,
            what = `G=${G} rank ${r} step ${s}`;
          const { x, labels } = batch(s, N);
          const mine = new Tensor([count, T], x.slice(from * T, (from + count) * T));
          take();
          const y = await net.forwardAsync(mine, {
            training: true,
            seed: SEED,
            step: s,
            sampleOffset: from,
            rank: r,
            globalBatch: N,
            lengths: lengths?.slice(from, from + count),
          });
          // per block: the attention's and the MLP's all-reduce; the section's entry gathers the rows (and lengths) once
          const gathers = lengths ? 2 : 1;
          assert.deepStrictEqual(take(), { allreduce: 4, allgather: gathers, reduceScatter: 0 }, `${what}: forward`);
          const per = T * VOCAB;
          assertClose(y.data, want.logits.subarray(from * per, (from + count) * per), {
            ...CLOSE,
            what: `${what} logits`,
          });
          const out = loss.compute(y, labels.subarray(from * T, (from + count) * T), G / N);
          net.zeroGrads();
          await net.backwardAsync(out.dlogits);
          // per block: the two input gradients' all-reduces; the section's exit gathers the output gradient once
          assert.deepStrictEqual(take(), { allreduce: 4, allgather: 1, reduceScatter: 0 }, `${what}: backward`);
          const total = Float32Array.of(out.lossSum);
          await raw.allreduce(total, 'sum');
          assertClose(total, Float32Array.of(want.loss), { ...CLOSE, what: `${what} loss` });
          // as hybrid: the replicated part averaged, the shards (already the whole batch's) as they are
          await raw.allreduce(net.grads.subarray(0, net.replicatedLength), 'mean');
          await net.gatherWhole([net.grads], r === 0 ? whole : null);
          if (r === 0) {
            for (const e of ref.model.paramEntries) {
              const at = (a: Float32Array) => a.subarray(e.offset, e.offset + e.size);
              assertClose(at(whole.buffers[0]!), at(want.grads), { ...CLOSE, what: `${what} gradient ${e.name}` });
            }
          }
          opt.step(net.params, net.grads, ADAM.lr);
        }
        await net.gatherWhole([net.params], r === 0 ? whole : null);
        if (r === 0) {
          for (const e of ref.model.paramEntries) {
            const at = (a: Float32Array) => a.subarray(e.offset, e.offset + e.size);
            assertClose(at(whole.buffers[0]!), at(ref.model.params), { ...CLOSE, what: `G=${G} weights ${e.name}` });
          }
        }
      }),
    );
  });
}

/** The plan of `layers` (after the embedding and positions) on G devices: its error, or null. */
function planError(blocks: unknown[], G: number): string | null {
  const spec = modelSchema.parse({
    input: [T],
    layers: [{ embedding: { vocab: VOCAB, dim: 16 } }, { positionEncoding: { encoding: 'learned' } }, ...blocks],
  });
  const shapes = buildModel(jsBackend, spec).layers.map((l) => l.inputShape);
  try {
    planModelParallelFrom(spec, G, shapes);
    return null;
  } catch (e) {
    return (e as Error).message;
  }
}

test('a split that cannot be made names the layer and the fix', () => {
  const block = (o: object = {}) => ({ transformerBlock: { heads: 4, parallel: 'model', ...o } });
  assert.equal(planError([block(), block()], 4), null);
  assert.match(
    planError([block()], 3)!,
    /^model\.layers\[2\] transformerBlock: 'parallel: model' splits its 4 heads over 3 devices, .*use a device count that divides 4 \(1, 2, 4\), or heads: a multiple of 3$/,
  );
  assert.match(
    planError([block(), block({ mlp: 18 })], 4)!,
    /^model\.layers\[3\] transformerBlock: 'parallel: model' splits its MLP of 18 units over 4 devices, .*use mlp: a multiple of 4 \(e\.g\. 20\)/,
  );
  assert.match(
    planError([block(), { layerNorm: {} }, block()], 2)!,
    /^model\.layers\[3\] layerNorm: cannot lie between the tensor-parallel transformer blocks model\.layers\[2\] and model\.layers\[4\]; .*move it before model\.layers\[2\] or after model\.layers\[4\]/,
  );
  assert.match(
    planError([block(), { transformerBlock: { heads: 4 } }, block()], 2)!,
    /^model\.layers\[3\] transformerBlock: lies between .* but is not marked; add 'parallel: model' to it too$/,
  );
});

test('model.parallel: model marks the transformer blocks, not the dense layers around them (a block saying parallel: data stays data-parallel)', () => {
  const spec = modelSchema.parse({
    input: [T],
    parallel: 'model',
    layers: [
      { embedding: { vocab: VOCAB, dim: 16 } },
      { dense: { units: 16 } },
      { transformerBlock: { heads: 4 } },
      { transformerBlock: { heads: 4, parallel: 'data' } },
      { dense: { units: VOCAB } },
    ],
  });
  assert.deepStrictEqual(
    spec.layers.map(
      (l) => `${l.type} ${l.type === 'embedding' ? '-' : ((l as { parallel?: string }).parallel ?? 'data')}`,
    ),
    ['embedding -', 'dense data', 'transformerBlock model', 'transformerBlock data', 'dense data'],
  );
});

test('2 × 2 on 4 devices (tensor-parallel pairs of ranks 0–1 and 2–3, data-parallel across the pairs, dropout on) equals 4 data-parallel devices: logits, loss, gradients, weights after 3 Adam steps', async () => {
  const G = 4,
    TP = 2,
    N = BATCH,
    dropout = 0.2;
  const ref = await referenceRun(tinyGpt({ dropout }), G, N);
  const spec = tinyGpt({ parallel: 'model', dropout });
  const rows = rowSplit(N, G);
  await Promise.all(
    localGroup(G).map(async (world) => {
      const w = world.rank,
        first = w - (w % TP);
      // the pair computes the blocks of its samples; the devices holding the same shards average them
      const tensor = subgroup(world, [first, first + 1], 1000),
        data = subgroup(world, [w % TP, (w % TP) + TP], 2000);
      const { take } = counting(tensor);
      const net = new ModelParallelNet(jsBackend, spec, tensor);
      net.initialize(SEED);
      const loss = new TokenCrossEntropy(jsBackend),
        opt = createOptimizer(jsBackend, ADAM, net.params.length);
      const [from, count] = [rows.starts[w]!, rows.counts[w]!];
      const pairBatch = rows.counts[first]! + rows.counts[first + 1]!;
      const whole = {
        buffers: [new Float32Array(ref.model.params.length)],
        paramEntries: ref.model.paramEntries,
        state: new Float32Array(ref.model.state.length),
        stateEntries: ref.model.stateEntries,
      };
      const compare = (buf: Float32Array, want: Float32Array, what: string) => {
        for (const e of ref.model.paramEntries) {
          const at = (a: Float32Array) => a.subarray(e.offset, e.offset + e.size);
          assertClose(at(buf), at(want), { ...CLOSE, what: `${what} ${e.name}` });
        }
      };
      for (let s = 0; s < STEPS; s++) {
        const want = ref.steps[s]!,
          what = `2×2 rank ${w} step ${s}`;
        const { x, labels } = batch(s, N);
        take();
        const y = await net.forwardAsync(new Tensor([count, T], x.slice(from * T, (from + count) * T)), {
          training: true,
          seed: SEED,
          step: s,
          sampleOffset: from,
          rank: w,
          globalBatch: pairBatch,
        });
        assert.deepStrictEqual(take(), { allreduce: 4, allgather: 1, reduceScatter: 0 }, `${what}: forward`);
        const per = T * VOCAB;
        assertClose(y.data, want.logits.subarray(from * per, (from + count) * per), {
          ...CLOSE,
          what: `${what} logits`,
        });
        const out = loss.compute(y, labels.subarray(from * T, (from + count) * T), G / N);
        net.zeroGrads();
        await net.backwardAsync(out.dlogits);
        assert.deepStrictEqual(take(), { allreduce: 4, allgather: 1, reduceScatter: 0 }, `${what}: backward`);
        const total = Float32Array.of(out.lossSum);
        await world.allreduce(total, 'sum');
        assertClose(total, Float32Array.of(want.loss), { ...CLOSE, what: `${what} loss` });
        // the replicated part over all four devices, each shard over the two devices that hold it
        await world.allreduce(net.grads.subarray(0, net.replicatedLength), 'mean');
        await data.allreduce(net.grads.subarray(net.replicatedLength), 'mean');
        await net.gatherWhole([net.grads], tensor.rank === 0 ? whole : null);
        if (tensor.rank === 0) compare(whole.buffers[0]!, want.grads, `${what} gradient`);
        opt.step(net.params, net.grads, ADAM.lr);
      }
      await net.gatherWhole([net.params], tensor.rank === 0 ? whole : null);
      if (tensor.rank === 0) compare(whole.buffers[0]!, ref.model.params, `2×2 rank ${w} weights`);
    }),
  );
});
