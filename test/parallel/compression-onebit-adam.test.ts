/**
 * 1-bit Adam: hybrid with `compression: { oneBit: { startStep, freezeVariance: true } }` and an
 * Adam optimizer. Before startStep the run is plain hybrid's bit for bit; from it Adam's variance
 * no longer follows the gradient while m moves, and m becomes the compressed mean momentum; the
 * freeze survives a checkpoint set and --resume bit for bit; the schema names the field and the
 * fix when the option cannot apply.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { compressedHybridStrategy } from '../../src/parallel/compression/compressedHybrid.ts';
import type { CompressionSpec } from '../../src/parallel/compression/spec.ts';
import { hybridStrategy } from '../../src/parallel/strategies/hybrid.ts';
import type { ReplicaView, Strategy, StrategyState } from '../../src/parallel/strategy.ts';
import { createOptimizer, type Optimizer, type OptimizerState } from '../../src/optim/optimizer.ts';
import type { OptimizerSpec } from '../../src/optim/spec.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { parseConfig, parseYaml, ConfigError } from '../../src/config/index.ts';
import { train } from '../../src/runtime/run/train.ts';
import { latestCompleteSet } from '../../src/runtime/checkpoint/checkpointSet.ts';
import { readCheckpoint } from '../../src/runtime/checkpoint/checkpoint.ts';
import type { SetState } from '../../src/runtime/checkpoint/checkpointSet.ts';
import { resumeChanges } from '../../src/runtime/run/resumeChanges.ts';
import { localGroup } from './localGroup.ts';
import { stepInfo } from './strategyHarness.ts';
import { tinyConfig } from './helpers.ts';
import { randomArray } from '../util/close.ts';
import { assertSameTensors, freshDir, tensorsOf } from '../runtime/resumeHelpers.ts';

const TENSORS = [
  { name: 'a.kernel', shape: [24, 40], offset: 0 },
  { name: 'a.bias', shape: [40], offset: 960 },
  { name: 'b.kernel', shape: [40, 3], offset: 1008 },
];
const N = 1136;
const ADAM: OptimizerSpec = { type: 'adam', lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0 };
const SPEC: CompressionSpec = { type: 'oneBit', startStep: 2, freezeVariance: true };

type AdamReplica = ReplicaView & { params: Float32Array; grads: Float32Array; optimizer: Optimizer };

function adamReplica(params: Float32Array): AdamReplica {
  const optimizer = createOptimizer(jsBackend, ADAM, N);
  const r: AdamReplica = {
    params: params.slice(),
    grads: new Float32Array(N),
    state: new Float32Array(1),
    tensors: TENSORS,
    optimizer,
    localStep: (lr) => optimizer.step(r.params, r.grads, lr),
    freezeOptimizerVariance: () => optimizer.freezeVariance!(),
    optimizerMomentum: () => optimizer.momentum!(),
  };
  return r;
}

const copyOf = (s: OptimizerState): OptimizerState => ({
  ...s,
  buffers: s.buffers.map((b) => ({ name: b.name, data: b.data.slice() })),
});
const bufferOf = (r: AdamReplica, name: string) => r.optimizer.state().buffers.find((b) => b.name === name)!.data;

interface Saved {
  strategy: StrategyState[];
  optimizer: OptimizerState[];
}

/** Steps [from, to) of 2 devices from `params` (saved states restored when resuming), with `make`'s strategies. */
async function steps(
  make: (c: ReturnType<typeof localGroup>[number]) => Strategy,
  from: number,
  to: number,
  params: Float32Array,
  saved?: Saved,
  each?: (step: number, reps: AdamReplica[]) => void,
) {
  const comms = localGroup(2);
  const reps = comms.map(() => adamReplica(params));
  const strategies = comms.map(make);
  await Promise.all(strategies.map((s, r) => s.onStart!(reps[r]!)));
  if (saved)
    for (const [r, s] of strategies.entries()) {
      reps[r]!.optimizer.loadState(copyOf(saved.optimizer[r]!));
      s.restoreState?.(saved.strategy[r]!);
    }
  for (let step = from; step < to; step++) {
    const info = stepInfo(step, 0.01);
    for (const [r, s] of strategies.entries()) await s.beforeStep?.(reps[r]!, info);
    for (const [r, rep] of reps.entries()) rep.grads.set(randomArray(N, 10 * step + r + 1));
    await Promise.all(
      strategies.map(async (s, r) => {
        for (const o of reps[r]!.gradientReadyOffsets ?? [0]) await s.onGradientsReady?.(reps[r]!, o);
        await s.applyUpdate!(reps[r]!, info);
      }),
    );
    each?.(step, reps);
  }
  const state: Saved = {
    strategy: strategies.map((s) => {
      const st = s.saveState?.() ?? { tensors: {}, counters: {} };
      return {
        counters: { ...st.counters },
        tensors: Object.fromEntries(Object.entries(st.tensors).map(([k, v]) => [k, v.slice()])),
      };
    }),
    optimizer: reps.map((r) => copyOf(r.optimizer.state())),
  };
  return { params: reps.map((r) => r.params.slice()), state, reps };
}

