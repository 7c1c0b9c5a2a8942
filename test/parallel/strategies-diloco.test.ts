/**
 * DiLoCo: every `period` local steps the outer optimizer applies g = s − w̄ to the start s. Checked
 * against the rules it generalises (bsp: outer SGD lr 1; classic BMUF: outer SGD with momentum),
 * by hand (Nesterov, Adam), through checkpoint sets (bit-identical resume in the middle of a
 * period) and in the config (defaults, errors naming the field, the YAML form).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { dilocoStrategy, dilocoEntry, PAPER_OUTER } from '../../src/parallel/strategies/diloco.ts';
import { bmufStrategy } from '../../src/parallel/strategies/bmuf.ts';
import { bspStrategy } from '../../src/parallel/strategies/bsp.ts';
import type { Strategy } from '../../src/parallel/strategy.ts';
import type { Communicator } from '../../src/comm/communicator.ts';
import type { OptimizerSpec } from '../../src/optim/spec.ts';
import { parseConfig, parseYaml, configToYaml, toYamlForm, ConfigError } from '../../src/config/index.ts';
import { parseStrategyChoices } from '../../src/simulate/choices.ts';
import { train } from '../../src/runtime/run/train.ts';
import { latestCompleteSet } from '../../src/runtime/checkpoint/checkpointSet.ts';
import { readCheckpoint } from '../../src/runtime/checkpoint/checkpoint.ts';
import { readMetrics } from '../../src/runtime/events/metrics.ts';
import { FaultPlan } from '../../src/runtime/faults/faultPlan.ts';
import { localGroup } from './localGroup.ts';
import { driftReplica, stepInfo, type TestReplica } from './strategyHarness.ts';
import { tinyConfig, trainAndReadWeights } from './helpers.ts';
import { assertClose, randomArray } from '../util/close.ts';
import { assertSameTensors, freshDir, tensorsOf } from '../runtime/resumeHelpers.ts';

const sgd = (lr: number, momentum = 0, nesterov = false): OptimizerSpec => ({
  type: 'sgd',
  lr,
  momentum,
  nesterov,
  weightDecay: 0,
});
const adam = (lr: number): OptimizerSpec => ({ type: 'adam', lr, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0 });

/**
 * Runs `make`'s strategy on the replicas `make` is given, each in its own localGroup rank, for
 * `steps` local steps; returns every rank's weights after every step, the job's model before
 * onFinish, and the replicas after it.
 */
async function run(replicas: TestReplica[], make: (comm: Communicator) => Strategy, steps: number) {
  const comms = localGroup(replicas.length);
  const seen: number[][][] = replicas.map(() => []);
  let model: number[] = [];
  await Promise.all(
    comms.map(async (comm, r) => {
      const s = make(comm),
        rep = replicas[r]!;
      await s.onStart!(rep);
      for (let step = 0; step < steps; step++) {
        rep.localStep(0);
        rep.state[0] = rep.state[0]! + 2 * r;
        await s.afterStep!(rep, stepInfo(step));
        seen[r]!.push([...rep.params]);
      }
      // bsp keeps no model of its own: the replica is the model
      if (r === 0) model = [...(s.modelParams ? await s.modelParams(rep) : rep.params)];
      await s.onFinish!(rep);
    }),
  );
  return { seen, model, final: replicas.map((rep) => [...rep.params]), state: replicas.map((rep) => rep.state[0]!) };
}

/** The two integer replicas of the bmuf tests: rank 0 moves +1 a step, rank 1 +3, from rank 0's 0. */
const twoDrifting = () => [driftReplica(1, [0], [1]), driftReplica(3, [50], [5])];

/**
 * Three replicas of 32 weights of mixed magnitudes (up to 100) whose local steps add pseudo-random
 * non-dyadic increments, different per rank and step: averages that round.
 */
function threeRandom(): TestReplica[] {
  const start = randomArray(32, 7).map((v, i) => v * 10 ** (i % 3));
  return [0, 1, 2].map((r) => {
    const rep = driftReplica(0, [...start]);
    let step = 0;
    rep.localStep = () => {
      const inc = randomArray(rep.params.length, 100 * r + ++step);
      for (let i = 0; i < rep.params.length; i++) rep.params[i] = rep.params[i]! + 0.37 * inc[i]!;
    };
    return rep;
  });
}
const maxAbs = (rows: number[][][]) => Math.max(...rows.flat(2).map(Math.abs));
const ULP = 2 ** -24;

