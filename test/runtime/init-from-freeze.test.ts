/**
 * Fine-tuning with `train.initFrom: { path, reinit, freeze }`: a 3-class head on a 10-class
 * checkpoint starts fresh (`reinit: mismatched`, one line naming it) while the body comes from the
 * checkpoint; frozen layers end bit for bit as they started under every strategy — the optimizers
 * (AdamW with weight decay, which moves a weight even with a zero gradient) skip them, and the
 * strategies that average weights over 3 devices (where a mean of equal floats need not be exact)
 * put them back — while the other layers train. Unknown layer names, a layer both fresh and frozen
 * and a checkpoint that does not fit are refused before the run directory is made, naming the fix.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { memoryDataset, parseConfig, train } from '../../src/index.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';
import { buildModel } from '../../src/nn/model.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { planInitFrom } from '../../src/runtime/checkpoint/initFromPlan.ts';
import { initialWeightsOf, loadInitialWeights } from '../../src/runtime/checkpoint/initFrom.ts';
import { freshDir, tensorsOf } from './resumeHelpers.ts';
import { latestCompleteSet } from '../../src/runtime/checkpoint/checkpointSet.ts';
import { SET_SERVER_FILE } from '../../src/runtime/checkpoint/serverState.ts';
import { runCli, SUBSET, tmpDir } from '../cli/helpers.ts';

const N = 72;
const x = Float32Array.from({ length: N * 8 }, (_, i) => Math.sin(i * 12.9898) * 0.5 + ((i * 7) % 5) / 5);
memoryDataset({ x, shape: [N, 8], y: Int32Array.from({ length: N }, (_, i) => i % 10) }, 'freeze-ten');
memoryDataset({ x, shape: [N, 8], y: Int32Array.from({ length: N }, (_, i) => (i * 7) % 3) }, 'freeze-three');

/** dense 16 → dense 16 → dense `classes`; layers.1 split over the devices when `split`. */
function configOf(classes: number, train: Record<string, unknown>, split = false): RunConfig {
  return parseConfig({
    model: {
      input: [8],
      layers: [
        { dense: { units: 16, activation: 'relu' } },
        { dense: { units: 16, activation: 'relu', ...(split ? { parallel: 'model' } : {}) } },
        { dense: { units: classes } },
      ],
    },
    optimizer: { adamw: { lr: 0.01, weightDecay: 0.1 } },
    data: { dataset: 'memory', train: classes === 10 ? 'freeze-ten' : 'freeze-three', batchSize: 6 },
    train: { epochs: 1, seed: 4, evalEvery: 0, backend: 'js', clipGradNorm: 1, ...train },
  });
}

let base: Promise<string> | undefined;
/** The 10-class checkpoint every fine-tune starts from (trained once). */
const baseCheckpoint = () => (base ??= train(configOf(10, {}), { out: freshDir() }).then((r) => r.checkpoint));

const layer = (n: number) => (name: string) => name.startsWith(`layers.${n}.`);
function assertEqualLayer(a: Map<string, Float32Array>, b: Map<string, Float32Array>, n: number, what: string) {
  for (const name of [...a.keys()].filter(layer(n))) assert.deepEqual(b.get(name), a.get(name), `${what}: ${name}`);
}
function assertChangedLayer(a: Map<string, Float32Array>, b: Map<string, Float32Array>, n: number, what: string) {
  const name = `layers.${n}.kernel`;
  assert.equal(b.get(name)!.length, a.get(name)!.length, name);
  assert.notDeepEqual(b.get(name), a.get(name), `${what}: ${name} trained`);
}

