/**
 * ZeRO sharding and gradient compression in the simulator: bytes per step against the cost model
 * and against sizes traced by hand from a two-layer model's shapes, memory per device against
 * ZeRO's formulas, alexnet-small's bytes against what paratrain's transports counted in real runs,
 * and the `--strategies` colon syntax through the config schema.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { allgather, allreduce, ringHalf, type Network, type Placement } from '../../src/simulate/costModel.ts';
import { hybridPlan } from '../../src/simulate/lockstep.ts';
import type { LayerCost, ModelCosts } from '../../src/simulate/layerCosts.ts';
import { parseLink } from '../../src/simulate/units.ts';
import { shardedPlan, shardPieces } from '../../src/simulate/shardingCost.ts';
import { compressedExchange, placesOf } from '../../src/simulate/compressionCost.ts';
import { deviceMemoryBytes } from '../../src/simulate/memory.ts';
import { describeWeights, type ModelWeights } from '../../src/simulate/weights.ts';
import { modelStructure } from '../../src/simulate/profile.ts';
import { stripMarks } from '../../src/simulate/trick.ts';
import { parseStrategyChoice } from '../../src/simulate/choices.ts';
import { loadConfig } from '../../src/config/index.ts';
import { optimizerStateSize } from '../../src/optim/optimizer.ts';
import type { OptimizerSpec } from '../../src/optim/spec.ts';

function layer(index: number, paramOffset: number, paramFloats: number): LayerCost {
  return {
    index,
    type: 'dense',
    name: `layers.${index}`,
    forward: { fixed: 1e-3, perSample: 0 },
    backward: { fixed: 2e-3, perSample: 0 },
    paramOffset,
    paramFloats,
    inputShape: [1],
    outputShape: [1],
    outputElements: 1,
    flopsPerSample: 1,
  };
}

/** dense 64 → 32 (kernel [64, 32] at 0, bias at 2048), dense 32 → 10 (kernel at 2080, bias at 2400), padded to 2416 */
const PSI = 2416;
const COSTS: ModelCosts = {
  layers: [layer(0, 0, 2080), layer(1, 2080, 336)],
  paramFloats: PSI,
  stateFloats: 0,
  optimizerPerFloat: 1e-9,
  source: 'by hand',
};
const ADAM = { type: 'adam' } as OptimizerSpec;
const WEIGHTS: ModelWeights = {
  tensors: [
    { name: 'layers.0.kernel', shape: [64, 32], offset: 0 },
    { name: 'layers.0.bias', shape: [32], offset: 2048 },
    { name: 'layers.1.kernel', shape: [32, 10], offset: 2080 },
    { name: 'layers.1.bias', shape: [10], offset: 2400 },
  ],
  readyOffsets: [2080, 0],
  layerParams: [2080, 330],
  optimizerSlots: optimizerStateSize(ADAM, 1),
  optimizer: ADAM,
};
const NET: Network = { tcp: { link: parseLink('1gbit:50us') }, shm: { alpha: 5e-6, beta: 16e9 } };
const TCP4: Placement = { hosts: 4, perHost: 1 };
/** small enough that the two layers are two buckets */
const BUCKET = 1024;

test('sharded bytes: stage 1 is hybrid + an all-gather of the weights, stage 2 hybrid + the one-float NaN flag', () => {
  const hybrid = hybridPlan(COSTS, 1, BUCKET, TCP4, NET, 'implemented');
  const one = shardedPlan(COSTS, WEIGHTS, 1, BUCKET, 1, TCP4, NET, 'implemented').plan;
  const two = shardedPlan(COSTS, WEIGHTS, 1, BUCKET, 2, TCP4, NET, 'implemented').plan;
  assert.equal(one.bytes, hybrid.bytes + allgather(PSI * 4, TCP4, NET).bytes);
  // a ring's reduce-scatter and all-gather of a bucket move what its all-reduce moves
  assert.equal(two.bytes, hybrid.bytes + allreduce(4, TCP4, NET).bytes);
  // the all-gathers follow the optimizer: stage 1's step is hybrid's + the all-gather (less the unsharded update)
  const gather = allgather(PSI * 4, TCP4, NET).seconds;
  const saved = COSTS.optimizerPerFloat * (PSI - PSI / 4);
  assert.ok(Math.abs(one.tail(1) - (hybrid.tail(1) + gather - saved)) < 1e-12);
});

