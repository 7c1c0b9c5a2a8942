import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, appendFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { MetricsWriter, readMetrics } from '../../src/runtime/events/metrics.ts';

function withDir(fn: (dir: string) => void): void {
  const dir = mkdtempSync(join(tmpdir(), 'paratrain-metrics-'));
  try {
    fn(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('events are written one JSON object per line with type and time, and read back', () =>
  withDir((dir) => {
    let t = 1000;
    const w = new MetricsWriter(dir, { now: () => t++ });
    w.write({ type: 'start', runDir: dir, devices: 1 });
    w.write({ type: 'step', step: 0, loss: 2.3, lr: 0.001 });
    w.write({ type: 'step', step: 1, loss: NaN, lr: Infinity });
    w.write({ type: 'eval', testAccuracy: 0.9, time: 5 });
    w.close();
    w.close(); // idempotent
    const lines = readFileSync(join(dir, 'metrics.jsonl'), 'utf8').split('\n');
    assert.equal(lines.length, 5);
    assert.equal(lines[4], '');
    assert.equal(lines[0], JSON.stringify({ type: 'start', time: 1000, runDir: dir, devices: 1 }));
    assert.deepStrictEqual(readMetrics(join(dir, 'metrics.jsonl')), [
      { type: 'start', time: 1000, runDir: dir, devices: 1 },
      { type: 'step', time: 1001, step: 0, loss: 2.3, lr: 0.001 },
      { type: 'step', time: 1002, step: 1, loss: NaN, lr: Infinity },
      { type: 'eval', time: 5, testAccuracy: 0.9 },
    ]);
    assert.throws(() => w.write({ type: 'step' }), /metrics file .* is closed/);
  }));

test('step events are buffered and flushed every N; other events at once', () =>
  withDir((dir) => {
    const path = join(dir, 'metrics.jsonl');
    const w = new MetricsWriter(dir, { flushEvery: 3 });
    const count = () => readMetrics(path).length;
    w.write({ type: 'step', step: 0 });
    w.write({ type: 'step', step: 1 });
    assert.equal(count(), 0);
    w.write({ type: 'step', step: 2 });
    assert.equal(count(), 3);
    w.write({ type: 'step', step: 3 });
    assert.equal(count(), 3);
    w.write({ type: 'epoch', epoch: 0 });
    assert.equal(count(), 5);
    w.write({ type: 'step', step: 4 });
    w.close();
    assert.equal(count(), 6);
  }));

test('appends to an existing file; truncate starts afresh', () =>
  withDir((dir) => {
    const path = join(dir, 'metrics.jsonl');
    const a = new MetricsWriter(dir);
    a.write({ type: 'start', n: 1 });
    a.close();
    const b = new MetricsWriter(dir);
    b.write({ type: 'start', n: 2 });
    b.close();
    assert.deepStrictEqual(
      readMetrics(path).map((e) => e.n),
      [1, 2],
    );
    const c = new MetricsWriter(dir, { truncate: true });
    c.write({ type: 'start', n: 3 });
    c.close();
    assert.deepStrictEqual(
      readMetrics(path).map((e) => e.n),
      [3],
    );
  }));

test('a process that dies without closing still leaves its events (flushed on exit)', () =>
  withDir((dir) => {
    const mod = fileURLToPath(new URL('../../src/runtime/events/metrics.ts', import.meta.url));
    const script = `
    import { MetricsWriter } from ${JSON.stringify(mod)};
    const w = new MetricsWriter(${JSON.stringify(dir)}, { flushEvery: 100 });
    for (let i = 0; i < 5; i++) w.write({ type: 'step', step: i });
    throw new Error('crash mid-run');
  `;
    const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /crash mid-run/);
    assert.deepStrictEqual(
      readMetrics(join(dir, 'metrics.jsonl')).map((e) => e.step),
      [0, 1, 2, 3, 4],
    );
  }));

test('readMetrics reports a bad line by number and tolerates a torn last line', () =>
  withDir((dir) => {
    const path = join(dir, 'metrics.jsonl');
    writeFileSync(path, '{"type":"start","time":1}\n\n{"type":"step","time":2}\n{"type":"step","ti');
    assert.deepStrictEqual(readMetrics(path), [
      { type: 'start', time: 1 },
      { type: 'step', time: 2 },
    ]);
    appendFileSync(path, 'me":3}\n{broken\n{"type":"end","time":4}\n');
    assert.throws(
      () => readMetrics(path),
      (e: unknown) => (e as Error).message.startsWith(`metrics file ${path}: line 5 is not valid JSON (`),
    );
    writeFileSync(path, '{"type":"start","time":1}\n[1,2]\n');
    assert.throws(
      () => readMetrics(path),
      (e: unknown) =>
        (e as Error).message === `metrics file ${path}: line 2 is not an event (expected an object with a "type")`,
    );
    assert.throws(() => readMetrics(join(dir, 'nope.jsonl')), /^Error: metrics file .*nope\.jsonl not found$/);
  }));
