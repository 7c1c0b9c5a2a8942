/**
 * Processes of one job that read different datasets are refused at rendezvous, before training, on
 * every process, with one line naming both processes and what differs; no checkpoint is written.
 * (Today's alternative: both train, one exits 0 with a checkpoint and the other fails.)
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { runCli, stderrLines, tmpDir } from '../cli/helpers.ts';
import { cutSubset, randomPort, SECRET, tinyJobConfig } from './jobHelpers.ts';

test('processes reading different datasets are refused at rendezvous, naming the processes and what differs', {
  timeout: 120_000,
}, async () => {
  const dir = tmpDir();
  const other = join(dir, 'other-data');
  mkdirSync(other);
  cutSubset(other, 60); // the job's trainLimit is 96: 60 samples vs 96
  const cfg = tinyJobConfig(dir);
  const p = randomPort();
  const env = (rank: number) => ({
    RANK: String(rank),
    WORLD_SIZE: '2',
    MASTER_ADDR: '127.0.0.1',
    MASTER_PORT: String(p),
    PARATRAIN_SECRET: SECRET,
  });
  const out = join(dir, 'run');
  const [r0, r1] = await Promise.all([
    runCli(['train', cfg, '--out', out, '--quiet'], { env: env(0), timeoutMs: 90_000 }),
    runCli(['train', cfg, '--data', other, '--out', out, '--quiet'], { env: env(1), timeoutMs: 90_000 }),
  ]);
  for (const [p, r] of [
    [0, r0!],
    [1, r1!],
  ] as const) {
    assert.notEqual(r.code, 0, `process ${p} must fail: ${r.stderr}`);
    const line = stderrLines(r).find((l) => /training data differs/.test(l));
    assert.ok(line, `process ${p} names the mismatch in one line:\n${r.stderr}`);
    assert.match(line, /process 1's training data differs from process 0's: samples 60 vs 96/);
    assert.match(line, /other-data/, 'names where process 1 read its data');
    assert.match(line, /every process must read the same dataset/);
  }
  // refused before training: no model and no checkpoint set anywhere
  const files = existsSync(out) ? readdirSync(out, { recursive: true }).map(String) : [];
  assert.ok(!files.some((f) => /safetensors/.test(f)), `no checkpoint: ${files.join(', ')}`);
});

test('processes reading the same data from different directories still train together', {
  timeout: 120_000,
}, async () => {
  const dir = tmpDir();
  const copy = join(dir, 'copy');
  mkdirSync(copy);
  cutSubset(copy, 4000); // the whole subset, uncompressed: the same samples from another path
  const cfg = tinyJobConfig(dir);
  const p = randomPort();
  const env = (rank: number) => ({
    RANK: String(rank),
    WORLD_SIZE: '2',
    MASTER_ADDR: '127.0.0.1',
    MASTER_PORT: String(p),
    PARATRAIN_SECRET: SECRET,
  });
  const [r0, r1] = await Promise.all([
    runCli(['train', cfg, '--out', join(dir, 'run'), '--quiet'], { env: env(0), timeoutMs: 90_000 }),
    runCli(['train', cfg, '--data', copy, '--quiet'], { env: env(1), timeoutMs: 90_000 }),
  ]);
  assert.equal(r0!.code, 0, r0!.stderr);
  assert.equal(r1!.code, 0, r1!.stderr);
});
