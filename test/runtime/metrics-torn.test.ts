/**
 * metrics.jsonl holds whole lines: a torn last line (a crash, a full disk) is cut back before the next
 * run appends, its bytes kept in metrics.jsonl.torn, so the resumed run's start event is whole; a
 * write that the file system takes only part of is cut back to the last whole line; the readers
 * skip a torn last line.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { appendFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO } from '../cli/helpers.ts';
import { tinyJobConfig } from './jobHelpers.ts';
import { MetricsWriter, readMetrics } from '../../src/runtime/events/metrics.ts';
import { loadConfig } from '../../src/config/index.ts';
import { train } from '../../src/runtime/run/train.ts';
import { loadRun } from '../../src/report/runData.ts';

const tmp = () => mkdtempSync(join(tmpdir(), 'paratrain-torn-'));
const TORN = '{"type":"step","time":17,"step":3,"lo';

test('a torn last line is cut before appending and kept in metrics.jsonl.torn; the next start event is whole', () => {
  const dir = tmp(),
    file = join(dir, 'metrics.jsonl');
  writeFileSync(file, `{"type":"start","time":1}\n{"type":"step","time":2,"step":0}\n${TORN}`);
  const said: string[] = [];
  const w = new MetricsWriter(dir, { log: (m) => said.push(m) });
  w.write({ type: 'start', runDir: dir });
  w.close();
  assert.deepEqual(
    readMetrics(file).map((e) => e.type),
    ['start', 'step', 'start'],
  );
  assert.equal(readFileSync(`${file}.torn`, 'utf8'), `${TORN}\n`);
  assert.deepEqual(said, [
    `${file} ended in a torn line (${TORN.length} bytes of a write cut short); cut back to the last whole line, the bytes kept in ${file}.torn`,
  ]);

  // a second repair keeps the first one's bytes; a file that is all torn is cut to nothing
  writeFileSync(file, 'garbage');
  new MetricsWriter(dir).close();
  assert.equal(readFileSync(file, 'utf8'), '');
  assert.equal(readFileSync(`${file}.torn`, 'utf8'), `${TORN}\ngarbage\n`);
  // whole lines are left as they are; truncate starts afresh without looking
  writeFileSync(file, '{"type":"start","time":1}\n');
  new MetricsWriter(dir).close();
  assert.equal(readFileSync(file, 'utf8'), '{"type":"start","time":1}\n');
});

test('a run resumed after a torn line: its start and resume events are whole, the report reads it', {
  timeout: 120_000,
}, async () => {
  const dir = tmp(),
    out = join(dir, 'run');
  const config = loadConfig(tinyJobConfig(dir, ', checkpointEvery: { steps: 4 }'));
  // a run cut short after its first set (the model is the same, 2 epochs to go further)
  await train({ ...config, train: { ...config.train, epochs: 1 } }, { out });
  appendFileSync(join(out, 'metrics.jsonl'), TORN);
  const said: string[] = [];
  await train({ ...config, train: { ...config.train, epochs: 2 } }, { resume: out, log: (m) => said.push(m) });
  assert.ok(
    said.some((m) => m.includes('ended in a torn line')),
    said.join('\n'),
  );
  const events = readMetrics(join(out, 'metrics.jsonl'));
  assert.equal(events.filter((e) => e.type === 'start').length, 2, 'both runs have their start event');
  assert.equal(events.filter((e) => e.type === 'resume').length, 1);
  assert.equal(events.filter((e) => e.type === 'end').length, 2);
  assert.equal(readFileSync(join(out, 'metrics.jsonl.torn'), 'utf8'), `${TORN}\n`);
  // a reader given a torn last line skips it
  appendFileSync(join(out, 'metrics.jsonl'), TORN);
  assert.equal(readMetrics(join(out, 'metrics.jsonl')).length, events.length);
  assert.doesNotThrow(() => loadRun(out));
});

test('a write the file system takes only part of is cut back to the last whole line, naming the file', () => {
  const dir = tmp();
  // the file size limit (ulimit -f: 2 KiB in bash's 1024-byte blocks) lets part of a write through, then EFBIG
  const script = `
    import { MetricsWriter } from './src/runtime/events/metrics.ts';
    const w = new MetricsWriter(${JSON.stringify(dir)}, { flushEvery: 7 });
    try {
      for (let step = 0; ; step++) w.write({ type: 'step', step, loss: 0.5 });
    } catch (e) {
      console.log(e.message);
    }`;
  const r = spawnSync(
    'bash',
    ['-c', `ulimit -f 2 && exec "${process.execPath}" --import tsx --input-type=module -e "$0"`, script],
    {
      cwd: REPO,
      encoding: 'utf8',
    },
  );
  const file = join(dir, 'metrics.jsonl');
  assert.equal(r.status, 0, r.stderr);
  assert.equal(
    r.stdout.trim(),
    `file too large writing ${file}: raise the file size limit (ulimit -f) and resume the run`,
  );
  const text = readFileSync(file, 'utf8');
  assert.ok(text.length > 0 && text.length <= 2048, `${text.length} bytes`);
  assert.ok(text.endsWith('\n'), 'whole lines only');
  const steps = readMetrics(file).map((e) => e.step);
  assert.deepEqual(
    steps,
    Array.from({ length: text.split('\n').length - 1 }, (_, i) => i),
  );
  assert.equal(steps.length % 7, 0, 'the writes that succeeded, each of 7 lines; none of the one that failed');
});
