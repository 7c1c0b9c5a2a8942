/**
 * Graceful stops: the first SIGINT/SIGTERM makes every device finish the step in flight and stop at
 * one agreed step; the checkpoint is written, a 'stopped' event recorded, the CLI says how to resume
 * and exits 130 (SIGINT) / 143 (SIGTERM); a second signal exits at once. The same through
 * `paratrain launch` with 2 processes (every process stops at the same step). (SIGTERM's stop, exit
 * 143 and resume line are checked on processes sent it by Slurm: cluster-signals.test.ts.)
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cliArgs, REPO, runCli, tmpDir } from '../cli/helpers.ts';
import { randomPort, tinyJobConfig } from './jobHelpers.ts';
import { readCheckpoint } from '../../src/runtime/checkpoint/checkpoint.ts';
import { train } from '../../src/runtime/run/train.ts';
import { loadConfig } from '../../src/config/index.ts';
import { evaluateCheckpoint } from '../../src/runtime/infer/evaluateCheckpoint.ts';

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
  stdout: string;
}

/**
 * Starts the CLI; once metrics.jsonl in `runDir` holds a step event (or, with `trigger`, once stderr
 * matches it), sends `signals`, each after the CLI has acknowledged the one before (its stderr line
 * "finishing the step in flight"; so two signals never merge into one pending signal).
 */
function runAndSignal(args: string[], runDir: string, signals: NodeJS.Signals[], trigger?: RegExp): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...cliArgs(), ...args], {
      cwd: REPO,
      env: { ...process.env, PARATRAIN_OFFLINE: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '',
      stderr = '',
      sent = 0;
    const acknowledged = () => (stderr.match(/finishing the step in flight/g) ?? []).length;
    const metrics = join(runDir, 'metrics.jsonl');
    const started = () =>
      trigger ? trigger.test(stderr) : existsSync(metrics) && readFileSync(metrics, 'utf8').includes('"type":"step"');
    const poll = setInterval(() => {
      if (sent === 0 ? !started() : acknowledged() < sent) return;
      child.kill(signals[sent++]!);
      if (sent === signals.length) clearInterval(poll);
    }, 20);
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
    });
    const killer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearInterval(poll);
      clearTimeout(killer);
      resolve({ code, signal, stderr, stdout });
    });
  });
}