const diloco = (period: number, outer: OptimizerSpec) => (comm: Communicator) => dilocoStrategy(comm, period, outer);

test('diloco with outer SGD, lr 1, no momentum is model averaging: bit-identical to bsp on dyadic values', async () => {
  const a = await run(twoDrifting(), diloco(2, sgd(1)), 5);
  const b = await run(twoDrifting(), (comm) => bspStrategy(comm, 2), 5);
  // 2 and 6 → 4; 6 and 10 → 8; a last partial period: 9 and 11 → 10
  assert.deepEqual(a.seen, [
    [[1], [4], [5], [8], [9]],
    [[3], [4], [7], [8], [11]],
  ]);
  assert.deepEqual(a.seen, b.seen);
  assert.deepEqual(a.final, [[10], [10]]);
  assert.deepEqual(a.final, b.final);
  assert.deepEqual(a.state, b.state, 'BatchNorm statistics are the plain mean');
});

test('diloco with outer SGD, lr 1 equals bsp within float rounding (3 devices, non-dyadic values)', async () => {
  // Not bit for bit: bsp sums w_r·(1/3), diloco divides the sum by 3, and s − fl(s − w̄) need not
  // give w̄ back in float32 (s = 1, w̄ = 1e-8: fl(1 − 1e-8) = 1, so s − g = 0). Each average is off
  // by at most a few ulps of the largest |w|; the drifts add the same increments to both runs, so
  // the differences add up without growing: 4 ulps per period.
  const periods = 4,
    period = 3;
  const a = await run(threeRandom(), diloco(period, sgd(1)), periods * period);
  const b = await run(threeRandom(), (comm) => bspStrategy(comm, period), periods * period);
  const atol = 4 * periods * ULP * maxAbs(b.seen);
  assertClose(a.seen.flat(2), b.seen.flat(2), { rtol: 0, atol, what: 'diloco sgd lr 1 vs bsp' });
  assertClose(a.final.flat(), b.final.flat(), { rtol: 0, atol, what: 'final weights' });
  assert.ok(
    a.seen.flat(2).some((v, i) => v !== b.seen.flat(2)[i]),
    'the runs round differently (else the bit-identical test above covers this one)',
  );
});

test('diloco with outer SGD momentum η, lr ζ is classic bmuf (η, ζ): bit-identical on dyadic values', async () => {
  const a = await run(twoDrifting(), diloco(2, sgd(1, 0.5)), 4);
  const b = await run(
    twoDrifting(),
    (comm) => bmufStrategy(comm, { period: 2, blockMomentum: 0.5, blockLr: 1, nesterov: false }),
    4,
  );
  // bmuf's own hand computation: w̄ 4 → s = 4; w̄ 8 → Δ = 0.5·4 + (8 − 4) = 6, s = 10
  assert.deepEqual(a.seen, [
    [[1], [4], [5], [10]],
    [[3], [4], [7], [10]],
  ]);
  assert.deepEqual(a.seen, b.seen);
  assert.deepEqual(a.model, b.model);
  assert.deepEqual(a.final, b.final);
});

test('diloco with outer SGD momentum η, lr ζ equals classic bmuf within float rounding (non-dyadic values)', async () => {
  // Same recursion, rounded at other points: bmuf stores Δ = fl(η·Δ + ζ·(w̄ − s)) and s = fl(s + Δ),
  // diloco g = fl(s − w̄), v = fl(η·v + g) and s = fl(s − ζ·(η·v + g)). A period's rounding is a few
  // ulps of the largest |w| (×ζ); momentum carries it on with weight η, so at most 1/(1 − η) times.
  const eta = 0.6,
    zeta = 1.3,
    periods = 4,
    period = 3;
  const a = await run(threeRandom(), diloco(period, sgd(zeta, eta)), periods * period);
  const b = await run(
    threeRandom(),
    (comm) => bmufStrategy(comm, { period, blockMomentum: eta, blockLr: zeta, nesterov: false }),
    periods * period,
  );
  const atol = (8 * zeta * periods * ULP * maxAbs(b.seen)) / (1 - eta);
  assertClose(a.seen.flat(2), b.seen.flat(2), { rtol: 0, atol, what: 'diloco sgd momentum vs bmuf classic' });
  assertClose(a.model, b.model, { rtol: 0, atol, what: 'the job model' });
});

