import assert from 'node:assert/strict';
import { cpSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { train } from '../../src/runtime/run/train.ts';
import { Replica } from '../../src/runtime/device/replica.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { localStrategy } from '../../src/parallel/strategy.ts';
import { readCheckpoint } from '../../src/runtime/checkpoint/checkpoint.ts';
import { completeSets } from '../../src/runtime/checkpoint/checkpointSet.ts';
import type { ResumePoint } from '../../src/runtime/checkpoint/checkpointSetup.ts';
import { restoreFromWholeModel } from '../../src/runtime/device/wholeModelRestore.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';
import { localGroup } from '../parallel/localGroup.ts';
import { assertClose } from '../util/close.ts';
import { freshDir, tensorsOf } from './resumeHelpers.ts';

/** The model-parallel equivalence tests' tolerance: only float32 summation order differs. */
export const TOL = { rtol: 1e-4, atol: 1e-5 };

/** `config` on `devices` devices, with train.tensorParallel `tp` (undefined: none). */
export const on = (config: RunConfig, devices: number, tp?: number): RunConfig => ({
  ...config,
  train: { ...config.train, devices, tensorParallel: tp },
});

/** An uninterrupted run of `config` (sets every few steps): its run directory, final tensors, and its set at `step`. */
export async function trained(config: RunConfig, step: number) {
  const runDir = freshDir();
  const result = await train(config, { out: runDir });
  const point = completeSets(runDir).find((p) => p.state.step === step);
  assert.ok(point, `the run has a set at step ${step}`);
  return { runDir, point, tensors: tensorsOf(result.checkpoint) };
}

/**
 * The set `point` of a run resumed by `config` (on a copy of the run directory) against `want`,
 * the final tensors of a run on the same layout as `config` throughout: every weight within TOL,
 * and the resume says what changed (`says`). Returns the resumed run's sets (in the copy).
 */
export async function resumesLike(
  point: ResumePoint,
  config: RunConfig,
  want: Map<string, Float32Array>,
  what: string,
  says: RegExp,
): Promise<ResumePoint[]> {
  const copy = freshDir();
  cpSync(dirname(dirname(point.dir)), copy, { recursive: true });
  const lines: string[] = [];
  const resumed = await train(config, {
    resume: join(copy, 'checkpoints', basename(point.dir)),
    log: (l) => lines.push(l),
  });
  const got = tensorsOf(resumed.checkpoint);
  assert.deepEqual([...got.keys()].sort(), [...want.keys()].sort(), what);
  for (const [name, t] of want)
    if (name.startsWith('layers.')) assertClose(got.get(name)!, t, { ...TOL, what: `${what}: ${name}` });
  assert.ok(
    lines.some((l) => l.startsWith('resume: ') && says.test(l)),
    `${what}: the resume says what changed: ${lines.join(' | ')}`,
  );
  return completeSets(copy);
}

/**
 * Every device of `config` takes its part of the set's model file (the cross-layout restore), and
 * the model gathered back from them is the file, bit for bit: weights, statistics, optimizer slots
 * and step. Returns the gathered tensors' names.
 */
export async function restoreGathersBack(point: ResumePoint, config: RunConfig): Promise<string[]> {
  const file = readCheckpoint(join(point.dir, 'model.safetensors'));
  const G = config.train.devices;
  const comms = G === 1 ? [undefined] : localGroup(G);
  const gathered = await Promise.all(
    comms.map(async (comm, rank) => {
      const replica = Replica.create(jsBackend, config, { comm });
      restoreFromWholeModel(point, rank, G, config, replica, localStrategy);
      return replica.gather(rank, true);
    }),
  );
  const whole = gathered[0]!;
  const { model, optimizer } = whole;
  const names: string[] = [];
  for (const e of model.paramEntries) {
    assert.deepStrictEqual(model.params.subarray(e.offset, e.offset + e.size), file.tensors.get(e.name)!.data, e.name);
    names.push(e.name);
  }
  for (const e of model.stateEntries)
    assert.deepStrictEqual(model.state.subarray(e.offset, e.offset + e.size), file.tensors.get(e.name)!.data, e.name);
  const opt = optimizer.state();
  assert.ok(opt.buffers.length > 0, 'the optimizer has slots');
  for (const b of opt.buffers) assert.deepStrictEqual(b.data, file.tensors.get(`optimizer.${b.name}`)!.data, b.name);
  assert.equal(String(opt.step), file.metadata['optimizer.step']);
  return names;
}
