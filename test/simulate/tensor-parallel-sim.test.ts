/**
 * `tensor:size=g` in the simulator (train.tensorParallel, tensorSim.ts): the bytes it predicts
 * against what a real run's communicators counted (a tiny character GPT, its blocks split over
 * groups of 2 of 4 worker threads, through train()), and the scaling it must show: a group of the
 * whole job is the trick, the split layers' compute is a data-parallel device's, the section's
 * bytes grow with the group and the shards' share of memory falls with it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, type RunConfig } from '../../src/config/index.ts';
import { train } from '../../src/runtime/run/train.ts';
import { loadRun } from '../../src/report/runData.ts';
import { modelStructure } from '../../src/simulate/profile.ts';
import { markForTrick, stripMarks, trickWorkload } from '../../src/simulate/trick.ts';
import { trickPlan } from '../../src/simulate/lockstep.ts';
import { groupRows, subgroupRing, tensorWorkload } from '../../src/simulate/tensorSim.ts';
import { computeTime } from '../../src/simulate/layerCosts.ts';
import { parseStrategyChoice } from '../../src/simulate/choices.ts';
import { choiceConfig } from '../../src/cli/compareCommand.ts';
import { parseLink } from '../../src/simulate/units.ts';
import type { Network, Placement } from '../../src/simulate/costModel.ts';

const ONE_HOST = (G: number): Placement => ({ hosts: 1, perHost: G });
const NET: Network = { tcp: { link: parseLink('1gbit:50us') }, shm: { alpha: 5e-6, beta: 16e9 } };

const dir = mkdtempSync(join(tmpdir(), 'paratrain-sim-tp-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));
writeFileSync(
  join(dir, 'text.txt'),
  Array.from({ length: 600 }, (_, i) => 'abcdefgh\n'[(i * 7 + ((i * i) % 11)) % 9]).join(''),
);
writeFileSync(
  join(dir, 'gpt.yaml'),
  `model:
  input: [16]
  parallel: model
  layers:
    - embedding: { vocab: 9, dim: 16 }
    - positionEncoding: { encoding: learned }
    - transformerBlock: { heads: 4 }
    - transformerBlock: { heads: 4 }
    - layerNorm: {}
    - tiedEmbedding: {}
loss: tokenCrossEntropy
optimizer:
  adamw: { lr: 0.003 }
data:
  dataset: text
  dir: ${dir}
  file: text.txt
  windows: random
  trainLimit: 32
  validation: 0
  batchSize: 8
  batchSizeScope: global
train:
  devices: 4
  tensorParallel: 2
  epochs: 1
  seed: 5
  evalEvery: 0
`,
);

async function structure(config: RunConfig) {
  return modelStructure({ model: stripMarks(config.model), optimizer: config.optimizer, backend: 'js' });
}

test('tensor:size=2 on 4 devices: the bytes per step and device that a real run (worker threads) counted', {
  timeout: 240_000,
}, async () => {
  const config = loadConfig(join(dir, 'gpt.yaml'));
  const out = join(dir, 'run');
  await train(config, { out, log: () => {} });
  const steps = loadRun(out).steps.filter((s) => !s.skipped);
  // 32 windows of a global batch of 8: 4 steps on each of the 4 devices
  assert.equal(steps.length, 16);
  const perStep = new Map<number, number[]>();
  for (const s of steps) perStep.set(s.step, [...(perStep.get(s.step) ?? []), s.bytes]);
  const costs = await structure(config);
  const t = tensorWorkload(markForTrick(config.model), costs, 2, 4, 8, ONE_HOST(4), NET);
  assert.ok(t.feasible);
  for (const [step, bytes] of perStep) {
    const mean = bytes.reduce((a, b) => a + b, 0) / bytes.length;
    assert.equal(mean, t.plan.bytes, `step ${step}: the devices' mean, ${bytes.join(', ')}`);
  }
});

test('a group of the whole job is the trick; the split layers cost a data-parallel device its own rows', async () => {
  const config = loadConfig(join(dir, 'gpt.yaml'));
  const costs = await structure(config);
  const model = markForTrick(config.model);
  const G = 4,
    total = 32;
  const t = tensorWorkload(model, costs, G, G, total, ONE_HOST(G), NET);
  const w = trickWorkload(model, costs, G, total);
  assert.ok(t.feasible && w.feasible);
  const trick = trickPlan(w, costs, { hosts: 1, perHost: G }, NET);
  assert.deepEqual([t.plan.bytes, t.plan.compute, t.plan.tail(1)], [trick.bytes, trick.compute, trick.tail(1)]);
  // every group computes its own rows: per device the compute of 8 samples, whatever the group
  for (const g of [2, 4]) {
    const x = tensorWorkload(model, costs, g, G, total, ONE_HOST(G), NET);
    assert.ok(x.feasible);
    assert.ok(Math.abs(x.plan.compute - computeTime(costs, total / G)) < 1e-12, `g = ${g}`);
  }
});

test('scaling: the section moves more the larger the group, each device holds less, and splits paratrain refuses are n/a', async () => {
  const config = loadConfig(join(dir, 'gpt.yaml'));
  const costs = await structure(config);
  const model = markForTrick(config.model);
  const G = 8,
    total = 64;
  assert.equal(groupRows(total, G, 2), 16);
  const [two, four] = [2, 4].map((g) => tensorWorkload(model, costs, g, G, total, ONE_HOST(G), NET));
  assert.ok(two?.feasible && four?.feasible);
  assert.ok(four.plan.bytes > two.plan.bytes, `${four.plan.bytes} > ${two.plan.bytes}`);
  assert.ok(four.paramFloats < two.paramFloats && two.paramFloats < costs.paramFloats);
  // a ring of m members: 2(m − 1)/m of the buffer out and in per half, the mean over the members
  assert.equal(subgroupRing('allreduce', 1000, [0, 1, 2, 3], ONE_HOST(8), NET).bytes, 4 * 3 * 1000);
  assert.equal(subgroupRing('allgather', 1000, [0, 1], ONE_HOST(8), NET).bytes, 4 * 1000);
  // 3 does not divide 8; 8 devices split 4 heads
  const three = tensorWorkload(model, costs, 3, G, total, ONE_HOST(G), NET);
  assert.ok(!three.feasible && /must divide the job's 8/.test(three.reason));
  const eight = tensorWorkload(model, costs, 8, G, total, ONE_HOST(G), NET);
  assert.ok(!eight.feasible && /heads/.test(eight.reason), eight.feasible ? '' : eight.reason);
});

test('several hosts: the same bytes over TCP, the links the layout crosses, and layouts without a link n/a', async () => {
  const config = loadConfig(join(dir, 'gpt.yaml'));
  const costs = await structure(config);
  const model = markForTrick(config.model);
  const [shm, tcp, perGroup] = [ONE_HOST(8), { hosts: 8, perHost: 1 }, { hosts: 4, perHost: 2 }].map((p) =>
    tensorWorkload(model, costs, 2, 8, 64, p, NET),
  );
  assert.ok(shm?.feasible && tcp?.feasible && perGroup?.feasible);
  // the groups' rings and the shards' all-reduces count the same bytes over TCP as over shared memory
  assert.equal(tcp.plan.bytes, perGroup.plan.bytes);
  // a 1 Gbit/s link is slower than 16 GB/s of memory, and a group inside a host crosses it less
  assert.ok(tcp.plan.tail(1) > perGroup.plan.tail(1) && perGroup.plan.tail(1) > shm.plan.tail(1));
  // a ring step between hosts: α + the slice (500 floats) and its frame header at β
  const ring = subgroupRing('allgather', 1000, [0, 1], { hosts: 2, perHost: 1 }, NET);
  assert.ok(Math.abs(ring.seconds - (50e-6 + (2000 + 32) / 1.25e8)) < 1e-12);
  // groups of 2 on hosts of 4: the shards' holders 2 and 4 are different processes and thread indices
  const bad = tensorWorkload(model, costs, 2, 8, 64, { hosts: 2, perHost: 4 }, NET);
  assert.ok(
    !bad.feasible && /devices 2 and 4 \(the devices holding a shard\)/.test(bad.reason),
    String(!bad.feasible && bad.reason),
  );
});

test('--strategies tensor:size=g through the config schema', () => {
  const config = loadConfig(join(dir, 'gpt.yaml'));
  const c = parseStrategyChoice('tensor:size=2', config);
  assert.deepEqual([c.kind, c.tensorParallel, c.spec.type], ['tensor', 2, 'hybrid']);
  assert.equal(parseStrategyChoice('tensor', config).tensorParallel, 2);
  const plain = loadConfig('examples/mnist-small.yaml');
  assert.throws(() => parseStrategyChoice('tensor', plain), /give the devices per group, e\.g\. tensor:size=2/);
  assert.throws(() => parseStrategyChoice('tensor:size=1', plain), /at least 2/);
  assert.throws(() => parseStrategyChoice('tensor:groups=2', plain), /unknown tensor option 'groups'; expected size/);
  // `paratrain compare` trains the same choice: the trick's layers split, train.tensorParallel set
  const trained = choiceConfig(
    { ...plain, train: { ...plain.train, devices: 4 } },
    parseStrategyChoice('tensor:size=2', plain),
  );
  assert.equal(trained.train.tensorParallel, 2);
  assert.ok(trained.model.layers.some((l) => l.type === 'dense' && l.parallel === 'model'));
});
