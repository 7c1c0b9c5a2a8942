import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO = resolve(fileURLToPath(new URL('../..', import.meta.url)));
export const SUBSET = join(REPO, 'data', 'fashion-mnist-subset');
export const MAIN = join(REPO, 'src', 'cli', 'main.ts');

export function tmpDir(prefix = 'paratrain-report-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** A small, quick config on the shipped subset: 256 training and 100 test images, 8 steps an epoch on 2 devices. */
export function writeTinyConfig(
  dir: string,
  opts: { devices?: number; strategy?: string; extraLayer?: string } = {},
): string {
  const path = join(dir, 'tiny.yaml');
  writeFileSync(
    path,
    `model:
  input: [28, 28, 1]
  layers:
    - conv2d: { filters: 4, kernelSize: 3, activation: relu }
    - maxPool2d: { poolSize: 2 }
${opts.extraLayer ? `    - ${opts.extraLayer}\n` : ''}    - flatten: {}
    - dense: { units: 10 }
optimizer: { adam: { lr: 0.002 } }
data: { dir: ${JSON.stringify(SUBSET)}, batchSize: 16, trainLimit: 256, testLimit: 100 }
train: { epochs: 1, devices: ${opts.devices ?? 2}, strategy: ${opts.strategy ?? 'hybrid'}, seed: 3 }
`,
  );
  return path;
}

export interface SyntheticRun {
  strategy?: string;
  devices?: number;
  epochs?: number;
  stepsPerEpoch?: number;
  /** rank → compute slowdown */
  slow?: Record<number, number>;
  /** leave out the end event (a run killed early) */
  unfinished?: boolean;
  /** unix ms of the start event */
  startTime?: number;
  /** evaluate a validation split after each epoch (the test set only at the end), with a best checkpoint on valAccuracy */
  validation?: boolean;
  /** stall reports of device 0, one per epoch */
  stalls?: boolean;
  /** a config.yaml (and command.txt) to write into the run directory */
  configYaml?: string;
}

/**
 * Writes a metrics.jsonl like `paratrain train` writes, with made-up but self-consistent numbers:
 * every device computes 10 ms per 32-sample step (times its slowdown); synchronous strategies
 * wait for the slowest device (idle time), async ones record staleness.
 */
export function writeSyntheticRun(dir: string, opts: SyntheticRun = {}): string {
  const {
    strategy = 'hybrid',
    devices = 2,
    epochs = 2,
    stepsPerEpoch = 50,
    slow = {},
    unfinished = false,
    startTime = 1_700_000_000_000,
    validation = false,
  } = opts;
  mkdirSync(dir, { recursive: true });
  const lines: object[] = [];
  let time = startTime;
  const t0 = time;
  const batch = 32;
  const async = strategy === 'async';
  lines.push({
    type: 'start',
    time,
    runDir: dir,
    dataSource: 'synthetic',
    backend: 'js',
    devices,
    strategy,
    parameters: 1234,
    trainSamples: stepsPerEpoch * batch * devices,
    testSamples: 100,
    epochs,
    stepsPerEpoch,
    globalBatch: batch * devices,
  });
  time += 500;
  const clock = Array.from({ length: devices }, () => time);
  let step = 0;
  for (let epoch = 0; epoch < epochs; epoch++) {
    const sums = Array.from({ length: devices }, () => ({
      lossSum: 0,
      correct: 0,
      samples: 0,
      computeMs: 0,
      syncMs: 0,
      idleMs: 0,
      bytes: 0,
    }));
    for (let s = 0; s < stepsPerEpoch; s++, step++) {
      const compute = Array.from({ length: devices }, (_, r) => 10 * (slow[r] ?? 1));
      const slowest = Math.max(...compute);
      const events = [];
      for (let rank = 0; rank < devices; rank++) {
        const idle = async ? 0 : slowest - compute[rank]!;
        const comm = async ? 1 : 2;
        const loss = 2.3 * Math.exp(-step / 40) + 0.3 + 0.05 * Math.sin(step * 7 + rank);
        const accuracy = Math.min(0.95, 0.1 + 0.8 * (1 - Math.exp(-step / 30)));
        clock[rank]! += compute[rank]! + comm + idle;
        const e: Record<string, unknown> = {
          type: 'step',
          time: Math.round(clock[rank]!),
          rank,
          epoch,
          step,
          stepInEpoch: s,
          stepsPerEpoch,
          loss,
          accuracy,
          lr: 0.001,
          samples: batch,
          computeMs: compute[rank],
          syncMs: comm + idle,
          idleMs: idle,
          bytes: async ? 0 : 2 * 1234 * 4,
        };
        if (async) {
          e.staleness = (step + rank) % 3;
          e.dropped = 0;
        }
        events.push(e);
        const t = sums[rank]!;
        t.lossSum += loss * batch;
        t.correct += Math.round(accuracy * batch);
        t.samples += batch;
        t.computeMs += compute[rank]!;
        t.syncMs += comm + idle;
        t.idleMs += idle;
        t.bytes += e.bytes as number;
      }
      lines.push(...events.sort((a, b) => (a.time as number) - (b.time as number)));
    }
    time = Math.max(...clock);
    for (let rank = 0; rank < devices; rank++)
      lines.push({ type: 'rankEpoch', time, rank, epoch, seconds: (time - t0) / 1000, ...sums[rank] });
    const samples = sums.reduce((n, x) => n + x.samples, 0);
    lines.push({
      type: 'epoch',
      time,
      epoch,
      samples,
      seconds: 1,
      samplesPerSecond: samples,
      loss: 0.5,
      accuracy: 0.8,
    });
    time += 100;
    if (opts.stalls)
      lines.push({
        type: 'stall',
        time: time - 50,
        rank: 0,
        waitingIn: `allreduce #${step} of 1234 floats at step ${step - 1}`,
        seconds: 61 + epoch,
        missing: [1],
        others: [],
      });
    const last = epoch === epochs - 1;
    if (!validation)
      lines.push({ type: 'eval', time, epoch, step, testLoss: 0.6 - 0.1 * epoch, testAccuracy: 0.7 + 0.05 * epoch });
    else {
      // the validation accuracy peaks in the middle: the best checkpoint is not the last
      const valAccuracy = 0.8 - 0.02 * Math.abs(epoch - Math.floor(epochs / 2));
      lines.push({
        type: 'eval',
        time,
        epoch,
        step,
        valLoss: 1 - valAccuracy,
        valAccuracy,
        ...(last ? { testLoss: 0.5, testAccuracy: 0.7 + 0.05 * (epochs - 1) } : {}),
      });
      if (epoch <= Math.floor(epochs / 2))
        lines.push({
          type: 'best',
          time,
          epoch,
          step,
          metric: 'valAccuracy',
          value: valAccuracy,
          path: join(dir, 'model-best.safetensors'),
        });
    }
  }
  if (opts.configYaml !== undefined) {
    writeFileSync(join(dir, 'config.yaml'), opts.configYaml);
    writeFileSync(join(dir, 'command.txt'), `paratrain train config.yaml --strategy ${strategy}\n`);
  }
  if (!unfinished) {
    lines.push({ type: 'checkpoint', time, epoch: epochs - 1, path: join(dir, 'model.safetensors') });
    lines.push({
      type: 'end',
      time: time + 10,
      seconds: (time + 10 - t0) / 1000,
      samplesPerSecond: 1000,
      testAccuracy: 0.7 + 0.05 * (epochs - 1),
      testLoss: 0.5,
      maxRssBytes: 300 * 2 ** 20,
    });
  }
  const path = join(dir, 'metrics.jsonl');
  writeFileSync(path, `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`);
  return path;
}
