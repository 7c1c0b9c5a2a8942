import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { train, type TrainOptions } from '../../src/runtime/run/train.ts';
import { readCheckpoint } from '../../src/runtime/checkpoint/checkpoint.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';
import { SUBSET } from '../cli/helpers.ts';

/** A small convnet with dropout and Adam on the shipped subset, sets every 5 steps, 2 epochs; written into `dir`. */
export function writeResumeConfig(dir: string, o: { devices?: number; trainLimit?: number } = {}): string {
  const path = join(dir, 'resume.yaml');
  writeFileSync(
    path,
    `model:
  input: [28, 28, 1]
  layers:
    - conv2d: { filters: 4, kernelSize: 3, strides: 2, activation: relu }
    - flatten: {}
    - dense: { units: 16, activation: relu }
    - dropout: { rate: 0.3, masks: per-sample }
    - dense: { units: 10 }
optimizer: { adam: { lr: 0.002 } }
data: { dir: ${JSON.stringify(SUBSET)}, batchSize: 8, trainLimit: ${o.trainLimit ?? 480}, testLimit: 50 }
train: { epochs: 2, devices: ${o.devices ?? 1}, seed: 5, evalEvery: 0, checkpointEvery: { steps: 5 }, backend: js }
`,
  );
  return path;
}

export const freshDir = () => join(mkdtempSync(join(tmpdir(), 'paratrain-resume-')), 'run');

/** Every tensor of a checkpoint file (weights, state, optimizer slots), by name. */
export function tensorsOf(path: string): Map<string, Float32Array> {
  return new Map([...readCheckpoint(path).tensors].map(([name, t]) => [name, t.data]));
}

/** Every float of every tensor equal (bit-identical), or within `tolerance` (absolute) when given. */
export function assertSameTensors(
  a: Map<string, Float32Array>,
  b: Map<string, Float32Array>,
  tolerance = 0,
  only?: (name: string) => boolean,
): void {
  const names = [...a.keys()].filter((n) => !only || only(n));
  assert.deepEqual(names.sort(), [...b.keys()].filter((n) => !only || only(n)).sort());
  for (const name of names) {
    const x = a.get(name)!,
      y = b.get(name)!;
    assert.equal(x.length, y.length, name);
    let worst = 0,
      at = -1;
    for (let i = 0; i < x.length; i++) {
      const d = Math.abs(x[i]! - y[i]!);
      if (!(d <= worst)) {
        worst = d;
        at = i;
      }
    }
    if (tolerance === 0)
      assert.ok(
        at < 0 || (Object.is(worst, 0) && x.every((v, i) => Object.is(v, y[i]))),
        `${name}[${at}]: ${x[at]} ≠ ${y[at]}`,
      );
    else assert.ok(worst <= tolerance, `${name}[${at}]: ${x[at]} vs ${y[at]} differ by ${worst} > ${tolerance}`);
  }
}

/**
 * Trains `config` uninterrupted, and again with device `rank` failing at global step `failStep`
 * (a crash: the sets before it survive) then resumed; returns both final model files' tensors
 * and the interrupted run's directory.
 */
export async function crashAndResume(
  config: RunConfig,
  failStep: number,
  o: { rank?: number; resume?: TrainOptions } = {},
) {
  const whole = await train(config, { out: freshDir() });
  const runDir = freshDir();
  await assert.rejects(
    train(config, { out: runDir, failAt: { rank: o.rank ?? 0, step: failStep } }),
    /injected failure/,
  );
  const resumed = await train(config, { resume: runDir, ...o.resume });
  return { whole: tensorsOf(whole.checkpoint), resumed: tensorsOf(resumed.checkpoint), runDir, result: resumed };
}

/** A small convnet whose dense layers are split over the devices ("one weird trick"): the model-parallel resume tests' model. */
export const TRICK_LAYERS = [
  { conv2d: { filters: 4, kernelSize: 3, strides: 2, activation: 'relu' } },
  { maxPool2d: { poolSize: 2 } },
  { flatten: {} },
  { dense: { units: 16, activation: 'relu', parallel: 'model' } },
  { dropout: { rate: 0.3, masks: 'per-sample' } },
  { dense: { units: 10, parallel: 'model' } },
];
