import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { runCli, tmpDir, REPO, SUBSET } from './helpers.ts';
import { readCheckpoint } from '../../src/runtime/checkpoint/checkpoint.ts';
import { assertClose } from '../util/close.ts';
import { trainHere } from '../runtime/jobHelpers.ts';

interface Summary {
  testAccuracy: number;
}
interface StepEvent {
  type: string;
  rank: number;
  step: number;
  loss: number;
  samples: number;
  bytes?: number;
}

/** The step events of a run, in file order. */
const stepsOf = (out: string) =>
  readFileSync(join(out, 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as StepEvent)
    .filter((e) => e.type === 'step');

/** Per step, the job's training loss: the devices' losses weighted by the samples each computed it on. */
function jobLossPerStep(steps: StepEvent[]): number[] {
  const byStep = new Map<number, { sum: number; samples: number }>();
  for (const e of steps) {
    const s = byStep.get(e.step) ?? { sum: 0, samples: 0 };
    s.sum += e.loss * e.samples;
    s.samples += e.samples;
    byStep.set(e.step, s);
  }
  return [...byStep.keys()].sort((a, b) => a - b).map((k) => byStep.get(k)!.sum / byStep.get(k)!.samples);
}

/** The final test loss of a run (its 'end' event). */
const testLoss = (out: string) =>
  readFileSync(join(out, 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { type: string; testLoss?: number })
    .find((e) => e.type === 'end')!.testLoss!;

/** ‖a − b‖ / ‖b‖ (Euclidean). */
function relativeDistance(a: Float32Array, b: Float32Array): number {
  assert.equal(a.length, b.length, 'same number of weights');
  let d = 0,
    n = 0;
  for (let i = 0; i < a.length; i++) {
    d += (a[i]! - b[i]!) ** 2;
    n += b[i]! ** 2;
  }
  return Math.sqrt(d / n);
}

/** Every `layers.*` tensor of a checkpoint, concatenated in name order. */
function weights(path: string): Float32Array {
  const { tensors } = readCheckpoint(path);
  const parts = [...tensors.keys()]
    .filter((n) => n.startsWith('layers.'))
    .sort()
    .map((n) => tensors.get(n)!.data);
  const all = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    all.set(p, at);
    at += p.length;
  }
  return all;
}

// The example uses a global batch, so 1 and 2 devices train the same run; only float32 summation
// order differs (the trick's tests argue the tolerance). Dropout masks are keyed per sample here, so
// that the data-parallel tail's dropout too draws the same masks however the batch is split.
test('examples/alexnet-small.yaml trains with its FC layers model-parallel on 2 devices the same run as 1 device; eval reproduces the accuracy from the checkpoint', {
  timeout: 300_000,
}, async () => {
  const dir = tmpDir('paratrain-alexnet-');
  try {
    // the shipped example, cut to 3 steps of 64 samples and 100 test images
    const yaml = parse(readFileSync(join(REPO, 'examples', 'alexnet-small.yaml'), 'utf8')) as {
      model: { layers: Record<string, Record<string, unknown>>[] };
      data: Record<string, unknown>;
      train: Record<string, unknown>;
    };
    Object.assign(yaml.data, { dir: SUBSET, trainLimit: 192, testLimit: 100 });
    for (const layer of yaml.model.layers) if (layer.dropout) layer.dropout.masks = 'per-sample';
    const config = join(dir, 'alexnet.yaml');
    writeFileSync(config, stringify(yaml));
    const out = join(dir, 'run'),
      single = join(dir, 'single');
    // a loaded 2-core machine takes well over a minute for the two device threads to compile and start
    const r = await runCli(['train', config, '--devices', '2', '--epochs', '1', '--out', out, '--quiet'], {
      timeoutMs: 110_000,
    });
    assert.equal(r.code, 0, r.stderr);
    const summary = JSON.parse(r.stdout.trim()) as Summary;
    const steps = stepsOf(out);
    assert.equal(steps.length, 2 * 3, 'every device, every step');
    assert.ok(
      steps.every((e) => e.bytes! > 0),
      'activation exchange counted',
    );

    // the reference on 1 device, in this process (the CLI's path is the run above)
    const reference: Summary = await trainHere(config, single, { devices: 1, epochs: 1 });
    // forward passes of every step: the same up to summation order (observed ~1e-7 relative)
    assertClose(jobLossPerStep(steps), jobLossPerStep(stepsOf(single)), {
      rtol: 1e-5,
      atol: 0,
      what: 'training loss per step, 2 devices vs 1',
    });
    // after the last update: test loss, accuracy (one of 100 images may tip) and the weights as a whole
    // (Adam's first steps are ±lr wherever a gradient sits at rounding level, so not element by element)
    assertClose([testLoss(out)], [testLoss(single)], { rtol: 1e-4, atol: 0, what: 'test loss, 2 devices vs 1' });
    assert.ok(
      Math.abs(summary.testAccuracy - reference.testAccuracy) <= 0.01,
      `test accuracy: 2 devices ${summary.testAccuracy} vs 1 device ${reference.testAccuracy}`,
    );
    const drift = relativeDistance(weights(join(out, 'model.safetensors')), weights(join(single, 'model.safetensors')));
    assert.ok(drift < 1e-3, `final weights, 2 devices vs 1: ‖Δ‖/‖w‖ = ${drift}`);

    const e = await runCli(['eval', config, '--checkpoint', join(out, 'model.safetensors')]);
    assert.equal(e.code, 0, e.stderr);
    assert.equal((JSON.parse(e.stdout.trim()) as Summary).testAccuracy, summary.testAccuracy);
    // a strategy other than hybrid is a config error naming the flag that set it
    const bad = await runCli(['train', config, '--devices', '2', '--strategy', 'bsp', '--out', join(dir, 'bad')]);
    assert.equal(bad.code, 1);
    assert.match(
      bad.stderr,
      /--strategy: 'parallel: model' \(model\.layers\[7\]\) needs the synchronous hybrid strategy: .* got bsp — use strategy hybrid/,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