test('reinit: mismatched: the 3-class head starts from fresh weights, the body from the checkpoint', async () => {
  const path = await baseCheckpoint();
  const lines: string[] = [];
  const planned = planInitFrom(configOf(3, { initFrom: { path, reinit: 'mismatched' } }), undefined, {
    resume: false,
    log: (m) => lines.push(m),
  });
  assert.deepEqual(planned.train.initFrom, { path, reinit: ['layers.2'], freeze: [] }, 'the run records its choice');
  assert.deepEqual(lines, [
    `--init-from ${path}: fresh weights for layers.2 (dense: kernel [16, 10] in the checkpoint, [16, 3] here); every other layer from the checkpoint`,
  ]);
  const model = buildModel(jsBackend, planned.model);
  model.initialize(planned.train.seed);
  const fresh = model.params.slice();
  loadInitialWeights(initialWeightsOf(planned)!, model);
  const saved = tensorsOf(path);
  for (const e of model.paramEntries) {
    const now = model.params.subarray(e.offset, e.offset + e.size);
    if (e.name.startsWith('layers.2.')) assert.deepEqual(now, fresh.subarray(e.offset, e.offset + e.size), e.name);
    else assert.deepEqual(now, saved.get(e.name), e.name);
  }
});

const STRATEGIES = [
  { strategy: 'sync', devices: 2 },
  { strategy: 'hybrid', devices: 2 },
  { strategy: 'async', devices: 2 },
  { strategy: 'bsp', devices: 3 },
  { strategy: 'bmuf', devices: 3 },
  { strategy: { easgd: { alpha: 0.2 } }, devices: 3 },
] as const;

for (const { strategy, devices } of STRATEGIES) {
  const name = typeof strategy === 'string' ? strategy : Object.keys(strategy)[0];
  test(`${name} on ${devices} devices: the frozen layer ends bit for bit as it started, the others train`, async () => {
    const path = await baseCheckpoint();
    const lines: string[] = [];
    const config = configOf(3, {
      devices,
      strategy,
      initFrom: { path, reinit: 'mismatched', freeze: ['layers.0'] },
    });
    const result = await train(config, { out: freshDir(), log: (m) => lines.push(m) });
    assert.ok(lines.includes('frozen (their weights are not trained): layers.0 (dense)'), lines.join('\n'));
    const before = tensorsOf(path),
      after = tensorsOf(result.checkpoint);
    assertEqualLayer(before, after, 0, name!);
    assertChangedLayer(before, after, 1, name!);
    const start = buildModel(jsBackend, config.model);
    start.initialize(config.train.seed);
    const head = start.paramEntries.find((e) => e.name === 'layers.2.kernel')!;
    assert.notDeepEqual(after.get('layers.2.kernel'), start.params.subarray(head.offset, head.offset + head.size));
    // a parameter server's own weights (the last set's server file): its optimizer left the layer alone
    const set = latestCompleteSet(result.runDir)!;
    const server = join(set.dir, SET_SERVER_FILE);
    assert.equal(existsSync(server), name === 'sync' || name === 'async', server);
    if (existsSync(server)) {
      const params = tensorsOf(server).get('params')!;
      for (const e of start.paramEntries.filter((p) => layer(0)(p.name)))
        assert.deepEqual(params.subarray(e.offset, e.offset + e.size), before.get(e.name), `the server's ${e.name}`);
    }
  });
}

test('a frozen model-parallel layer: its shards stay as they started on every device', async () => {
  const path = await baseCheckpoint();
  const config = configOf(3, { devices: 2, initFrom: { path, reinit: ['layers.2'], freeze: ['layers.1'] } }, true);
  const result = await train(config, { out: freshDir() });
  const before = tensorsOf(path),
    after = tensorsOf(result.checkpoint);
  assertEqualLayer(before, after, 1, 'split layer');
  assertChangedLayer(before, after, 0, 'replicated layer');
});

