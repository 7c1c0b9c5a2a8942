import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  CHART_IDS,
  GENERATOR_MARK,
  MAX_SERIES_POINTS,
  chartsFor,
  loadReportRuns,
  writeReport,
} from '../../src/report/index.ts';
import { sanitize } from '../../src/report/chartLibrary.ts';
import { loadConfig } from '../../src/config/index.ts';
import { train } from '../../src/runtime/run/train.ts';
import { tmpDir, writeSyntheticRun, writeTinyConfig } from './helpers.ts';

interface EmbeddedData {
  runs: { label: string; series: { steps: { step: number[] }; staleness: unknown } }[];
}

function embeddedData(html: string): EmbeddedData {
  const m = /<script type="application\/json" id="report-data">([\s\S]*?)<\/script>/.exec(html);
  assert.ok(m, 'the report embeds its data');
  return JSON.parse(m[1]!) as EmbeddedData;
}

/** Self-contained: no URL at all, nothing loaded from elsewhere. */
function assertSelfContained(html: string): void {
  assert.doesNotMatch(html, /https?:\/\//i, 'no http(s) URL anywhere in the report');
  assert.doesNotMatch(html, /<link\b/i, 'no linked resources');
  assert.doesNotMatch(html, /<(script|img|iframe)\b[^>]*\bsrc=/i, 'no external scripts or images');
  assert.match(html, /Content-Security-Policy" content="default-src 'none'/);
}

test('report from synthetic runs: every chart with something to draw, Chart.js inlined, no URLs, small, downsampled', () => {
  const dir = tmpDir();
  try {
    writeSyntheticRun(join(dir, 'hybrid'), { strategy: 'hybrid', devices: 4, slow: { 1: 3 } });
    writeSyntheticRun(join(dir, 'async'), { strategy: 'async', devices: 4, epochs: 3, stepsPerEpoch: 1500 });
    const runs = loadReportRuns([join(dir, 'hybrid'), join(dir, 'async')]);
    const path = writeReport(runs);
    assert.equal(path, join(dir, 'hybrid', 'report.html'), 'default: report.html in the first run directory');
    const html = readFileSync(path, 'utf8');
    const shown = CHART_IDS.filter((id) => !['validation', 'stalls'].includes(id));
    assert.deepEqual(chartsFor(runs), shown, 'no validation split, no stalls: those charts are left out');
    for (const id of CHART_IDS)
      assert.equal(
        new RegExp(`<section class="chart[^"]*" id="chart-${id}">`).test(html),
        shown.includes(id),
        `section ${id}`,
      );
    assert.match(
      html,
      /Left out, having nothing to show: validation \(no run has a validation split\); stalls \(none reported\)\./,
    );
    assert.ok(html.includes(GENERATOR_MARK));
    assert.match(html, /Chart\.js v4/, 'the chart library is inline');
    assertSelfContained(html);
    const size = statSync(path).size;
    assert.ok(size < 800_000, `report is ${size} bytes`);
    const data = embeddedData(html);
    assert.deepEqual(
      data.runs.map((r) => r.label),
      ['hybrid ×4', 'async ×4'],
    );
    assert.equal(data.runs[0]!.series.steps.step.length, 100);
    assert.ok(data.runs[1]!.series.steps.step.length <= MAX_SERIES_POINTS, 'steps downsampled');
    assert.equal(data.runs[0]!.series.staleness, null);
    assert.ok(data.runs[1]!.series.staleness);
    assert.match(html, /<td>.*hybrid ×4<\/td><td class="num">4<\/td><td class="num">75\.00%/);
    assert.match(html, /device 1/, 'the straggler is named in the table');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('report output: regenerates its own file, refuses a foreign one without force, --out may be a directory', () => {
  const dir = tmpDir();
  try {
    writeSyntheticRun(join(dir, 'bsp'), { strategy: 'bsp' });
    const runs = loadReportRuns([join(dir, 'bsp')]);
    const first = writeReport(runs);
    assert.equal(writeReport(runs), first, 'its own report.html is overwritten');
    const foreign = join(dir, 'notes.html');
    writeFileSync(foreign, '<p>my notes</p>');
    assert.throws(() => writeReport(runs, { out: foreign }), {
      message: `${foreign} already exists and is not a paratrain report; choose another --out or pass --force to overwrite it`,
    });
    assert.equal(readFileSync(foreign, 'utf8'), '<p>my notes</p>', 'left alone');
    assert.equal(writeReport(runs, { out: foreign, force: true }), foreign);
    assert.ok(readFileSync(foreign, 'utf8').includes(GENERATOR_MARK));
    mkdirSync(join(dir, 'out'));
    assert.equal(writeReport(runs, { out: join(dir, 'out') }), join(dir, 'out', 'report.html'));
    assert.throws(
      () => writeReport(runs, { out: join(dir, 'missing', 'r.html') }),
      /cannot write the report .*r\.html: its folder does not exist/,
    );
    const html = readFileSync(first, 'utf8');
    assert.doesNotMatch(html, /id="chart-staleness"/, 'without async runs there is no staleness chart');
    assert.match(
      html,
      /Left out, having nothing to show: .*staleness \(only the parameter-server strategies, async and sync, record it\)/,
    );
    assert.ok(!existsSync(`${first}.tmp-${process.pid}`));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the inlined chart library keeps its licence notices without URLs', () => {
  const src =
    '/*!\n * Lib v1\n * https://example.org\n */\ncode();\n/*! (c) x https://a.b */more();\n//# sourceMappingURL=lib.map\n';
  const out = sanitize(src);
  assert.doesNotMatch(out, /https?:\/\//);
  assert.match(out, /example\.org/);
  assert.doesNotMatch(out, /sourceMappingURL/);
  assert.throws(
    () => sanitize('fetch("https://x.y")', 'lib.js'),
    /lib\.js contains a URL outside its licence comments/,
  );
  assert.throws(() => sanitize('s="</script>"', 'lib.js'), /cannot be inlined/);
});

test('report from a real short run (2 devices, 256 samples)', async () => {
  const dir = tmpDir();
  try {
    const config = loadConfig(writeTinyConfig(dir, { devices: 2, strategy: 'hybrid' }));
    const result = await train(config, { out: join(dir, 'run') });
    const [run] = loadReportRuns([result.runDir]);
    const s = run!.summary;
    assert.equal(s.devices, 2);
    assert.equal(s.strategy, 'hybrid');
    assert.equal(s.finished, true);
    assert.equal(s.testAccuracy, result.testAccuracy);
    assert.equal(s.perDevice.length, 2);
    assert.ok(
      s.perDevice.every((d) => d.steps === 8 && d.samples === 128 && d.computeMs > 0),
      JSON.stringify(s.perDevice),
    );
    assert.ok(s.bytes > 0, 'hybrid all-reduces gradients');
    assert.ok(s.maxRssBytes! > 0);
    assert.equal(run!.series.steps.step.length, 8);
    const html = readFileSync(writeReport([run!]), 'utf8');
    for (const id of chartsFor([run!])) assert.ok(html.includes(`id="chart-${id}"`), id);
    assert.ok(
      html.includes('id="chart-bytes"') && html.includes('id="chart-lr"') && !html.includes('id="chart-staleness"'),
    );
    assertSelfContained(html);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a directory of runs (what compare writes) stands for its runs, in the order they started', () => {
  const dir = tmpDir();
  try {
    writeSyntheticRun(join(dir, 'cmp', 'zeta'), { strategy: 'bsp', startTime: 1_700_000_000_000 });
    writeSyntheticRun(join(dir, 'cmp', 'alpha'), { strategy: 'bmuf', startTime: 1_700_000_100_000 });
    writeSyntheticRun(join(dir, 'single'), { strategy: 'async' });
    const runs = loadReportRuns([join(dir, 'cmp'), join(dir, 'single')]);
    assert.deepEqual(
      runs.map((r) => r.label),
      ['bsp ×2 (zeta)', 'bmuf ×2 (alpha)', 'async ×2 (single)'],
    );
    mkdirSync(join(dir, 'nothing', 'sub'), { recursive: true });
    assert.throws(() => loadReportRuns([join(dir, 'nothing')]), /has no metrics\.jsonl/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
