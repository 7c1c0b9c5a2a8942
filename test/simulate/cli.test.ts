/**
 * `paratrain simulate` as a user meets it: flags checked before any work with one clear line,
 * a simulation from a run's metrics (no timing here: --from a synthetic run) with its table, HTML
 * report and JSON, and the strategies' options checked by the config schema.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFileSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runCli, stderrLines, tmpDir, writeSyntheticRun } from '../cli/helpers.ts';
import { runSimulation } from '../../src/simulate/index.ts';
import { parseStrategyChoices } from '../../src/simulate/choices.ts';
import { loadConfig } from '../../src/config/index.ts';

const MNIST = new URL('../../examples/mnist-small.yaml', import.meta.url).pathname;

test('bad flags: one line naming the flag and an example, exit 1', async () => {
  const r = await runCli(['simulate', MNIST, '--link', '10gbit', '--devices', '2']);
  assert.equal(r.code, 1);
  assert.deepEqual(stderrLines(r), [
    "paratrain: --link: '10gbit' is not BANDWIDTH:LATENCY; write e.g. 10gbit:50us or 100mbit:2ms",
  ]);
});

test('strategy options go through the config schema', () => {
  const config = loadConfig(MNIST);
  const [bmuf, trick] = parseStrategyChoices('bmuf:period=8:blockMomentum=0.5,trick', config);
  assert.deepEqual(bmuf!.spec, { type: 'bmuf', period: 8, blockMomentum: 0.5, blockLr: 1, nesterov: false });
  assert.equal(trick!.kind, 'trick');
  assert.equal(trick!.spec.type, 'hybrid');
  assert.throws(() => parseStrategyChoices('bmuf:period=0', config), /--strategies: 'bmuf:period=0': .*period/);
  assert.throws(
    () => parseStrategyChoices('gossip', config),
    /--strategies: unknown strategy 'gossip'; expected one of sync, async, hybrid, bsp, easgd, bmuf, diloco, trick/,
  );
  assert.throws(() => parseStrategyChoices('async:fetchEvery', config), /option 'fetchEvery' is not KEY=VALUE/);
});

test('from a run: table, HTML report and JSON; infeasible rows say why', async () => {
  const dir = tmpDir('paratrain-simulate-');
  const run = join(dir, 'run');
  writeSyntheticRun(run, { strategy: 'hybrid', devices: 2, epochs: 1, stepsPerEpoch: 30 });
  const report = join(dir, 'sim.html'),
    json = join(dir, 'sim.json');
  const r = await runSimulation(MNIST, {
    from: run,
    devices: '1,2,8,256',
    link: '10gbit:50us,100mbit:2ms',
    stragglers: 'none,lognormal:0.3',
    strategies: 'hybrid,async,trick,bmuf:period=4',
    steps: 50,
    report,
    json,
    svg: join(dir, 'svg'),
  });
  assert.equal(r.rows.length, 2 * 2 * 4 * 4);
  assert.match(r.text, /compute from the run .* median 10\.0 ms per step at 32 samples/);
  assert.match(r.text, /link 100mbit:2ms, stragglers lognormal:0\.3/);
  // mnist-small's dense layer has 128 units: the trick cannot split it over 256 devices
  const trick256 = r.rows.find((x) => x.strategy === 'trick' && x.devices === 256)!;
  assert.equal(trick256.feasible, false);
  assert.match(trick256.reason!, /splits its 128 units over 256 devices/);
  // one device: the same for every strategy, 10 ms of compute per 32 samples plus its optimizer step
  const one = r.rows.filter((x) => x.devices === 1 && x.stragglers.name === 'none');
  assert.ok(one.every((x) => Math.abs(x.samplesPerSecond - one[0]!.samplesPerSecond) < 1e-6));
  assert.ok(one[0]!.samplesPerSecond < 3200 && one[0]!.samplesPerSecond > 2000);
  // async records staleness; a slower link is never faster
  assert.ok(
    r.rows.filter((x) => x.strategy === 'async' && x.devices > 1).every((x) => x.staleness && x.staleness.mean > 0),
  );
  for (const x of r.rows.filter((q) => q.link.name === '100mbit:2ms' && q.feasible)) {
    const fast = r.rows.find(
      (q) =>
        q.link.name === '10gbit:50us' &&
        q.strategy === x.strategy &&
        q.devices === x.devices &&
        q.stragglers === x.stragglers,
    )!;
    assert.ok(fast.stepSeconds <= x.stepSeconds * 1.0001, `${x.strategy} on ${x.devices}: faster on the slower link`);
  }
  const html = readFileSync(report, 'utf8');
  assert.match(html, /<meta name="generator" content="paratrain simulate">/);
  assert.match(html, /id="chart-trick-vs-hybrid-by-link-none"/);
  assert.match(html, /id="chart-async-vs-hybrid-by-stragglers-10gbit-50us"/);
  assert.ok(
    !/https?:\/\//.test(html.replace(/<script>[\s\S]*?<\/script>/g, '')),
    'no address outside the inlined library',
  );
  // --svg: every chart as a standalone file, its title and one line per series
  assert.equal(r.svgPaths!.length, readdirSync(join(dir, 'svg')).length);
  const svg = readFileSync(join(dir, 'svg', 'trick-vs-hybrid-by-link-none.svg'), 'utf8');
  assert.match(
    svg,
    /^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"[^>]*>\n<title>trick \/ hybrid by link bandwidth \(stragglers none\)<\/title>/,
  );
  assert.equal(
    (svg.match(/<polyline /g) ?? []).length,
    2,
    'a line per device count the trick can split over (2, 8; not 256)',
  );
  assert.ok(svg.trimEnd().endsWith('</svg>'));
  const data = JSON.parse(readFileSync(json, 'utf8')) as { rows: { strategy: string; link: string }[] };
  assert.equal(data.rows.length, r.rows.length);
  assert.equal(data.rows[0]!.link, '10gbit:50us');
  // a file that is not a simulate report is not overwritten without --force
  const other = join(dir, 'other.html');
  writeFileSync(other, '<html>mine</html>');
  await assert.rejects(
    runSimulation(MNIST, { from: run, devices: '2', strategies: 'hybrid', report: other }),
    /--report: .* is not a paratrain simulate report/,
  );
  assert.ok(existsSync(other));
});

test("from a multi-process run: the remote server's own push time (its serverWork event) is the server's update", async () => {
  const run = join(tmpDir('paratrain-simulate-'), 'run');
  writeSyntheticRun(run, { strategy: 'async', devices: 2, epochs: 1, stepsPerEpoch: 30 });
  appendFileSync(
    join(run, 'metrics.jsonl'),
    `${JSON.stringify({ type: 'serverWork', time: Date.now(), pushes: 60, medianPushSeconds: 0.0125 })}\n`,
  );
  const r = await runSimulation(MNIST, { from: run, devices: '2', strategies: 'async', steps: 20 });
  assert.match(r.text, /server update from the run: 12\.50 ms per push \(its median\)/);
});
