/**
 * A reader that closes the pipe early (`paratrain info | head -1`): the command ends normally,
 * without an unhandled EPIPE and its stack trace.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { MAIN, REPO } from './helpers.ts';

test('paratrain info with its stdout closed before it writes: exit 0, no EPIPE', { timeout: 60_000 }, async () => {
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN, 'info'], {
    cwd: REPO,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // closed at once: the command loads its backends first, so every write it makes meets a closed pipe
  child.stdout.destroy();
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    stderr += d;
  });
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', resolve);
  });
  assert.doesNotMatch(stderr, /EPIPE/);
  assert.equal(code, 0, stderr);
});