test('memory per device: 16Ψ unsharded with Adam, 4Ψ + 4Ψ + 8Ψ/N at stage 1, 4Ψ + 12Ψ/N + one unit of gradient workspace at stage 2', () => {
  const base = { paramFloats: PSI, stateFloats: 0, optimizerSlots: WEIGHTS.optimizerSlots };
  assert.equal(deviceMemoryBytes(base), 16 * PSI);
  const memory = (stage: 1 | 2) => shardedPlan(COSTS, WEIGHTS, 1, BUCKET, stage, TCP4, NET, 'implemented').memoryBytes;
  assert.equal(memory(1), 4 * PSI + 4 * PSI + (8 * PSI) / 4);
  // two units of 2080 and 336 floats: the gradient workspace holds the larger
  assert.equal(memory(2), 4 * PSI + (12 * PSI) / 4 + 4 * 2080);
  // SGD with momentum keeps one slot: 12Ψ
  assert.equal(optimizerStateSize({ type: 'sgd', momentum: 0.9 } as OptimizerSpec, PSI), PSI);
});

test('stage 3: each unit (bucket) gathered twice and reduce-scattered, the flag, no gather after; 16Ψ/N + one unit of weights and gradients', () => {
  const two = shardedPlan(COSTS, WEIGHTS, 1, BUCKET, 2, TCP4, NET, 'implemented').plan;
  const three = shardedPlan(COSTS, WEIGHTS, 1, BUCKET, 3, TCP4, NET, 'implemented');
  // two units of 2080 and 336 floats: stage 2's bytes (reduce-scatter, flag, one all-gather each) + a second all-gather each
  const gathers = [2080, 336].reduce((s, n) => s + allgather(n * 4, TCP4, NET).bytes, 0);
  assert.equal(three.plan.bytes, two.bytes + gathers);
  // owned: the largest device's slices of the two units (520 + 84); gathered: the larger unit, 2080
  const owned = 520 + 84;
  assert.equal(three.memoryBytes, 4 * (2 * (owned + 2080) + 2 * owned));
  assert.equal(three.memoryBytes, (16 * PSI) / 4 + 8 * 2080 + 4 * (owned * 4 - PSI));
});

test('oneBit: the packed chunks traced by hand (2 scales per group segment + ⌈len/32⌉ words), point to point and all-gathered', () => {
  const x = compressedExchange({ type: 'oneBit' }, PSI, placesOf(PSI, WEIGHTS), TCP4, NET);
  assert.ok(typeof x !== 'string');
  // groups start at 0, 512, 1024, 1536 (kernel 0: 16 rows of 32), 2048, 2080, 2400, 2410 (padding);
  // chunk 3 = [1812, 2416) meets 5 of them: 2·5 + ⌈604/32⌉ = 29 floats, every chunk padded to it
  const W = 29;
  const flag = allreduce(4, TCP4, NET).bytes;
  assert.equal(x.cost.bytes, flag + 2 * 3 * W * 4 + ringHalf(4 * W * 4, 4, NET.tcp).bytes);
  // a large matrix: the 32 signs per word dominate, hybrid's bytes ≈ 32× oneBit's less the scales
  const big: ModelWeights = { ...WEIGHTS, tensors: [{ name: 'w', shape: [1024, 1024], offset: 0 }] };
  const n = 1024 * 1024;
  const b = compressedExchange({ type: 'oneBit' }, n, placesOf(n, big), TCP4, NET);
  assert.ok(typeof b !== 'string');
  const ratio = allreduce(n * 4, TCP4, NET).bytes / (b.cost.bytes - flag);
  // one row per group (1,024 ≥ 512 values): 2 scales per 1,024 signs = 32 words
  assert.ok(Math.abs(ratio - 32 / (1 + 2 / 32)) < 1e-9, `ratio ${ratio}`);
});

test('oneBit needs a link between every pair of devices: refused for threads of several processes', () => {
  const x = compressedExchange({ type: 'oneBit' }, PSI, placesOf(PSI, WEIGHTS), { hosts: 2, perHost: 2 }, NET);
  assert.match(String(x), /one device thread per process/);
});

test('powerSGD: Σ (n + m)·r of the compressible matrices and every other value, in its two all-reduces', () => {
  const spec = { type: 'powerSGD' as const, rank: 4, startStep: 0, warmStart: true, minCompressionRate: 2 };
  const x = compressedExchange(spec, PSI, placesOf(PSI, WEIGHTS), TCP4, NET);
  assert.ok(typeof x !== 'string');
  // reference: a matrix is compressed when (n + m)·r·rate < n·m
  let p = 0,
    q = 0,
    plain = PSI;
  for (const t of WEIGHTS.tensors) {
    if (t.shape.length < 2) continue;
    const [n, m] = t.shape as [number, number];
    const r = Math.min(4, n, m);
    if ((n + m) * r * 2 >= n * m) continue;
    p += n * r;
    q += m * r;
    plain -= n * m;
  }
  // kernel 0 compressed (P 64·4, Q 32·4); kernel 1 (42·4·2 ≥ 320) goes plain with the biases and padding
  assert.deepEqual([p, q, plain], [256, 128, 368]);
  const flag = allreduce(4, TCP4, NET).bytes;
  assert.equal(x.cost.bytes, flag + allreduce((plain + p) * 4, TCP4, NET).bytes + allreduce(q * 4, TCP4, NET).bytes);
});

