/**
 * Opens a generated report in headless Chromium: no console errors, no network requests, every chart
 * drawn, and a screenshot saved. Skipped (with the reason) where Debian's chromium is not installed;
 * .ci/run installs it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CHART_IDS, chartsFor, loadReportRuns, writeReport } from '../../src/report/index.ts';
import { loadConfig } from '../../src/config/index.ts';
import { train } from '../../src/runtime/run/train.ts';
import { chromiumMissing, inspectReport, type PageCheck } from './browser.ts';
import { tmpDir, writeSyntheticRun, writeTinyConfig } from './helpers.ts';
import { resumedRunEvents } from './resumedRun.ts';

const missing = chromiumMissing();

/** No errors, nothing fetched, and every chart section of `shown` drawn with data (one timeline per run). */
function assertEveryChartDrawn(page: PageCheck, shown: readonly string[]): void {
  assert.deepEqual(page.consoleErrors, [], 'no console errors');
  assert.deepEqual(page.requests, [], 'nothing fetched: the report is self-contained');
  assert.deepEqual(
    page.sections,
    shown.map((id) => `chart-${id}`),
  );
  for (const id of shown) {
    const canvases = page.canvases.filter((c) => c.section === `chart-${id}`);
    assert.ok(canvases.length > 0, `${id}: has a chart`);
    for (const c of canvases) {
      assert.ok(c.width > 100 && c.height > 50, `${id}: canvas ${c.width}×${c.height}`);
      assert.ok(c.points > 0, `${id}: the chart has data`);
      assert.ok(c.inked > 1000 && c.colours > 3, `${id}: drawn (${c.inked} inked pixels, ${c.colours} colours)`);
    }
  }
  assert.equal(page.canvases.filter((c) => c.section === 'chart-timeline').length, 2, 'one timeline per run');
  assert.deepEqual([...new Set(page.charts)].sort(), [...shown].sort(), 'the page reports every chart drawn');
}

test('a report opens in headless Chromium with every chart that has data drawn and no errors', {
  skip: missing ?? false,
  timeout: 90_000,
}, async (t) => {
  const dir = tmpDir('paratrain-browser-');
  // a real async run with a straggler, overlaid with a synthetic synchronous run
  const config = loadConfig(writeTinyConfig(dir, { devices: 2, strategy: 'async' }));
  const result = await train(config, { out: join(dir, 'async'), slowDevices: new Map([[1, 3]]) });
  writeSyntheticRun(join(dir, 'hybrid'), {
    strategy: 'hybrid',
    devices: 2,
    slow: { 1: 2 },
    epochs: 4,
    validation: true,
    stalls: true,
  });
  const runs = loadReportRuns([result.runDir, join(dir, 'hybrid')]);
  const shown = chartsFor(runs);
  assert.deepEqual(shown, [...CHART_IDS], 'this pair has something for every chart');
  const report = writeReport(runs);
  const screenshot = join(dir, 'report.png');

  const page = await inspectReport(report, screenshot);
  t.diagnostic(`screenshot: ${screenshot}`);

  assertEveryChartDrawn(page, shown);
  const png = readFileSync(screenshot);
  assert.equal(png.subarray(1, 4).toString('latin1'), 'PNG');
  assert.ok(statSync(screenshot).size > 50_000, 'a screenshot with something in it');
  // the temp dir is kept (it holds the screenshot) unless the test runs in CI
  if (process.env.CI) rmSync(dir, { recursive: true, force: true });
});

test('a resumed run beside one that was not: the report opens with every chart drawn and no errors', {
  skip: missing ?? false,
  timeout: 60_000,
}, async (t) => {
  const dir = tmpDir('paratrain-browser-');
  try {
    const t0 = 1_700_000_000_000;
    const events = resumedRunEvents([
      { startTime: t0, epochs: 2, fromStep: 0, killedAfter: 13 },
      { startTime: t0 + 3_600_000, epochs: 4, fromStep: 10 },
    ]);
    mkdirSync(join(dir, 'resumed'));
    writeFileSync(join(dir, 'resumed', 'metrics.jsonl'), `${events.map((e) => JSON.stringify(e)).join('\n')}\n`);
    writeSyntheticRun(join(dir, 'straight'), { strategy: 'bsp', devices: 2, epochs: 2, validation: true });
    const runs = loadReportRuns([join(dir, 'resumed'), join(dir, 'straight')]);
    const page = await inspectReport(writeReport(runs), join(dir, 'report.png'));
    t.diagnostic(`screenshot: ${join(dir, 'report.png')}`);
    assertEveryChartDrawn(page, chartsFor(runs));
  } finally {
    if (process.env.CI) rmSync(dir, { recursive: true, force: true });
  }
});