test('diloco outer Nesterov (torch): s ← s − ζ·(g + η·v) with v ← η·v + g, by hand', async () => {
  const { seen, model, final } = await run(twoDrifting(), diloco(2, sgd(1, 0.5, true)), 4);
  // block 1: 2 and 6 → w̄ 4, g = −4, v = −4, s = 0 − (−4 + 0.5·(−4)) = 6
  // block 2: 8 and 12 → w̄ 10, g = −4, v = 0.5·(−4) − 4 = −6, s = 6 − (−4 + 0.5·(−6)) = 13
  // (bmuf's Nesterov moves s by (1 + η)·Δ instead and ends on 15: see bmuf.ts)
  assert.deepEqual(seen, [
    [[1], [6], [7], [13]],
    [[3], [6], [9], [13]],
  ]);
  assert.deepEqual(model, [13], 'the job model is s itself');
  assert.deepEqual(final, [[13], [13]]);
});

test("diloco's defaults are the paper's (H = 500, outer Nesterov 0.9, lr 0.7); the first outer step by hand", async () => {
  assert.deepEqual(tinyConfig({ train: { strategy: 'diloco' } }).train.strategy, {
    type: 'diloco',
    period: 500,
    outer: PAPER_OUTER,
  });
  const { seen } = await run(
    twoDrifting(),
    (comm) => dilocoEntry.create({ type: 'diloco', period: 2, outer: PAPER_OUTER }, { comm, ps: null }),
    2,
  );
  // g = −4, v = −4, s = 0 − 0.7·(−4 + 0.9·(−4)) = 5.32, stored in float32
  assert.deepEqual(seen, [
    [[1], [Math.fround(5.32)]],
    [[3], [Math.fround(5.32)]],
  ]);
});

test('diloco outer Adam: slots and step count by hand; its first steps move s by about lr whatever |g|', async () => {
  const steps = async (rate: number) => {
    const comms = localGroup(2);
    const reps = [driftReplica(rate, [0]), driftReplica(3 * rate, [0])];
    const trail: number[] = [];
    let slots: Record<string, number> = {};
    await Promise.all(
      comms.map(async (comm, r) => {
        const s = dilocoStrategy(comm, 2, adam(0.1)),
          rep = reps[r]!;
        await s.onStart!(rep);
        for (let step = 0; step < 4; step++) {
          rep.localStep(0);
          await s.afterStep!(rep, stepInfo(step));
          if (r === 0 && step === 1) {
            const st = s.saveState!();
            slots = { m: st.tensors['outer.m']![0]!, v: st.tensors['outer.v']![0]!, t: st.counters.outerSteps! };
          }
          if (r === 0 && step % 2 === 1) trail.push(rep.params[0]!);
        }
      }),
    );
    return { trail, slots };
  };
  const small = await steps(1),
    large = await steps(100);
  // block 1: w̄ = 4·rate, g = −4·rate; m = 0.1·g, v = 0.001·g², t = 1; s = 0.1·(m/0.1)/(√(v/0.001) + ε) ≈ 0.1
  assert.deepEqual(small.slots, { m: Math.fround(-0.4), v: Math.fround(0.016), t: 1 });
  assert.deepEqual(large.slots, { m: Math.fround(-40), v: Math.fround(160), t: 1 });
  for (const { trail } of [small, large]) assertClose(trail, [0.1, 0.2], { rtol: 1e-5, atol: 0, what: 'Adam s' });
});

