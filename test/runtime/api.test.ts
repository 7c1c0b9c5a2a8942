import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { train, loadConfig, readMetrics, readCheckpoint } from '../../src/index.ts';

const SUBSET = new URL('../../data/fashion-mnist-subset/', import.meta.url).pathname;

test('library API: train(loadConfig(...), overrides) as in DESIGN.md', async () => {
  const out = join(mkdtempSync(join(tmpdir(), 'paratrain-api-')), 'run');
  const config = loadConfig(new URL('../../examples/mlp.yaml', import.meta.url).pathname);
  config.data.trainLimit = 512;
  config.data.testLimit = 200;
  const result = await train(config, { devices: 2, strategy: 'bmuf', epochs: 1, dataDir: SUBSET, out });
  assert.ok(result.testAccuracy > 0.3 && result.testAccuracy <= 1, `accuracy ${result.testAccuracy}`);
  assert.ok(result.samplesPerSecond > 0);
  const events = readMetrics(join(out, 'metrics.jsonl'));
  const start = events.find((e) => e.type === 'start')!;
  assert.equal(start['devices'], 2);
  assert.equal(start['strategy'], 'bmuf');
  assert.equal(events.filter((e) => e.type === 'step').length, 2 * Math.ceil(512 / 128));
  assert.ok(existsSync(result.checkpoint));
  const ckpt = readCheckpoint(result.checkpoint);
  assert.equal(JSON.parse(ckpt.metadata['config']!).train.strategy.type, 'bmuf');
});