const compressed = (c: ReturnType<typeof localGroup>[number]) =>
  compressedHybridStrategy(c, hybridStrategy(c, 64), SPEC, 9);
const plain = (c: ReturnType<typeof localGroup>[number]) => hybridStrategy(c, 64);

test('before startStep the steps are plain hybrid with Adam, bit for bit; from it v never falls while m moves', async () => {
  const start = randomArray(N, 50);
  const a = await steps(compressed, 0, 2, start);
  const b = await steps(plain, 0, 2, start);
  assert.deepEqual(a.params, b.params);
  assert.deepEqual(a.state.optimizer, b.state.optimizer);
  assert.equal(a.state.optimizer[0]!.varianceFrozenAt, undefined, 'not frozen before startStep');
  let frozenV: Float32Array | null = null,
    lastM: Float32Array | null = null;
  await steps(compressed, 0, 6, start, undefined, (step, reps) => {
    const v = bufferOf(reps[0]!, 'v'),
      m = bufferOf(reps[0]!, 'm');
    if (step === 1) frozenV = v.slice();
    if (step >= 2) {
      // frozen: v is no longer the gradient's running mean square, only raised where m̂² outgrows it
      assert.ok(
        v.every((x, i) => x >= frozenV![i]!),
        `v never below what the plain steps left, at step ${step}`,
      );
      assert.notDeepEqual(m, lastM, `m moves at step ${step}`);
      assert.equal(reps[0]!.optimizer.state().varianceFrozenAt, 2);
    }
    lastM = m.slice();
  });
});

test('1-bit Adam compresses the momentum: after a compressed step m/(1 − β1) holds two values per group, as the 1-bit exchange sends them', async () => {
  const start = randomArray(N, 52);
  const bias = TENSORS[1]!; // one group of 40 values, inside rank 1's chunk
  const distinct = (m: Float32Array) => {
    const values = [...m.subarray(bias.offset, bias.offset + 40)].map((x) => x / (1 - ADAM.beta1));
    // the same value up to float32 rounding of m ← β1·m + (1 − β1)·ĝ
    return values.filter((x, i) => values.findIndex((y) => Math.abs(x - y) <= 1e-5 * Math.abs(y)) === i).length;
  };
  const frozen = await steps(compressed, 0, 3, start);
  assert.ok(distinct(bufferOf(frozen.reps[0]!, 'm')) <= 2, 'the momentum is the 1-bit estimate');
  // gradient compression (no freeze) adds the 1-bit gradient to β1·m: m keeps its spread of values
  const unfrozen = (c: ReturnType<typeof localGroup>[number]) =>
    compressedHybridStrategy(c, hybridStrategy(c, 64), { type: 'oneBit', startStep: 2 }, 9);
  const plainMomentum = await steps(unfrozen, 0, 3, start);
  assert.ok(distinct(bufferOf(plainMomentum.reps[0]!, 'm')) > 20);
});

test('without freezeVariance the compressed steps keep updating v (the option decides it)', async () => {
  const start = randomArray(N, 50);
  const unfrozen = (c: ReturnType<typeof localGroup>[number]) =>
    compressedHybridStrategy(c, hybridStrategy(c, 64), { type: 'oneBit', startStep: 2 }, 9);
  const a = await steps(unfrozen, 0, 4, start);
  const b = await steps(compressed, 0, 4, start);
  assert.notDeepEqual(bufferOf(a.reps[0]!, 'v'), bufferOf(b.reps[0]!, 'v'));
  assert.equal(a.state.optimizer[0]!.varianceFrozenAt, undefined);
});

test('6 steps equal 4 steps, the strategy and optimizer state restored into fresh devices, then 2 more, bit for bit', async () => {
  const start = randomArray(N, 51);
  const whole = await steps(compressed, 0, 6, start);
  const half = await steps(compressed, 0, 4, start);
  assert.equal(half.state.optimizer[1]!.varianceFrozenAt, 2, 'the saved state is frozen');
  const resumed = await steps(compressed, 4, 6, half.params[0]!, half.state);
  assert.deepEqual(resumed.params, whole.params);
  assert.deepEqual(resumed.state, whole.state);
});

