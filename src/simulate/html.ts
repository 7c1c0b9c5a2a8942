/**
 * The simulation's HTML report: one self-contained file (Chart.js and the data inline, a
 * Content-Security-Policy that forbids every fetch), like `paratrain report`'s, with the scaling
 * curves and crossover charts of charts.ts and the tables of table.ts.
 */
import { readFileSync, renameSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { chartLibrarySource } from '../report/chartLibrary.ts';
import type { SimRow } from './simulate.ts';
import { buildCharts, type ChartSpec } from './charts.ts';
import { crossovers, scenarios, simCells, SIM_COLUMNS } from './table.ts';

/** Marks files this module wrote (so --report may overwrite them without --force). */
export const SIMULATE_MARK = '<meta name="generator" content="paratrain simulate">';

const esc = (s: string) =>
  s
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/:\/\//g, ':&#47;&#47;');
const json = (v: unknown) =>
  JSON.stringify(v)
    .replace(/</g, '\\u003c')
    .replace(/:\/\//g, ':\\/\\/')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');

/** Draws every chart of #sim-data with Chart.js; sets window.paratrainSimulation = { charts, ready } when done. */
const CLIENT = String.raw`
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('sim-data').textContent);
  Chart.defaults.animation = false;
  Chart.defaults.maintainAspectRatio = false;
  Chart.defaults.font.size = 12;
  var drawn = [];
  /** a log y axis: labels at 1, 2, 5 × 10^k only, or the axis drowns in them */
  function tick(v, spec) {
    if (spec.log) { var m = v / Math.pow(10, Math.floor(Math.log10(v) + 1e-9)); if ([1, 2, 5].indexOf(Math.round(m * 1000) / 1000) < 0) return ''; }
    return fmt(v, spec);
  }
  function xs(c) {
    var seen = {};
    c.series.forEach(function (s) { s.points.forEach(function (p) { seen[p[0]] = true; }); });
    return Object.keys(seen).map(Number).sort(function (a, b) { return a - b; });
  }
  function fmt(v, spec) {
    if (spec.percent) return Math.round(100 * v) + '%';
    if (spec.label === 'devices') return String(v);
    var a = Math.abs(v);
    if (a >= 1e9) return +(v / 1e9).toPrecision(3) + 'G';
    if (a >= 1e6) return +(v / 1e6).toPrecision(3) + 'M';
    if (a >= 1e3) return +(v / 1e3).toPrecision(3) + 'k';
    return +v.toPrecision(3) + '';
  }
  data.charts.forEach(function (c) {
    var box = document.querySelector('#chart-' + c.id + ' .box');
    var canvas = document.createElement('canvas');
    box.appendChild(canvas);
    new Chart(canvas, {
      type: 'line',
      data: { datasets: c.series.map(function (s) {
        return { label: s.label, data: s.points.map(function (p) { return { x: p[0], y: p[1] }; }), borderColor: s.color, backgroundColor: s.color,
          borderDash: s.dashed ? [6, 4] : [], pointRadius: 3, borderWidth: 2, tension: 0 };
      }) },
      options: {
        parsing: false,
        scales: {
          x: { type: c.x.log ? 'logarithmic' : 'linear', title: { display: true, text: c.x.label }, ticks: { autoSkip: false, callback: function (v) { return fmt(v, c.x); } },
            // ticks at the simulated values themselves (device counts, link bandwidths, σ)
            afterBuildTicks: function (scale) { scale.ticks = xs(c).map(function (v) { return { value: v }; }); } },
          y: { type: c.y.log ? 'logarithmic' : 'linear', title: { display: true, text: c.y.label }, ticks: { callback: function (v) { return tick(v, c.y); } } }
        },
        plugins: { tooltip: { callbacks: { label: function (ctx) { return ctx.dataset.label + ': ' + fmt(ctx.parsed.y, c.y) + ' at ' + fmt(ctx.parsed.x, c.x); } } } }
      }
    });
    drawn.push(c.id);
  });
  window.paratrainSimulation = { charts: drawn, ready: true };
})();
`;

/** The report's title and the lines that describe the simulation. */
export interface SimulationReportOptions {
  title: string;
  /** lines describing the setup (config, compute source, network) */
  notes: string[];
  /** samples/s of one device, the linear-scaling line */
  oneDevice: number;
  generated?: Date;
}

function tables(rows: readonly SimRow[]): string {
  return scenarios(rows)
    .map((g) => {
      const head = SIM_COLUMNS.map((c) => `<th>${esc(c)}</th>`).join('');
      const body = g.rows
        .map((r) => {
          const cells = simCells(r);
          return `<tr>${SIM_COLUMNS.map((c) => `<td${c === 'strategy' ? '' : ' class="num"'}>${esc(cells[c])}</td>`).join('')}</tr>`;
        })
        .join('\n');
      return `<details class="scenario"><summary>${esc(g.key)}</summary><table class="summary"><thead><tr>${head}</tr></thead><tbody>\n${body}\n</tbody></table></details>`;
    })
    .join('\n');
}

function section(c: ChartSpec): string {
  return `<section class="chart" id="chart-${esc(c.id)}"><h2>${esc(c.title)}</h2><p class="note">${esc(c.note)}</p><div class="box"></div></section>`;
}

/** The report's HTML. */
export function renderSimulationHtml(rows: readonly SimRow[], o: SimulationReportOptions): string {
  const charts = buildCharts(rows, o.oneDevice);
  const cross = crossovers(rows);
  const generated = (o.generated ?? new Date()).toISOString().replace('T', ' ').slice(0, 19);
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
${SIMULATE_MARK}
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(o.title)}</title>
<style>${STYLE}</style>
</head>
<body>
<header><h1>${esc(o.title)}</h1>
<p class="meta">Written ${esc(generated)} UTC by <code>paratrain simulate</code>: predictions of a model of paratrain's strategies and transports (docs/simulator.md), not measurements.</p>
<ul class="notes">${o.notes.map((n) => `<li>${esc(n)}</li>`).join('')}</ul>
<p><b>Where a strategy beats hybrid:</b> ${cross.length ? `</p><ul class="notes">${cross.map((l) => `<li>${esc(l)}</li>`).join('')}</ul>` : 'nowhere in this simulation.</p>'}
</header>
${tables(rows)}
<main>
${charts.map(section).join('\n')}
</main>
<script type="application/json" id="sim-data">${json({ charts })}</script>
<script>${chartLibrarySource()}</script>
<script>${CLIENT}</script>
</body>
</html>
`;
}

/**
 * Writes the report to `out` and returns it. An existing file is replaced only when this command
 * wrote it or `force` is given; the file is written beside it and renamed over it.
 */
export function writeSimulationReport(
  out: string,
  rows: readonly SimRow[],
  o: SimulationReportOptions,
  force = false,
): string {
  let existing = false;
  try {
    existing = statSync(out).isFile();
  } catch {
    /* none */
  }
  if (existing && !force && !readFileSync(out, 'utf8').slice(0, 1000).includes(SIMULATE_MARK)) {
    throw new Error(
      `--report: ${out} already exists and is not a paratrain simulate report; choose another file or pass --force`,
    );
  }
  const html = renderSimulationHtml(rows, o);
  const tmp = `${out}.tmp-${process.pid}`;
  try {
    writeFileSync(tmp, html);
    renameSync(tmp, out);
  } catch (e) {
    try {
      unlinkSync(tmp);
    } catch {
      /* not written */
    }
    throw new Error(
      `--report: cannot write ${out}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'its folder does not exist' : (e as Error).message}`,
    );
  }
  return out;
}

const STYLE = `
*{box-sizing:border-box}
body{margin:0;padding:20px 28px 40px;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#222;background:#f6f7f9}
header h1{font-size:22px;margin:0 0 4px}
.meta{color:#666;margin:0 0 8px}
ul.notes{margin:4px 0 10px;padding-left:20px;color:#444}
details.scenario{margin:0 0 10px}
table.summary{border-collapse:collapse;background:#fff;box-shadow:0 1px 2px rgba(0,0,0,.08);margin:6px 0 12px;font-variant-numeric:tabular-nums}
table.summary th,table.summary td{padding:4px 10px;border-bottom:1px solid #e5e7eb;text-align:left;white-space:nowrap}
table.summary th{background:#eef0f3;font-weight:600}
table.summary td.num{text-align:right}
main{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:16px}
section.chart{background:#fff;border-radius:6px;box-shadow:0 1px 2px rgba(0,0,0,.08);padding:12px 16px 14px;min-width:0}
section.chart h2{font-size:16px;margin:0 0 2px}
section.chart .note{color:#666;margin:0 0 8px;font-size:12.5px}
section.chart .box{position:relative;height:320px}
code{font-size:12.5px}
`;
