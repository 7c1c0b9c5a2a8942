// Signals arriving while oneDNN computes (a graceful stop's SIGINT, --cpu-prof's SIGPROF) must not
// corrupt the heap: oneDNN 2.6's AVX2 sgemm runs with its stack pointer in a heap buffer, so the
// addon holds signals during oneDNN calls (native/onednn/onednn.h, holdSignals). A child computes
// while this process sends it SIGUSR2 as fast as it can; before the fix it aborted with
// "corrupted size vs. prev_size" within seconds.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createOneDnnBackend, onednnUnavailableReason } from '../../src/kernels/onednn/index.ts';

const skip = (await createOneDnnBackend()) ? false : `onednn backend unavailable: ${onednnUnavailableReason()}`;

test('oneDNN products survive a flood of signals handled on their thread', { skip, timeout: 60_000 }, async () => {
  const fixture = fileURLToPath(new URL('./onednnSignalFixture.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', fixture, '3'], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '',
    err = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d;
  });
  child.stderr.on('data', (d: Buffer) => {
    err += d;
  });
  const exited = new Promise<number | string>((resolve) =>
    child.on('exit', (code, signal) => resolve(code ?? signal ?? -1)),
  );
  while (!out.includes('ready') && child.exitCode === null && child.signalCode === null)
    await new Promise((r) => setTimeout(r, 20));
  let sent = 0,
    alive = true;
  void exited.then(() => {
    alive = false;
  });
  // until the child has printed its result (or died)
  while (alive && !out.includes('passes')) {
    for (let k = 0; k < 50 && alive; k++) {
      try {
        process.kill(child.pid!, 'SIGUSR2');
        sent++;
      } catch {
        alive = false;
      }
    }
    await new Promise((r) => setTimeout(r, 1));
  }
  child.stdin.end();
  const code = await exited;
  assert.equal(
    code,
    0,
    `the child died (${code}) after ${sent} signals: ${err.trim().split('\n').slice(-3).join(' | ')}`,
  );
  const done = JSON.parse(out.trim().split('\n').at(-1)!) as { passes: number; signals: number };
  assert.ok(
    done.passes > 0 && done.signals > 0,
    `passes ${done.passes}, signals handled ${done.signals} of ${sent} sent`,
  );
});
