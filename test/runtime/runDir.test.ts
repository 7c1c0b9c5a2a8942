import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  mkdtempSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  rmSync,
  writeFileSync,
  lstatSync,
  realpathSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, basename } from 'node:path';
import { createRunDir, pointLatestAt, timestampName } from '../../src/runtime/files/runDir.ts';

function withDir(fn: (dir: string) => void): void {
  const dir = mkdtempSync(join(tmpdir(), 'paratrain-rundir-'));
  try {
    fn(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('timestampName is YYYYMMDD-HHMMSS in local time', () => {
  assert.equal(timestampName(new Date(2025, 0, 2, 3, 4, 5)), '20250102-030405');
});

test('without --out: runs/<stamp>-<hex>, and runs/latest points at the newest', () =>
  withDir((tmp) => {
    const root = join(tmp, 'runs');
    const a = createRunDir({ root });
    assert.match(basename(a), /^\d{8}-\d{6}-[0-9a-f]{4}$/);
    assert.equal(readlinkSync(join(root, 'latest')), basename(a), 'relative link');
    const b = createRunDir({ root });
    assert.notEqual(a, b);
    assert.ok(lstatSync(join(root, 'latest')).isSymbolicLink());
    assert.equal(realpathSync(join(root, 'latest')), realpathSync(b));
    assert.deepStrictEqual(readdirSync(root).sort(), [basename(a), basename(b), 'latest'].sort(), 'no temp links left');
    assert.deepStrictEqual(readdirSync(a), []);
  }));

test('runs/latest that is not a symlink is left alone; latest.txt names the run instead', () =>
  withDir((tmp) => {
    const root = join(tmp, 'runs');
    mkdirSync(join(root, 'latest'), { recursive: true });
    writeFileSync(join(root, 'latest', 'keep.txt'), 'mine');
    const d = createRunDir({ root });
    assert.equal(readFileSync(join(root, 'latest', 'keep.txt'), 'utf8'), 'mine');
    assert.equal(readFileSync(join(root, 'latest.txt'), 'utf8'), `${basename(d)}\n`);
    pointLatestAt(root, 'other');
    assert.equal(readFileSync(join(root, 'latest.txt'), 'utf8'), 'other\n');
  }));

test('--out: created when missing, used when empty', () =>
  withDir((tmp) => {
    const out = join(tmp, 'a', 'b');
    assert.equal(createRunDir({ out }), out);
    assert.deepStrictEqual(readdirSync(out), []);
    assert.equal(createRunDir({ out }), out, 'an empty directory is fine');
  }));

test('--out that holds files is refused, listing them and touching nothing; --force allows it', () =>
  withDir((tmp) => {
    const out = join(tmp, 'run1');
    mkdirSync(out);
    writeFileSync(join(out, 'metrics.jsonl'), '{"type":"start"}\n');
    writeFileSync(join(out, 'model.safetensors'), 'weights');
    assert.throws(
      () => createRunDir({ out }),
      (e: unknown) =>
        (e as Error).message ===
        `run directory ${out} already holds files (metrics.jsonl, model.safetensors); choose another --out or pass --force to overwrite`,
    );
    assert.deepStrictEqual(readdirSync(out).sort(), ['metrics.jsonl', 'model.safetensors']);
    assert.equal(readFileSync(join(out, 'metrics.jsonl'), 'utf8'), '{"type":"start"}\n');
    assert.equal(createRunDir({ out, force: true }), out);
    assert.equal(readFileSync(join(out, 'model.safetensors'), 'utf8'), 'weights', '--force deletes nothing');
    for (let i = 0; i < 6; i++) writeFileSync(join(out, `f${i}`), '');
    assert.throws(() => createRunDir({ out }), /already holds files \(f0, f1, f2, f3, f4, … 8 entries in all\)/);
  }));

test('--out that is a file is refused', () =>
  withDir((tmp) => {
    const out = join(tmp, 'file');
    writeFileSync(out, 'x');
    assert.throws(
      () => createRunDir({ out, force: true }),
      /run directory .*file exists and is not a directory; choose another --out/,
    );
  }));