test('a checkpoint saved in the middle of a period restores s, the outer slots and both counters: the runs go on bit for bit', async () => {
  const whole = await run(threeRandom(), diloco(3, adam(0.05)), 10);
  // the same, stopped after step 5 (two steps into the second period), restored into fresh strategies
  const replicas = threeRandom();
  const comms = localGroup(3);
  const saved = await Promise.all(
    comms.map(async (comm, r) => {
      const s = dilocoStrategy(comm, 3, adam(0.05)),
        rep = replicas[r]!;
      await s.onStart!(rep);
      for (let step = 0; step < 5; step++) {
        rep.localStep(0);
        await s.afterStep!(rep, stepInfo(step));
      }
      const st = s.saveState!();
      return {
        tensors: Object.fromEntries(Object.entries(st.tensors).map(([k, v]) => [k, v.slice()])),
        counters: st.counters,
      };
    }),
  );
  assert.deepEqual(saved[0]!.counters, { steps: 2, outerSteps: 1 });
  assert.deepEqual(Object.keys(saved[0]!.tensors).sort(), ['outer.m', 'outer.v', 'start']);
  const again = localGroup(3);
  const resumed: number[][] = [];
  await Promise.all(
    again.map(async (comm, r) => {
      const s = dilocoStrategy(comm, 3, adam(0.05)),
        rep = replicas[r]!;
      const local = rep.params.slice();
      await s.onStart!(rep); // the broadcast makes rank 0's weights everyone's: put this replica's back
      rep.params.set(local);
      s.restoreState!(saved[r]!);
      for (let step = 5; step < 10; step++) {
        rep.localStep(0);
        await s.afterStep!(rep, stepInfo(step));
      }
      await s.onFinish!(rep);
      resumed[r] = [...rep.params];
    }),
  );
  assert.deepEqual(resumed, whole.final);
  // another outer optimizer's state is refused, naming the field
  const sgdMomentum = dilocoStrategy(localGroup(1)[0]!, 3, sgd(0.7, 0.9, true));
  await sgdMomentum.onStart!(driftReplica(1, new Array(32).fill(0)));
  assert.throws(() => sgdMomentum.restoreState!(saved[0]!), /'outer\.velocity'.*train\.strategy\.diloco\.outer/);
});

test('bmuf and diloco agree on skipping a non-finite step: the flag is summed over the devices', async () => {
  for (const make of [
    (c: Communicator) => bmufStrategy(c, { period: 2, blockMomentum: 0.5, blockLr: 1, nesterov: false }),
    diloco(2, PAPER_OUTER),
  ]) {
    const flags = await Promise.all(
      localGroup(3).map(async (comm, r) => {
        const v = Float32Array.of(r === 1 ? 1 : 0);
        await make(comm).agree!(v);
        return v[0];
      }),
    );
    assert.deepEqual(flags, [1, 1, 1]);
  }
});

test('training: bmuf and diloco, 2 devices: a NaN gradient injected on device 1 at step 2 is skipped on both devices alike', async () => {
  for (const strategy of [{ bmuf: { period: 3 } }, { diloco: { period: 3 } }]) {
    const out = freshDir();
    const result = await train(tinyConfig({ train: { devices: 2, strategy } }), {
      out,
      faults: new FaultPlan({ nan: [[1, 2]] }),
    });
    const skipped = readMetrics(join(out, 'metrics.jsonl')).filter((e) => e.type === 'step' && e.skipped === true);
    assert.deepEqual(
      skipped.map((e) => [e.rank, e.step]).sort(),
      [
        [0, 2],
        [1, 2],
      ],
      Object.keys(strategy)[0],
    );
    assert.ok([...tensorsOf(result.checkpoint).values()].every((t) => t.every(Number.isFinite)));
  }
});

// Through the whole training path (3 devices, the tiny convnet, 8 steps: outer steps at 3 and 6
// and a partial last period). Tolerance as in equivalence.test.ts: the averages round differently
// (above), and the next local steps carry that on; after 8 steps weights agree to ~1e-6 relative.
const TOL = { rtol: 1e-4, atol: 1e-5 };
const three = (strategy: unknown) => tinyConfig({ data: { trainLimit: 192 }, train: { devices: 3, strategy } });

test('training: diloco with outer SGD lr 1 equals bsp, outer SGD momentum equals classic bmuf', async () => {
  const bsp = await trainAndReadWeights(three({ bsp: { period: 3 } }));
  const plain = await trainAndReadWeights(three({ diloco: { period: 3, outer: { sgd: { lr: 1 } } } }));
  assertClose(plain, bsp, { ...TOL, what: 'diloco sgd lr 1 vs bsp' });
  const bmuf = await trainAndReadWeights(three({ bmuf: { period: 3, blockMomentum: 0.5, blockLr: 1.5 } }));
  const momentum = await trainAndReadWeights(
    three({ diloco: { period: 3, outer: { sgd: { lr: 1.5, momentum: 0.5 } } } }),
  );
  assertClose(momentum, bmuf, { ...TOL, what: 'diloco sgd momentum vs bmuf' });
  assert.ok(
    momentum.some((v, i) => Math.abs(v - plain[i]!) > 1e-3),
    'outer momentum changes the weights (the comparison is not vacuous)',
  );
});

