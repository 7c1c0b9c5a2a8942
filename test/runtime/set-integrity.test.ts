/**
 * Checkpoint sets that prove themselves: state.json lists every file of the set with its size and
 * SHA-256, and a resume verifies them. A set whose bytes changed (random bytes, NaN, truncation),
 * whose state.json is cut short or gone, or which lacks a file (a sync job's server.safetensors) is
 * moved to checkpoints/damaged/ — never deleted — and the resume falls back to the newest set that
 * verifies, ending bit-identical to the uninterrupted run. `--resume RUN/checkpoints/step-N` resumes
 * from exactly that set, keeping the newer ones in checkpoints/superseded/.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, existsSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tinyConfig } from '../parallel/helpers.ts';
import { runCli, tmpDir } from '../cli/helpers.ts';
import { assertSameTensors, freshDir, tensorsOf } from './resumeHelpers.ts';
import { readMetrics } from '../../src/runtime/events/metrics.ts';
import { train } from '../../src/runtime/run/train.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';

const every = { steps: 4 };

/** The uninterrupted run's final tensors and a run that crashed at `failStep` (its sets survive), for `config`. */
async function wholeAndCrashed(config: RunConfig, failStep: number, rank = 0) {
  const whole = tensorsOf((await train(config, { out: freshDir() })).checkpoint);
  const crashed = freshDir();
  await assert.rejects(train(config, { out: crashed, failAt: { rank, step: failStep } }), /injected failure/);
  return { whole, crashed };
}

/** A copy of the crashed run to damage. */
function copyOf(runDir: string): string {
  const dir = freshDir();
  cpSync(runDir, dir, { recursive: true });
  return dir;
}

/** Resumes `runDir`, collecting what it logs. */
async function resumeLogged(config: RunConfig, resume: string) {
  const lines: string[] = [];
  const result = await train(config, { resume, log: (m) => lines.push(m) });
  return { result, log: lines.join('\n') };
}

const resumedAt = (runDir: string) =>
  readMetrics(join(runDir, 'metrics.jsonl'))
    .filter((e) => e.type === 'resume')
    .map((e) => e.step);

/** Overwrites `bytes` at `at` in `path`, keeping its length. */
function overwrite(path: string, at: number, bytes: Uint8Array): void {
  const buf = readFileSync(path);
  assert.ok(at + bytes.length <= buf.length, `${path} holds ${buf.length} bytes`);
  buf.set(bytes, at);
  writeFileSync(path, buf);
}

/** Deterministic "random" bytes (a linear congruential generator). */
function noise(n: number): Uint8Array {
  const out = new Uint8Array(n);
  let x = 12345;
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    out[i] = x >>> 24;
  }
  return out;
}

/** 400 bytes of float32 NaN (0x7fc00000, little-endian). */
const nanBytes = () => new Uint8Array(new Float32Array(100).fill(Number.NaN).buffer);

/** The byte offset of a safetensors file's data (after its 8-byte length and header). */
const dataStart = (path: string) => 8 + Number(readFileSync(path).readBigUInt64LE(0));

test('a damaged device file (random bytes, NaN, cut short) in the newest set: moved to damaged/, the resume falls back to the older set and ends bit-identical', async () => {
  const config = tinyConfig({ train: { epochs: 2, checkpointEvery: every }, optimizer: { adam: { lr: 0.01 } } });
  // sets at steps 4 and 8 survive the crash at step 9
  const { whole, crashed } = await wholeAndCrashed(config, 9);
  const damages: [string, (file: string) => void, RegExp][] = [
    ['4 KiB of random bytes', (f) => overwrite(f, statSync(f).size - 4096 - 8, noise(4096)), /SHA-256/],
    ['400 bytes of NaN', (f) => overwrite(f, dataStart(f) + 40, nanBytes()), /SHA-256/],
    ['cut short', (f) => truncateSync(f, statSync(f).size - 100), /bytes, state\.json says/],
  ];
  for (const [what, damage, why] of damages) {
    const runDir = copyOf(crashed);
    damage(join(runDir, 'checkpoints', 'step-00000008', 'device-0.safetensors'));
    const { result, log } = await resumeLogged(config, runDir);
    assert.deepEqual(resumedAt(runDir), [4], `${what}: resumed from the older set\n${log}`);
    assert.match(log, /step-00000008.*device-0\.safetensors/, what);
    assert.match(log, why, what);
    assert.match(log, /resuming from .*step-00000004.*step-00000008/, `${what}: says which set and why\n${log}`);
    const aside = join(runDir, 'checkpoints', 'damaged', 'step-00000008');
    assert.ok(existsSync(join(aside, 'device-0.safetensors')), `${what}: the damaged set is kept in damaged/`);
    assert.equal(result.steps, 24);
    assertSameTensors(whole, tensorsOf(result.checkpoint));
  }
});

