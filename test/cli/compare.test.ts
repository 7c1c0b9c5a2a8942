import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { choiceConfig, parseStrategies, runDirName } from '../../src/cli/compareCommand.ts';
import { parseStrategyChoice } from '../../src/simulate/choices.ts';
import { parseConfig } from '../../src/config/index.ts';
import { CHART_IDS } from '../../src/report/index.ts';

/** A comparison without validation splits or stalls has every other chart. */
const DRAWN: readonly string[] = CHART_IDS.filter((id) => id !== 'validation' && id !== 'stalls');
import { runCli, stderrLines, tmpDir, writeTinyConfig } from './helpers.ts';

test('parseStrategies: names the empty list or a repeated strategy', () => {
  assert.deepEqual(parseStrategies('hybrid, async,bmuf:period=8'), ['hybrid', 'async', 'bmuf:period=8']);
  assert.throws(() => parseStrategies('bsp,bsp'), { message: "--strategies: 'bsp' is listed twice" });
  assert.throws(() => parseStrategies(' , '), /expected a comma-separated list/);
});

test('a compared strategy with options trains the config it names, in a directory of its own', () => {
  const base = parseConfig(
    {
      model: { input: [4], layers: [{ dense: { units: 8 } }, { relu: {} }, { dense: { units: 3 } }] },
      data: { dataset: 'memory', train: 'tiny', batchSize: 8 },
      train: { devices: 2, strategy: { bmuf: { period: 3 } } },
    },
    'test',
  );
  const config = (item: string) => choiceConfig(base, parseStrategyChoice(item, base));
  assert.deepEqual(config('hybrid:shard=1').train.strategy, { type: 'hybrid', bucketBytes: 4 << 20, shard: 1 });
  assert.equal(config('hybrid:compression=oneBit').train.strategy.type, 'hybrid');
  assert.ok('compression' in config('hybrid:compression=oneBit').train.strategy);
  assert.equal(
    (config('bmuf').train.strategy as { period: number }).period,
    3,
    "a bare name keeps the config's options",
  );
  assert.equal((config('trick').model.layers[0] as { parallel?: string }).parallel, 'model');
  const piped = config('pipeline:stages=2:microBatches=4:schedule=gpipe').train;
  assert.deepEqual([piped.pipeline?.stages, piped.pipeline?.schedule, piped.microBatches], [2, 'gpipe', 4]);
  assert.throws(() => parseStrategyChoice('downpour', base), /unknown strategy 'downpour'/);
  assert.deepEqual(config('hybrid:shard=3').train.strategy, { type: 'hybrid', bucketBytes: 4 << 20, shard: 3 });
  assert.throws(() => config('hybrid:shard=4'), /a ZeRO stage/);
  assert.equal(runDirName('pipeline:stages=2:microBatches=4'), 'pipeline-stages-2-microBatches-4');
  assert.equal(runDirName('hybrid:compression=oneBit'), 'hybrid-compression-oneBit');
});

test('paratrain compare: two strategies, same data and seed, one report and a table', { timeout: 90_000 }, async () => {
  const dir = tmpDir('paratrain-cli-compare-');
  try {
    const config = writeTinyConfig(dir, { devices: 1 });
    const out = join(dir, 'cmp');
    const r = await runCli([
      'compare',
      config,
      '--strategies',
      'hybrid,async',
      '--devices',
      '2',
      '--epochs',
      '1',
      '--out',
      out,
    ]);
    assert.equal(r.code, 0, r.stderr);
    // progress: plain lines (no TTY), each prefixed with its strategy
    assert.match(r.stderr, /^\[1\/2\] hybrid on 2 devices → /m);
    assert.match(r.stderr, /^\[2\/2\] async on 2 devices → /m);
    assert.match(r.stderr, /^async: {3}device 1 {2}compute +\d+%/m, 'per-device lines after each epoch');
    const lines = r.stdout.trim().split('\n');
    assert.match(lines[0]!, /^strategy +devices +test accuracy +wall time +samples\/s +mean idle +mean staleness/);
    assert.match(lines[2]!, /^hybrid +2 +\d+\.\d\d% +\d+\.\d s +\d+ +\d+\.\d% +— /);
    assert.match(lines[3]!, /^async +2 +\d+\.\d\d% +\d+\.\d s +\d+ +\d+\.\d% +\d\.\d\d /);
    assert.equal(lines.at(-1), `report: ${join(out, 'report.html')}`);
    for (const s of ['hybrid', 'async']) {
      assert.ok(existsSync(join(out, s, 'metrics.jsonl')), s);
      const start = JSON.parse(readFileSync(join(out, s, 'metrics.jsonl'), 'utf8').split('\n')[0]!) as {
        strategy: string;
        devices: number;
      };
      assert.deepEqual([start.strategy, start.devices], [s, 2]);
    }
    const html = readFileSync(join(out, 'report.html'), 'utf8');
    assert.match(html, /<title>paratrain compare: hybrid, async on 2 devices<\/title>/);
    for (const id of CHART_IDS) assert.equal(html.includes(`id="chart-${id}"`), DRAWN.includes(id), id);
    assert.doesNotMatch(html, /https?:\/\//i);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('paratrain compare: bad input is one line naming the problem', { timeout: 60_000 }, async () => {
  const dir = tmpDir('paratrain-cli-compare-');
  try {
    const config = writeTinyConfig(dir, { devices: 1 });
    const used = join(dir, 'used');
    mkdirSync(used);
    writeFileSync(join(used, 'x'), '');
    const [badName, oneDevice, existing] = await Promise.all([
      runCli(['compare', config, '--strategies', 'hybrid,downpour', '--devices', '2']),
      runCli(['compare', config, '--strategies', 'hybrid,async']),
      runCli(['compare', config, '--strategies', 'hybrid', '--devices', '2', '--out', used]),
    ]);
    const one = (r: typeof badName) => {
      assert.equal(r.code, 1, r.stderr);
      const l = stderrLines(r);
      assert.equal(l.length, 1, r.stderr);
      return l[0]!;
    };
    assert.match(one(badName), /^paratrain: --strategies: unknown strategy 'downpour'/);
    assert.match(one(oneDevice), /^paratrain: compare: the strategies differ only on 2 or more devices.*--devices N/);
    assert.match(
      one(existing),
      /^paratrain: compare: .*used already holds files \(x\); choose another --out or pass --force/,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