// the outer slots of every kind restore in the harness test above; through training, Adam's (the most state)
{
  const outer = { adam: { lr: 0.01 } };
  test('training: diloco (outer Adam) on 2 devices stopped at step 7 resumes from the set at step 4, mid-period, bit for bit', async () => {
    const strategy = { diloco: { period: 3, outer } };
    const config = tinyConfig({ train: { epochs: 2, devices: 2, strategy, checkpointEvery: { steps: 4 } } });
    const whole = await train(config, { out: freshDir() });
    const runDir = freshDir();
    await assert.rejects(train(config, { out: runDir, failAt: { rank: 1, step: 7 } }), /injected failure/);
    const point = latestCompleteSet(runDir)!;
    assert.equal(point.state.step, 4);
    const device = readCheckpoint(join(point.dir, 'device-1.safetensors'));
    assert.deepEqual(JSON.parse(device.metadata['strategy.counters']!), { steps: 1, outerSteps: 1 });
    const slots = ['strategy.outer.m', 'strategy.outer.v'];
    for (const name of ['strategy.start', ...slots]) assert.ok(device.tensors.has(name), `the set holds ${name}`);
    const resumed = await train(config, { resume: runDir });
    assertSameTensors(tensorsOf(whole.checkpoint), tensorsOf(resumed.checkpoint));
  });
}

/** The issue lines of the ConfigError for `strategy` (YAML) under train:. */
function issuesOf(strategy: string): string[] {
  const yaml = `model:\n  input: [4]\n  layers:\n    - dense: { units: 2 }\ntrain: { strategy: ${strategy} }\n`;
  try {
    parseConfig(parseYaml(yaml, 'f.yaml'), 'f.yaml');
  } catch (e) {
    assert.ok(e instanceof ConfigError, `expected a ConfigError, got ${String(e)}`);
    return e.issues;
  }
  assert.fail('expected the config to be rejected');
}

test('config: errors name the field; the outer optimizer is written as optimizer: is', () => {
  assert.deepEqual(issuesOf('{ diloco: { period: 0 } }'), [
    'f.yaml: train.strategy.diloco.period: expected a positive integer, got 0',
  ]);
  assert.deepEqual(issuesOf('{ diloco: { periods: 5 } }'), [
    "f.yaml: train.strategy.diloco: unknown option 'periods' (did you mean 'period'?); allowed: period, outer, compression",
  ]);
  assert.deepEqual(issuesOf('{ diloco: { outer: { rmsprop: { lr: 1 } } } }'), [
    "f.yaml: train.strategy.diloco.outer: unknown optimizer 'rmsprop'; expected one of sgd, adam, adamw",
  ]);
  assert.deepEqual(issuesOf('{ diloco: { outer: { sgd: { momentum: 0.9 } } } }'), [
    'f.yaml: train.strategy.diloco.outer.sgd.lr: missing; expected a positive number',
  ]);
  assert.deepEqual(issuesOf('{ diloco: { outer: { sgd: { lr: 0.7, nesterov: true } } } }'), [
    'f.yaml: train.strategy.diloco.outer.sgd.nesterov: nesterov: true needs momentum > 0; set momentum (e.g. 0.9) or nesterov: false',
  ]);
});

test('config: the YAML form round-trips; simulate takes diloco:period=50', () => {
  const config = tinyConfig({ train: { strategy: { diloco: { period: 20, outer: { adamw: { lr: 0.3 } } } } } });
  assert.deepEqual(config.train.strategy, {
    type: 'diloco',
    period: 20,
    outer: { type: 'adamw', lr: 0.3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.01 },
  });
  assert.deepEqual(parseConfig(toYamlForm(config), 'again'), config);
  assert.deepEqual(parseConfig(parseYaml(configToYaml(config), 'config.yaml'), 'config.yaml'), config);
  const [choice] = parseStrategyChoices('diloco:period=50', tinyConfig());
  assert.deepEqual(choice!.spec, { type: 'diloco', period: 50, outer: PAPER_OUTER });
});
