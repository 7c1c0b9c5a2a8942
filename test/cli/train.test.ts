import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync, gunzipSync } from 'node:zlib';
import { runCli, stderrLines, tmpDir, writeTinyConfig, SUBSET, type CliResult } from './helpers.ts';

test('paratrain train runs end to end: exit 0, metrics.jsonl and model.safetensors', { timeout: 60_000 }, async () => {
  const dir = tmpDir('paratrain-cli-');
  try {
    const config = writeTinyConfig(dir, { devices: 2, strategy: 'hybrid' });
    const out = join(dir, 'run');
    const r = await runCli(['train', config, '--epochs', '1', '--out', out, '--quiet']);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(stderrLines(r), [], '--quiet prints no progress');
    const summary = JSON.parse(r.stdout.trim()) as { runDir: string; testAccuracy: number };
    assert.equal(summary.runDir, out);
    assert.ok(summary.testAccuracy > 0 && summary.testAccuracy <= 1);
    const events = readFileSync(join(out, 'metrics.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string });
    const count = (type: string) => events.filter((e) => e.type === type).length;
    assert.equal(events[0]!.type, 'start');
    assert.equal(events.at(-1)!.type, 'end');
    assert.equal(count('step'), 2 * 8, 'every device, every step');
    assert.equal(count('rankEpoch'), 2);
    assert.equal(count('epoch'), 1);
    assert.equal(count('eval'), 1);
    assert.ok(existsSync(join(out, 'model.safetensors')));
    // the checkpoint holds the evaluated model: `eval` reproduces the run's final test accuracy exactly
    const e = await runCli(['eval', config, '--checkpoint', join(out, 'model.safetensors')]);
    assert.equal(e.code, 0, e.stderr);
    assert.equal((JSON.parse(e.stdout.trim()) as { testAccuracy: number }).testAccuracy, summary.testAccuracy);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a truncated or corrupt IDX file is one clear line naming the file', { timeout: 60_000 }, async () => {
  const dir = tmpDir('paratrain-cli-');
  try {
    const good = writeTinyConfig(dir);
    const data = join(dir, 'data');
    mkdirSync(data);
    for (const f of [
      'train-images-idx3-ubyte.gz',
      'train-labels-idx1-ubyte.gz',
      't10k-images-idx3-ubyte.gz',
      't10k-labels-idx1-ubyte.gz',
    ]) {
      writeFileSync(join(data, f), readFileSync(join(SUBSET, f)));
    }
    const labels = join(data, 't10k-labels-idx1-ubyte.gz');
    writeFileSync(labels, gzipSync(gunzipSync(readFileSync(labels)).subarray(0, 500)));
    assertOneLineError(
      await runCli(['train', good, '--data', data, '--quiet']),
      /t10k-labels-idx1-ubyte\.gz.*truncated/i,
      'truncated IDX',
    );
    writeFileSync(labels, Buffer.from('not gzip and not idx'));
    assertOneLineError(
      await runCli(['train', good, '--data', data, '--quiet']),
      /t10k-labels-idx1-ubyte\.gz/,
      'corrupt IDX',
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** One stderr line starting `paratrain:`, non-zero exit, no stack trace. */
function assertOneLineError(r: CliResult, pattern: RegExp, what: string): void {
  assert.notEqual(r.code, 0, `${what}: exit code`);
  const lines = stderrLines(r);
  assert.equal(lines.length, 1, `${what}: one stderr line, got:\n${r.stderr}`);
  assert.match(lines[0]!, /^paratrain: /, what);
  assert.match(lines[0]!, pattern, what);
  assert.doesNotMatch(r.stderr, /^\s+at /m, `${what}: no stack trace`);
}

test('bad input: one clear stderr line, non-zero exit, no stack trace (with --verbose: the trace)', {
  timeout: 60_000,
}, async () => {
  const dir = tmpDir('paratrain-cli-');
  try {
    const good = writeTinyConfig(dir);
    const badLayer = join(dir, 'bad-layer.yaml');
    writeFileSync(
      badLayer,
      readFileSync(good, 'utf8').replace('maxPool2d: { poolSize: 2 }', 'maxPool3d: { poolSize: 2 }'),
    );
    const used = join(dir, 'used');
    mkdirSync(used);
    writeFileSync(join(used, 'notes.txt'), 'keep me');
    const [missingConfig, unknownLayer, missingData, existingOut, verbose] = await Promise.all([
      runCli(['train', join(dir, 'nope.yaml'), '--quiet']),
      runCli(['train', badLayer, '--quiet']),
      runCli(['train', good, '--data', join(dir, 'no-such-data'), '--quiet']),
      runCli(['train', good, '--out', used, '--quiet']),
      runCli(['train', good, '--out', used, '--quiet', '--verbose']),
    ]);
    assertOneLineError(missingConfig, /config file not found: .*nope\.yaml/, 'missing config file');
    assertOneLineError(unknownLayer, /model\.layers\[1\]: unknown layer type 'maxPool3d'/, 'unknown layer type');
    assertOneLineError(missingData, /no-such-data does not exist/, 'missing --data directory');
    assertOneLineError(
      existingOut,
      /run directory .*used already holds files \(notes\.txt\).*--force/,
      'existing non-empty --out',
    );
    assert.equal(readFileSync(join(used, 'notes.txt'), 'utf8'), 'keep me');
    assert.notEqual(verbose.code, 0);
    assert.match(verbose.stderr, /^paratrain: run directory .*already holds files/);
    assert.match(verbose.stderr, /^\s+at .*(refuseFiles|makeRunDir|createRunDir)/m, '--verbose shows the stack trace');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
