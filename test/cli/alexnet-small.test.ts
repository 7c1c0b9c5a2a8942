import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { runCli, tmpDir, REPO, SUBSET } from './helpers.ts';

test('examples/alexnet-small.yaml trains with its FC layers model-parallel on 2 devices; eval reproduces the accuracy from the checkpoint', { timeout: 90_000 }, async () => {
  const dir = tmpDir('paratrain-alexnet-');
  try {
    // the shipped example, cut to 3 steps of 64 samples and 100 test images
    const yaml = parse(readFileSync(join(REPO, 'examples', 'alexnet-small.yaml'), 'utf8')) as { data: Record<string, unknown>; train: Record<string, unknown> };
    Object.assign(yaml.data, { dir: SUBSET, trainLimit: 192, testLimit: 100 });
    const config = join(dir, 'alexnet.yaml');
    writeFileSync(config, stringify(yaml));
    const out = join(dir, 'run');
    const r = await runCli(['train', config, '--devices', '2', '--epochs', '1', '--out', out, '--quiet']);
    assert.equal(r.code, 0, r.stderr);
    const summary = JSON.parse(r.stdout.trim()) as { testAccuracy: number };
    assert.ok(summary.testAccuracy >= 0 && summary.testAccuracy <= 1);
    const steps = readFileSync(join(out, 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { type: string; bytes?: number })
      .filter((e) => e.type === 'step');
    assert.equal(steps.length, 2 * 3, 'every device, every step');
    assert.ok(steps.every((e) => e.bytes! > 0), 'activation exchange counted');
    const e = await runCli(['eval', config, '--checkpoint', join(out, 'model.safetensors')]);
    assert.equal(e.code, 0, e.stderr);
    assert.equal((JSON.parse(e.stdout.trim()) as { testAccuracy: number }).testAccuracy, summary.testAccuracy);
    // a strategy other than hybrid is a config error naming the flag that set it
    const bad = await runCli(['train', config, '--devices', '2', '--strategy', 'bsp', '--out', join(dir, 'bad')]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /--strategy: 'parallel: model' \(model\.layers\[7\]\) needs the synchronous hybrid strategy: .* got bsp — use strategy hybrid/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