// a whole run on 2 device threads: Adam frozen at step 2, a checkpoint set at 4, a failure at 7, --resume
test('training: hybrid oneBit freezeVariance with adam: the freeze in the set, resume bit for bit', {
  timeout: 60_000,
}, async () => {
  const strategy = { hybrid: { compression: { oneBit: { startStep: 2, freezeVariance: true } } } };
  const config = tinyConfig({
    optimizer: { adam: { lr: 0.001 } },
    train: { epochs: 2, devices: 2, strategy, checkpointEvery: { steps: 4 } },
  });
  const whole = await train(config, { out: freshDir() });
  const runDir = freshDir();
  await assert.rejects(train(config, { out: runDir, failAt: { rank: 1, step: 7 } }), /injected failure/);
  const point = latestCompleteSet(runDir)!;
  assert.equal(point.state.step, 4);
  for (const r of [0, 1]) {
    const meta = readCheckpoint(join(point.dir, `device-${r}.safetensors`)).metadata;
    assert.equal(meta['optimizer.varianceFrozenAt'], '2');
  }
  const resumed = await train(config, { resume: runDir });
  assertSameTensors(tensorsOf(whole.checkpoint), tensorsOf(resumed.checkpoint));
  assert.equal(readCheckpoint(resumed.checkpoint).metadata['optimizer.varianceFrozenAt'], '2');
});

function issuesOf(yaml: string): string[] {
  try {
    parseConfig(parseYaml(yaml, 'f.yaml'), 'f.yaml');
  } catch (e) {
    assert.ok(e instanceof ConfigError, `expected a ConfigError, got ${String(e)}`);
    return e.issues;
  }
  assert.fail('expected the config to be rejected');
}

test('schema: freezeVariance needs startStep ≥ 1, hybrid and adam/adamw; each error names the field and the fix', () => {
  const cfg = (optimizer: string, strategy: string) =>
    `model:\n  input: [4]\n  layers:\n    - dense: { units: 2 }\noptimizer: ${optimizer}\ntrain: { strategy: ${strategy} }\n`;
  const ok = parseConfig(
    parseYaml(
      cfg('adamw', '{ hybrid: { compression: { oneBit: { startStep: 5, freezeVariance: true } } } }'),
      'f.yaml',
    ),
    'f.yaml',
  );
  assert.deepEqual((ok.train.strategy as { compression: unknown }).compression, {
    type: 'oneBit',
    startStep: 5,
    freezeVariance: true,
  });
  const noStart = issuesOf(cfg('adam', '{ hybrid: { compression: { oneBit: { freezeVariance: true } } } }'));
  assert.match(noStart.join('\n'), /oneBit\.freezeVariance.*needs startStep of at least 1/);
  const sgd = issuesOf(
    cfg('{ sgd: { lr: 0.1 } }', '{ hybrid: { compression: { oneBit: { startStep: 5, freezeVariance: true } } } }'),
  );
  assert.match(sgd.join('\n'), /freezeVariance.*the optimizer is sgd; use optimizer adam or adamw/);
  const bsp = issuesOf(cfg('adam', '{ bsp: { compression: { oneBit: { startStep: 5, freezeVariance: true } } } }'));
  assert.match(bsp.join('\n'), /train\.strategy\.bsp\.compression\.oneBit\.freezeVariance.*leave it out/);
});

test('resume: another freezeVariance is refused naming the field and the fix; another startStep is honoured', () => {
  const config = (oneBit: Record<string, unknown>) =>
    tinyConfig({
      optimizer: { adam: { lr: 0.001 } },
      train: { devices: 2, strategy: { hybrid: { compression: { oneBit } } } },
    });
  const frozen = config({ startStep: 2, freezeVariance: true });
  const state = { step: 4, devices: 2, strategy: 'hybrid', globalBatch: 16, stepsPerEpoch: 6 } as SetState;
  const o = { runDir: '/r', setDir: '/r/sets/step-4', state, saved: frozen, devices: 2 };
  assert.throws(
    () => resumeChanges({ ...o, given: config({ startStep: 2 }) }),
    /train\.strategy\.compression\.freezeVariance true → none: .*keeps Adam's variance frozen or not as it was.*resume with true, or start a new run/,
  );
  assert.deepEqual(resumeChanges({ ...o, given: config({ startStep: 3, freezeVariance: true }) }), [
    'resume: train.strategy.compression.startStep 2 → 3',
  ]);
});
