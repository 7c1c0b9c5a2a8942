/**
 * A write that fails names the file and the fix. The full disk is /dev/full (every write: ENOSPC),
 * put where the writer writes: metrics.jsonl itself, or the temporary file `<path>.tmp-<pid>` of a
 * durable write or a checkpoint — the same for root and other users.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from '../cli/helpers.ts';
import { tinyJobConfig } from './jobHelpers.ts';
import { MetricsWriter } from '../../src/runtime/events/metrics.ts';
import { writeFileDurable } from '../../src/runtime/files/durableFile.ts';
import { writeCheckpoint } from '../../src/runtime/checkpoint/checkpoint.ts';
import { writeError } from '../../src/runtime/files/writeError.ts';

const skip = !existsSync('/dev/full') && 'needs /dev/full';
const tmp = () => mkdtempSync(join(tmpdir(), 'paratrain-full-'));
const full = (path: string) => `no space left on device writing ${path}: free space on that disk and resume the run`;

test('the metrics writer on a full disk names metrics.jsonl', { skip }, () => {
  const dir = tmp(),
    file = join(dir, 'metrics.jsonl');
  symlinkSync('/dev/full', file);
  const w = new MetricsWriter(dir);
  assert.throws(() => w.write({ type: 'start' }), { message: full(file) });
  w.close();
});

test('a durable write and a checkpoint on a full disk name the file', { skip }, () => {
  const dir = tmp();
  const config = join(dir, 'config.yaml');
  symlinkSync('/dev/full', `${config}.tmp-${process.pid}`);
  assert.throws(() => writeFileDurable(config, 'model: {}\n'), { message: full(config) });
  assert.ok(!existsSync(`${config}.tmp-${process.pid}`), 'the temporary file is gone');
  const model = join(dir, 'model.safetensors');
  symlinkSync('/dev/full', `${model}.tmp-${process.pid}`);
  assert.throws(() => writeCheckpoint(model, [{ name: 'w', shape: [2], data: new Float32Array(2) }]), {
    message: `no space left on device writing checkpoint ${model}: free space on that disk and resume the run`,
  });
  assert.ok(!existsSync(model));
});

test('paratrain train on a full disk ends with one line naming the file and the fix', {
  skip,
  timeout: 60_000,
}, async () => {
  const dir = tmp(),
    out = join(dir, 'run');
  mkdirSync(out);
  symlinkSync('/dev/full', join(out, 'metrics.jsonl'));
  const r = await runCli(['train', tinyJobConfig(dir), '--out', out, '--force', '--quiet']);
  assert.equal(r.code, 1, r.stderr);
  assert.equal(r.stderr.trim().split('\n').at(-1), `paratrain: ${full(join(out, 'metrics.jsonl'))}`);
});

test('permission and read-only failures name the file, the fix, and keep other failures as Node says them', () => {
  const err = (code: string, message = code) => Object.assign(new Error(message), { code });
  assert.equal(
    writeError('/r/metrics.jsonl', err('EACCES')).message,
    'permission denied writing /r/metrics.jsonl: make /r writable for this user and resume the run',
  );
  assert.equal(
    writeError('/r/.lock', err('EROFS'), { afterFix: 'run again' }).message,
    'read-only file system writing /r/.lock: remount it read-write, or move the run to a writable disk and run again',
  );
  assert.equal(
    writeError('/r/m.safetensors', err('EIO', 'EIO: i/o error, write'), { kind: 'checkpoint' }).message,
    'cannot write checkpoint /r/m.safetensors: EIO: i/o error, write',
  );
});