test('refused before the run directory is made: unknown names, fresh and frozen, a checkpoint that does not fit', async () => {
  const path = await baseCheckpoint();
  const refuse = async (initFrom: unknown, message: RegExp) => {
    const out = freshDir();
    await assert.rejects(train(configOf(3, { initFrom: initFrom as string }), { out }), message);
    assert.ok(!existsSync(out), 'no run directory is left behind');
  };
  await refuse(
    { path, reinit: 'mismatched', freeze: ['layers.7', 'layers.0', 'layers.9'] },
    /^ConfigError: initFrom\.freeze: the model has no layer 'layers\.7', 'layers\.9'; the model's layers with weights are layers\.0 \(dense\), layers\.1 \(dense\), layers\.2 \(dense\)$/,
  );
  await refuse(
    { path, reinit: ['layers.2', 'layers.1'], freeze: ['layers.1'] },
    /initFrom: layers\.1 would be reinitialised and frozen, keeping random weights/,
  );
  await refuse(
    path,
    /'layers\.2\.kernel' has shape \[16, 10\], the model needs \[16, 3\]; it was written for a different model \(to start layers\.2 from fresh weights instead, set train\.initFrom\.reinit: mismatched \(or pass --reinit mismatched\)\)/,
  );
  await assert.rejects(
    train(configOf(3, {}), { out: freshDir(), initFrom: { path, freeze: 'layers.0' } as never }),
    /train options: initFrom\.freeze: expected a list of layer names/,
  );
});

test('paratrain train --init-from with --reinit and --freeze; config.yaml records the layers chosen', async () => {
  const dir = tmpDir();
  const yaml = (name: string, layers: string) => {
    const file = join(dir, `${name}.yaml`);
    writeFileSync(
      file,
      `model:
  input: [28, 28, 1]
  layers: [${layers}]
data: { dir: ${JSON.stringify(SUBSET)}, batchSize: 16, trainLimit: 64, testLimit: 32 }
train: { epochs: 1, backend: js, evalEvery: 0 }
`,
    );
    return file;
  };
  const small = yaml('small', 'flatten, { dense: { units: 8, activation: relu } }, { dense: { units: 10 } }');
  const deeper = yaml(
    'deeper',
    'flatten, { dense: { units: 8, activation: relu } }, { dense: { units: 6, activation: relu } }, { dense: { units: 10 } }',
  );
  const first = await runCli(['train', small, '--out', join(dir, 'a'), '--quiet']);
  assert.equal(first.code, 0, first.stderr);
  const ckpt = join(dir, 'a', 'model.safetensors');
  const flatten = await runCli(['train', deeper, '--out', join(dir, 'b'), '--init-from', ckpt, '--freeze', 'layers.0']);
  assert.equal(flatten.code, 1, 'layers.0 is a flatten: no weights to freeze');
  assert.match(
    flatten.stderr,
    /initFrom\.freeze: layers\.0 \(flatten\) has no weights; the model's layers with weights are layers\.1 \(dense\), layers\.2 \(dense\), layers\.3 \(dense\)/,
  );
  const args = ['train', deeper, '--out', join(dir, 'c'), '--init-from', ckpt, '--reinit', 'mismatched'];
  const ok = await runCli([...args, '--freeze', 'layers.1']);
  assert.equal(ok.code, 0, ok.stderr);
  assert.match(
    ok.stderr,
    /fresh weights for layers\.2 \(dense: kernel \[8, 10\] in the checkpoint, \[8, 6\] here\), layers\.3 \(dense: the checkpoint has no kernel\); every other layer from the checkpoint/,
  );
  assert.match(ok.stderr, /frozen \(their weights are not trained\): layers\.1 \(dense\)/);
  assertEqualLayer(tensorsOf(ckpt), tensorsOf(join(dir, 'c', 'model.safetensors')), 1, 'cli');
  const recorded = readFileSync(join(dir, 'c', 'config.yaml'), 'utf8');
  assert.match(
    recorded,
    /initFrom:\n\s+path: \/.*\/a\/model\.safetensors\n\s+reinit: \[ layers\.2, layers\.3 \]\n\s+freeze: \[ layers\.1 \]/,
  );
  const alone = await runCli(['train', deeper, '--freeze', 'layers.1']);
  assert.equal(alone.code, 1);
  assert.match(
    alone.stderr,
    /^paratrain: --freeze goes with --init-from CHECKPOINT; give it too, or set train\.initFrom in the config/,
  );
});