function events(runDir: string): Record<string, unknown>[] {
  return readFileSync(join(runDir, 'metrics.jsonl'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
}

/** Each device's last step index. */
function lastSteps(runDir: string): Map<number, number> {
  const last = new Map<number, number>();
  for (const e of events(runDir))
    if (e.type === 'step') last.set(e.rank as number, Math.max(last.get(e.rank as number) ?? -1, e.step as number));
  return last;
}

async function checkStopped(r: Run, runDir: string, signal: string, code: number, devices: number): Promise<void> {
  assert.equal(r.code, code, r.stderr);
  const stopped = events(runDir).find((e) => e.type === 'stopped');
  assert.ok(stopped, `a 'stopped' event in metrics.jsonl\n${r.stderr}`);
  assert.equal(stopped.signal, signal);
  const steps = stopped.step as number;
  assert.ok(steps > 0 && steps < 6 * 400, `stopped mid-run (${steps})`);
  const last = lastSteps(runDir);
  assert.equal(last.size, devices);
  for (const [rank, s] of last) assert.equal(s, steps - 1, `device ${rank} ran steps 0 … ${steps - 1}`);
  // the set of the stop step is written (or was, when a set was due there), and the line names it
  const set = join(runDir, 'checkpoints', `step-${String(steps).padStart(8, '0')}`);
  assert.ok(existsSync(join(set, 'state.json')), `${set} is complete`);
  // the event's epoch is 0-based, the line counts from 1 as the progress lines do
  const line = `paratrain: stopped by ${signal} at step ${steps} (epoch ${(stopped.epoch as number) + 1}); the newest checkpoint set is ${set} (step ${steps}); resume with: paratrain train --resume ${runDir}`;
  assert.ok(r.stderr.includes(line), `expected the line\n${line}\nin\n${r.stderr}`);
  const ckpt = readCheckpoint(join(runDir, 'model.safetensors'));
  assert.equal(ckpt.metadata.step, String(steps), 'the checkpoint is of the step the run stopped at');
  // the printed test accuracy is that of the weights the run stopped with: the model file evaluated again
  const printed = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { testAccuracy: number | null };
  const evaluated = await evaluateCheckpoint(join(runDir, 'model.safetensors'));
  assert.equal(printed.testAccuracy, evaluated.testAccuracy, `printed ${r.stdout}`);
  const end = events(runDir).find((e) => e.type === 'end')!;
  assert.ok(
    Math.abs((end.testLoss as number) - evaluated.testLoss) <= 1e-6 * evaluated.testLoss,
    `the end event's test loss ${end.testLoss} is the model file's ${evaluated.testLoss}`,
  );
}

/** The tiny job of the multi-process tests, for 400 epochs of 6 steps: far longer than a test waits. */
function longJob(dir: string): string {
  const file = tinyJobConfig(dir);
  writeFileSync(file, readFileSync(file, 'utf8').replace('epochs: 1,', 'epochs: 400,'));
  return file;
}

test('SIGINT stops a 2-device hybrid run at one step on both devices, with a checkpoint, and exits 130', {
  timeout: 180_000,
}, async () => {
  const dir = tmpDir('paratrain-signal-'),
    out = join(dir, 'run');
  const r = await runAndSignal(['train', longJob(dir), '--devices', '2', '--strategy', 'hybrid', '--out', out], out, [
    'SIGINT',
  ]);
  await checkStopped(r, out, 'SIGINT', 130, 2);
  // the report reads a stopped run
  const report = await runCli(['report', out]);
  assert.equal(report.code, 0, report.stderr);
});

test('SIGINT before the first step: the line says no checkpoint set exists and suggests no resume, which would indeed refuse', {
  timeout: 180_000,
}, async () => {
  const dir = tmpDir('paratrain-signal-'),
    out = join(dir, 'run');
  // the run's first line is printed before its device threads start (they take far longer to load than the signal to land)
  const r = await runAndSignal(
    ['train', longJob(dir), '--devices', '2', '--strategy', 'hybrid', '--out', out],
    out,
    ['SIGINT'],
    /^run .* parameters/m,
  );
  assert.equal(r.code, 130, r.stderr);
  const stopped = events(out).find((e) => e.type === 'stopped');
  assert.equal(stopped?.step, 0, r.stderr);
  assert.ok(
    r.stderr.includes(
      'paratrain: stopped by SIGINT at step 0 (epoch 1); no checkpoint set was written, so there is nothing to resume: start the run again without --resume',
    ),
    r.stderr,
  );
  assert.doesNotMatch(r.stderr, /resume with/);
  const resumed = await runCli(['train', '--resume', out]);
  assert.equal(resumed.code, 1);
  assert.match(resumed.stderr, /no complete checkpoint set/);
});

test('a second SIGINT exits at once (130) with one line', { timeout: 180_000 }, async () => {
  const dir = tmpDir('paratrain-signal-'),
    out = join(dir, 'run');
  // a straggler makes every step long (100× its compute, seconds for the first): once device 0, inside a step,
  // has waited 0.2 s for it (the stall inspector's line names device 0's step; not a start-up skew), the first
  // SIGINT asks for a graceful stop, which must wait for that step; the second, sent once the first is
  // acknowledged, lands well before (sending them after the first step made the test wait that step out)
  const cfg = longJob(dir);
  writeFileSync(cfg, readFileSync(cfg, 'utf8').replace('backend: js', 'backend: js, stallWarningSeconds: 0.2'));
  const r = await runAndSignal(
    ['train', cfg, '--devices', '2', '--strategy', 'hybrid', '--out', out, '--slow-device', '1:100'],
    out,
    ['SIGINT', 'SIGINT'],
    /stall: rank 0 has waited [\d.]+ s in .* at step \d+ for rank 1/,
  );
  assert.equal(r.code, 130, r.stderr);
  assert.match(r.stderr, /paratrain: second SIGINT: exiting at once/);
  assert.ok(!events(out).some((e) => e.type === 'stopped'), 'no graceful stop was recorded');
});

test('a 2-process launch job sent SIGINT stops both processes at the same step and exits 130', {
  timeout: 240_000,
}, async () => {
  const dir = tmpDir('paratrain-signal-'),
    out = join(dir, 'run');
  const r = await runAndSignal(
    [
      'launch',
      '--nproc-per-node',
      '2',
      '--master-port',
      String(randomPort()),
      '--',
      'train',
      longJob(dir),
      '--devices',
      '1',
      '--strategy',
      'hybrid',
      '--out',
      out,
    ],
    out,
    ['SIGINT'],
  );
  // rank 0 records its device and process 1's device reports through the same step counts
  assert.equal(r.code, 130, r.stderr);
  const stopped = events(out).find((e) => e.type === 'stopped');
  assert.ok(stopped, r.stderr);
  const last = lastSteps(out);
  assert.equal(last.get(0), (stopped.step as number) - 1);
  // process 1 prints its own summary; both processes' devices stopped after the same number of steps
  const rank1 = r.stdout.split('\n').find((l) => l.startsWith('[process 1] {'));
  assert.ok(rank1, r.stdout);
  assert.match(r.stderr, /stopped by SIGINT at step \d+/);
  assert.equal(
    JSON.parse(rank1.slice('[process 1] '.length)).stopped?.step,
    stopped.step,
    'process 1 stopped after the same steps',
  );
});

test('the library: aborting TrainOptions.signal stops the run; the result says stopped', {
  timeout: 120_000,
}, async () => {
  const dir = tmpDir('paratrain-signal-');
  const config = loadConfig(longJob(dir));
  const controller = new AbortController();
  const stepsSeen = new Map<number, number>();
  const result = await train(
    { ...config, train: { ...config.train, devices: 2 } },
    {
      out: join(dir, 'run'),
      signal: controller.signal,
      onEvent: (e) => {
        if (e.type !== 'step') return;
        stepsSeen.set(e.rank, e.step);
        if (e.step === 7 && e.rank === 0) controller.abort('SIGINT');
      },
    },
  );
  assert.ok(result.stopped, 'result.stopped');
  assert.equal(result.stopped.signal, 'SIGINT');
  // the devices' step events reach the main thread late, so they may be a few steps past 7 by the abort
  assert.ok(
    result.stopped.step >= 8 && result.stopped.step <= 40,
    `stopped soon after the abort (${result.stopped.step})`,
  );
  assert.equal(result.steps, result.stopped.step);
  for (const [rank, s] of stepsSeen) assert.equal(s, result.stopped.step - 1, `device ${rank}`);
  assert.ok(existsSync(result.checkpoint));
});
