/**
 * Bad input found before the run directory is made: each case is one `paratrain:` line naming the
 * field and the fix, a non-zero exit, and no run directory left behind.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeIdx } from '../../src/data/idx.ts';
import { runCli, stderrLines, tmpDir, writeTinyConfig, type CliResult } from './helpers.ts';

/** The four Fashion-MNIST files of a fake release whose images are rows × cols. */
function writeRelease(dir: string, train: number, rows: number, cols: number): void {
  mkdirSync(dir, { recursive: true });
  const pair = (n: number) => [
    encodeIdx([n, rows, cols], new Uint8Array(n * rows * cols).fill(7)),
    encodeIdx(
      [n],
      new Uint8Array(n).map((_, i) => i % 10),
    ),
  ];
  const [ti, tl] = pair(train),
    [vi, vl] = pair(8);
  writeFileSync(join(dir, 'train-images-idx3-ubyte'), ti!);
  writeFileSync(join(dir, 'train-labels-idx1-ubyte'), tl!);
  writeFileSync(join(dir, 't10k-images-idx3-ubyte'), vi!);
  writeFileSync(join(dir, 't10k-labels-idx1-ubyte'), vl!);
}

function assertRefused(r: CliResult, pattern: RegExp, what: string, out?: string): void {
  assert.notEqual(r.code, 0, `${what}: exit code (stderr: ${r.stderr})`);
  const lines = stderrLines(r);
  assert.equal(lines.length, 1, `${what}: one stderr line, got:\n${r.stderr}`);
  assert.match(lines[0]!, /^paratrain: /, what);
  assert.match(lines[0]!, pattern, what);
  assert.doesNotMatch(r.stderr, /^\s+at /m, `${what}: no stack trace`);
  if (out) assert.equal(existsSync(out), false, `${what}: no run directory ${out} left behind`);
}

test('data and model that do not match, an empty set, impossible sizes: refused before the run directory', {
  timeout: 120_000,
}, async () => {
  const dir = tmpDir('paratrain-bad-input-');
  try {
    const tiny = readFileSync(writeTinyConfig(dir, { devices: 1 }), 'utf8');
    const config = (name: string, text: string) => {
      const p = join(dir, name);
      writeFileSync(p, text);
      return p;
    };
    const wide = join(dir, 'wide');
    writeRelease(wide, 64, 56, 14);
    const empty = join(dir, 'empty');
    writeRelease(empty, 0, 28, 28);
    const rgb = config('rgb.yaml', tiny.replace('input: [28, 28, 1]', 'input: [32, 32, 3]'));
    const huge = config('huge.yaml', tiny.replace('dense: { units: 10 }', 'dense: { units: 1000000000 }'));
    const plain = config('plain.yaml', tiny);
    const out = (k: string) => join(dir, `run-${k}`);
    const [shape, rgbRun, emptyRun, hugeRun, devicesRun] = await Promise.all([
      runCli(['train', plain, '--data', wide, '--out', out('wide'), '--quiet']),
      runCli(['train', rgb, '--out', out('rgb'), '--quiet']),
      runCli(['train', plain, '--data', empty, '--out', out('empty'), '--quiet']),
      runCli(['train', huge, '--out', out('huge'), '--quiet']),
      runCli(['train', plain, '--devices', '10000', '--out', out('devices'), '--quiet']),
    ]);
    // 56×14 has 784 values per sample like 28×28: only the shape tells them apart
    assertRefused(
      shape,
      /model\.input: the model takes \[28, 28, 1\] .* 56×14×1 samples; set model\.input: \[56, 14, 1\]/,
      '56×14 data',
      out('wide'),
    );
    assertRefused(
      rgbRun,
      /model\.input: the model takes \[32, 32, 3\] .* 28×28×1 samples/,
      '[32,32,3] on 28×28',
      out('rgb'),
    );
    assertRefused(emptyRun, /data: the training set .* 0 samples/, 'empty training set', out('empty'));
    assertRefused(
      hugeRun,
      /model\.layers\[3\]: this dense layer has 677,000,000,000 parameters, 10088\.1 GiB per device .*make the layer smaller/,
      'units: 1e9',
      out('huge'),
    );
    assertRefused(
      devicesRun,
      /train\.devices \(--devices\): 10000 device threads .* at most \d+/,
      '--devices 10000',
      out('devices'),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('an --out that cannot be written is one clear error, quickly, and leaves nothing behind', {
  timeout: 120_000,
}, async () => {
  const dir = tmpDir('paratrain-bad-out-');
  try {
    const good = writeTinyConfig(dir, { devices: 1 });
    const file = join(dir, 'a-file');
    writeFileSync(file, 'keep me');
    const locked = join(dir, 'locked');
    mkdirSync(locked);
    chmodSync(locked, 0o500); // refuses writes unless we are root; root is refused by the /proc and /sys cases
    const started = Date.now();
    const [proc, sys, underFile, deep, lockedRun] = await Promise.all([
      runCli(['train', good, '--out', '/proc/paratrain-x', '--quiet'], { timeoutMs: 60_000 }),
      runCli(['train', good, '--out', '/sys/paratrain-x/run', '--quiet'], { timeoutMs: 60_000 }),
      runCli(['train', good, '--out', join(file, 'run'), '--quiet'], { timeoutMs: 60_000 }),
      runCli(['train', good, '--out', '/proc/paratrain-x/a/b', '--quiet'], { timeoutMs: 60_000 }),
      runCli(['train', good, '--out', join(locked, 'run'), '--quiet'], { timeoutMs: 60_000 }),
    ]);
    // mkdir used to spin forever at 100% CPU under /proc
    assert.ok(Date.now() - started < 60_000, 'no hang');
    assertRefused(
      proc,
      /cannot use run directory \/proc\/paratrain-x \(ENOENT.*\); choose an --out/,
      '/proc/paratrain-x',
    );
    assertRefused(
      sys,
      /cannot use run directory \/sys\/paratrain-x\/run \(E[A-Z]+: .*\); choose an --out/,
      '/sys/paratrain-x/run',
    );
    assertRefused(
      underFile,
      /cannot use run directory .*a-file\/run \(ENOTDIR/,
      'a file where a directory is expected',
    );
    assertRefused(deep, /cannot use run directory \/proc\/paratrain-x\/a\/b/, '/proc/paratrain-x/a/b');
    assert.equal(readFileSync(file, 'utf8'), 'keep me');
    if (process.getuid?.() !== 0)
      assertRefused(
        lockedRun,
        /cannot use run directory .*locked\/run \(EACCES/,
        'read-only directory',
        join(locked, 'run'),
      );
    else assert.equal(lockedRun.code, 0, 'root writes anyway');
  } finally {
    chmodSync(join(dir, 'locked'), 0o700);
    rmSync(dir, { recursive: true, force: true });
  }
});