test('a cut-short state.json: the set is moved aside, not deleted, and the older set is used', async () => {
  const config = tinyConfig({ train: { epochs: 2, checkpointEvery: every } });
  const { whole, crashed } = await wholeAndCrashed(config, 9);
  const runDir = copyOf(crashed);
  const state = join(runDir, 'checkpoints', 'step-00000008', 'state.json');
  writeFileSync(state, readFileSync(state, 'utf8').slice(0, 40));
  const { result, log } = await resumeLogged(config, runDir);
  assert.deepEqual(resumedAt(runDir), [4]);
  assert.match(log, /step-00000008.*state\.json/);
  assert.doesNotMatch(log, /removed what an interrupted run left/);
  const aside = join(runDir, 'checkpoints', 'damaged', 'step-00000008');
  assert.deepEqual(readdirSync(aside).sort(), ['device-0.safetensors', 'model.safetensors', 'state.json']);
  assertSameTensors(whole, tensorsOf(result.checkpoint));
});

test('every state.json gone: nothing is deleted, and the refusal names each set and its fault', async () => {
  const config = tinyConfig({ train: { epochs: 2, checkpointEvery: every } });
  // sets at 4, 8 and 12
  const runDir = freshDir();
  await assert.rejects(train(config, { out: runDir, failAt: { rank: 0, step: 13 } }), /injected failure/);
  for (const step of ['4', '8', '12'])
    rmSync(join(runDir, 'checkpoints', `step-${step.padStart(8, '0')}`, 'state.json'));
  const lines: string[] = [];
  await assert.rejects(train(config, { resume: runDir, log: (m) => lines.push(m) }), (e: Error) => {
    assert.doesNotMatch(e.message, /stopped before its first one/);
    assert.ok(!e.message.includes('\n'), `one line: ${e.message}`);
    for (const step of ['4', '8', '12'])
      assert.match(e.message, new RegExp(`step-${step.padStart(8, '0')}: state\\.json is missing`));
    assert.match(e.message, /checkpoints[/\\]damaged/);
    return true;
  });
  for (const step of ['4', '8', '12'])
    assert.ok(
      existsSync(join(runDir, 'checkpoints', 'damaged', `step-${step.padStart(8, '0')}`, 'model.safetensors')),
      `set ${step} kept`,
    );
});

test('sync: a set without server.safetensors is refused and the older set used; the resume ends bit-identical', async () => {
  const config = tinyConfig({
    train: { epochs: 2, devices: 2, strategy: 'sync', checkpointEvery: every },
    optimizer: { adam: { lr: 0.01 } },
  });
  const { whole, crashed } = await wholeAndCrashed(config, 9, 1);
  const runDir = copyOf(crashed);
  rmSync(join(runDir, 'checkpoints', 'step-00000008', 'server.safetensors'));
  const { result, log } = await resumeLogged(config, runDir);
  assert.deepEqual(resumedAt(runDir), [4], log);
  assert.match(log, /step-00000008.*server\.safetensors is missing/);
  assert.ok(existsSync(join(runDir, 'checkpoints', 'damaged', 'step-00000008', 'device-1.safetensors')));
  assertSameTensors(whole, tensorsOf(result.checkpoint));

  // sets of an earlier version list no files: what a sync job writes is required all the same, and they still load
  const legacy = copyOf(crashed);
  for (const set of ['step-00000004', 'step-00000008']) {
    const path = join(legacy, 'checkpoints', set, 'state.json');
    const { files: _, ...state } = JSON.parse(readFileSync(path, 'utf8'));
    writeFileSync(path, JSON.stringify(state));
  }
  rmSync(join(legacy, 'checkpoints', 'step-00000008', 'server.safetensors'));
  const old = await resumeLogged(config, legacy);
  assert.deepEqual(resumedAt(legacy), [4], old.log);
  assert.match(
    old.log,
    /step-00000008 failed verification: server\.safetensors is missing \(a sync set of 2 devices has it\)/,
  );
  assert.equal(old.log.match(/without checksums/g)?.length, 1, old.log);
  assertSameTensors(whole, tensorsOf(old.result.checkpoint));
});

test('paratrain train --resume RUN/checkpoints/step-N: resumes from exactly that set; the newer ones go to superseded/', async () => {
  const config = tinyConfig({ train: { epochs: 2, checkpointEvery: every } });
  const { whole, crashed } = await wholeAndCrashed(config, 9);
  const set = join(crashed, 'checkpoints', 'step-00000004');
  const r = await runCli(['train', '--resume', set], { timeoutMs: 120_000 });
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(resumedAt(crashed), [4]);
  assert.match(r.stderr, /step-00000008.*superseded/);
  assert.ok(existsSync(join(crashed, 'checkpoints', 'superseded', 'step-00000008', 'state.json')));
  assert.equal(JSON.parse(r.stdout.trim().split('\n').at(-1)!).runDir, crashed);
  assertSameTensors(whole, tensorsOf(join(crashed, 'model.safetensors')));
  // an old set's folder under another parent is not a set of a run: one line naming the form
  const loose = join(tmpDir('paratrain-set-'), 'step-00000004');
  cpSync(join(crashed, 'checkpoints', 'superseded', 'step-00000008'), loose, { recursive: true });
  const refused = await runCli(['train', '--resume', loose]);
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /--resume .*step-00000004: .*RUN_DIR\/checkpoints\/step-N/);
});