test('--strategies: hybrid:shard=…, hybrid:compression=…, pipeline:… through the config schema', () => {
  const config = loadConfig('examples/mnist-small.yaml');
  const shard = parseStrategyChoice('hybrid:shard=2', config).spec;
  assert.equal(shard.type === 'hybrid' && shard.shard, 2);
  const one = parseStrategyChoice('hybrid:compression=oneBit', config);
  assert.equal(one.label, 'hybrid:compression=oneBit');
  assert.deepEqual(one.spec.type === 'hybrid' && one.spec.compression, { type: 'oneBit' });
  const psgd = parseStrategyChoice('hybrid:compression=powerSGD', config).spec;
  assert.equal(psgd.type === 'hybrid' && psgd.compression?.type, 'powerSGD');
  const three = parseStrategyChoice('hybrid:shard=3', config).spec;
  assert.equal(three.type === 'hybrid' && three.shard, 3);
  assert.throws(() => parseStrategyChoice('hybrid:shard=4', config), /a ZeRO stage/);
  const pipe = parseStrategyChoice('pipeline:stages=2:microBatches=8:schedule=gpipe', config);
  assert.equal(pipe.kind, 'pipeline');
  assert.deepEqual(pipe.pipeline, { stages: 2, microBatches: 8, schedule: 'gpipe' });
  assert.throws(() => parseStrategyChoice('pipeline:microBatches=8', config), /give the stages/);
  assert.throws(() => parseStrategyChoice('pipeline:stages=2:depth=3', config), /unknown pipeline option 'depth'/);
  assert.throws(() => parseStrategyChoice('pipeline:stages=2:schedule=zigzag', config), /schedule/);
});

test("alexnet-small's bytes per step over tcp: the ones `npm run bench -- compression` measured (docs/strategies.md)", async () => {
  const config = loadConfig('examples/alexnet-small.yaml');
  const model = stripMarks(config.model);
  const costs = await modelStructure({ model, optimizer: config.optimizer, backend: 'js' });
  const weights = await describeWeights(model, config.optimizer, 'js');
  const n = costs.paramFloats,
    places = placesOf(n, weights);
  const powerSGD = { type: 'powerSGD' as const, rank: 4, startStep: 0, warmStart: true, minCompressionRate: 2 };
  const kib = (b: number) => Math.round(b / 1024);
  // [devices, hybrid, oneBit, powerSGD rank 4] in KiB, as the transports counted them in those runs
  for (const [G, hybrid, oneBit, psgd] of [
    [2, 13336, 443, 602],
    [4, 20003, 665, 903],
  ] as const) {
    const p = { hosts: G, perHost: 1 };
    assert.equal(kib(hybridPlan(costs, 1, 4 << 20, p, NET, 'implemented').bytes), hybrid);
    for (const [spec, want] of [
      [{ type: 'oneBit' as const }, oneBit],
      [powerSGD, psgd],
    ] as const) {
      const x = compressedExchange(spec, n, places, p, NET);
      assert.ok(typeof x !== 'string');
      assert.equal(kib(x.cost.bytes), want, `${spec.type} on ${G}`);
    }
  }
});

test("mnist-small's memory per device: what `npm run bench -- memory` counted in real replicas (docs/results.md)", async () => {
  const config = loadConfig('examples/mnist-small.yaml');
  const costs = await modelStructure({ model: config.model, optimizer: config.optimizer, backend: 'js' });
  const weights = await describeWeights(config.model, config.optimizer, 'js');
  const mib = (b: number) => (b / 2 ** 20).toFixed(3);
  const p8 = { hosts: 8, perHost: 1 };
  assert.equal(
    mib(deviceMemoryBytes({ paramFloats: costs.paramFloats, stateFloats: 0, optimizerSlots: weights.optimizerSlots })),
    '3.434',
  );
  assert.equal(mib(shardedPlan(costs, weights, 1, 4 << 20, 1, p8, NET, 'implemented').memoryBytes), '1.932');
  // stages 2 and 3 with a layer per unit (bucketBytes 4): 4Ψ + 12Ψ/N and the dense layer's gradient; 16Ψ/N and its weights too
  assert.equal(mib(shardedPlan(costs, weights, 1, 4, 2, p8, NET, 'implemented').memoryBytes), '1.962');
  assert.equal(mib(shardedPlan(costs, weights, 1, 4, 3, p8, NET, 'implemented').memoryBytes), '1.993');
  // stage 3 with rowBlockBytes 64 KiB: the dense layer in 13 blocks of rows, the largest unit now the second convolution
  const blocks = shardedPlan(costs, weights, 1, 4, 3, p8, NET, 'implemented', 65536);
  assert.equal(mib(blocks.memoryBytes), '0.570');
  assert.equal(shardPieces(3, costs.paramFloats, weights, 4, 65536).length, 3 + 13);
});
