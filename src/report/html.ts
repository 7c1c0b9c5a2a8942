/**
 * The HTML report: one self-contained file (styles, data, Chart.js and the drawing script inline;
 * a Content-Security-Policy forbids every fetch), so it can be mailed, archived or opened offline.
 */
import type { RunData } from './runData.ts';
import { STALENESS_BINS, type RunSeries } from './series.ts';
import type { RunSummary } from './analyze.ts';
import { chartLibrarySource } from './chartLibrary.ts';
import { CLIENT_SCRIPT } from './clientScript.ts';
import { nonEmptyColumns, summaryRow } from './table.ts';
import { esc } from './escape.ts';
import { hyperparameterSection } from './hyperparameters.ts';
import { ERROR_RATE_CHART } from './clientErrorRates.ts';
import { resumedNote, segmentNotes } from './segmentNotes.ts';
import { PIPELINE_STYLE, pipelineSection } from './pipelineTimeline.ts';

/** Marks files this module wrote (so `report` may overwrite them without --force). */
export const GENERATOR_MARK = '<meta name="generator" content="paratrain report">';

/** Every chart section, in page order: `<section id="chart-<id>">`; a report leaves out those with nothing to draw (chartsFor). */
export const CHART_IDS = [
  'loss-step',
  'loss-time',
  'accuracy-step',
  'accuracy-time',
  'validation',
  'lr',
  'throughput',
  'device-share',
  'timeline',
  'staleness',
  'stalls',
  'bytes',
  'memory',
] as const;
export type ChartId = (typeof CHART_IDS)[number];

/** One colour per run (Tableau 10: distinct, and readable by most colour-blind people). */
export const RUN_COLORS = [
  '#4e79a7',
  '#f28e2b',
  '#59a14f',
  '#e15759',
  '#b07aa1',
  '#76b7b2',
  '#edc948',
  '#ff9da7',
  '#9c755f',
  '#bab0ac',
];

export interface ReportRun {
  label: string;
  run: RunData;
  summary: RunSummary;
  series: RunSeries;
}

export interface HtmlOptions {
  title?: string;
  /** when the report was made (shown in the header); default now */
  generated?: Date;
}

const SECTIONS: Record<ChartId, { title: string; note: string; wide?: boolean }> = {
  'loss-step': {
    title: 'Loss vs step',
    note: "Training loss of each step's batches over all devices (smoothed; dashed markers: test set).",
  },
  'loss-time': {
    title: 'Loss vs wall time',
    note: 'The same loss against seconds of training: what a strategy buys per second. A resumed run: its segments end to end, a dashed line at each resume.',
  },
  'accuracy-step': {
    title: 'Accuracy vs step',
    note: 'Training accuracy (smoothed); dashed markers: test accuracy after each evaluation.',
  },
  'accuracy-time': {
    title: 'Accuracy vs wall time',
    note: 'Accuracy against seconds of training (resumes: dashed lines).',
  },
  validation: {
    title: 'Validation',
    note: 'Evaluations of the validation split after epochs: accuracy (solid, left axis) and loss (dashed, right axis); a star marks the evaluation model-best.safetensors holds.',
  },
  lr: {
    title: 'Learning rate',
    note: 'The learning rate of each step: warmup, decay and linear scaling by the device count included.',
  },
  throughput: {
    title: 'Throughput',
    note: 'Training samples per second, all devices together; the curve breaks at a resume (dashed line).',
  },
  'device-share': {
    title: "Where each device's time went",
    note: "Compute, communication (collectives, pushes, pulls, optimizer) and idle time waiting for peers. ⚠ marks a straggler: compute time per sample ≥ 1.5× the devices' median.",
  },
  timeline: {
    title: 'Device timeline',
    note: "Each device's steps over wall time: compute, communication, idle. A straggler shows as longer compute bars while its peers sit idle.",
    wide: true,
  },
  staleness: {
    title: 'Staleness of applied gradients',
    note: 'How many updates the shared weights took between a device fetching them and its gradient being applied (recorded by the parameter-server strategies: async, and sync, where it is 0).',
  },
  stalls: {
    title: 'Stalls',
    note: 'Waits in a collective longer than train.stallWarningSeconds: when, and how long the device had waited (hover: the call and the devices it waited for).',
  },
  bytes: {
    title: 'Bytes communicated',
    note: 'Bytes the devices moved over the whole run: collectives (all-reduce, broadcast, …) and parameter-server pulls and pushes; hover for each device.',
  },
  memory: { title: 'Peak memory', note: "Peak resident memory of the training process (all devices' threads)." },
};

/** Renders the report. `runs` in the order they should be listed (and coloured). */
export function renderHtml(runs: readonly ReportRun[], opts: HtmlOptions = {}): string {
  const title =
    opts.title ?? (runs.length === 1 ? `paratrain report: ${runs[0]!.label}` : `paratrain report: ${runs.length} runs`);
  const generated = opts.generated ?? new Date();
  const data = {
    stalenessBins: STALENESS_BINS,
    runs: runs.map((r, i) => ({
      label: r.label,
      color: RUN_COLORS[i % RUN_COLORS.length],
      dir: r.run.dir,
      summary: {
        ...r.summary,
        perDevice: r.summary.perDevice.map((d) => ({
          rank: d.rank,
          computeMs: d.computeMs,
          commMs: d.commMs,
          idleMs: d.idleMs,
          bytes: d.bytes,
          straggler: d.straggler,
        })),
      },
      series: r.series,
    })),
  };
  const shown = chartsFor(runs);
  const sections =
    shown
      .map((id) => {
        const s = SECTIONS[id];
        return `<section class="chart${s.wide ? ' wide' : ''}" id="chart-${id}">
<h2>${esc(s.title)}</h2>
<p class="note">${esc(s.note)}</p>
<div class="box"></div>
</section>`;
      })
      .join('\n') +
    errorRateSection(runs) +
    pipelineSection(
      runs.map((r, i) => ({
        label: r.label,
        color: RUN_COLORS[i % RUN_COLORS.length]!,
        timelines: r.run.pipeline ?? [],
      })),
    );
  const left = CHART_IDS.filter((id) => !shown.includes(id)).map(
    (id) => LEFT_OUT[id] ?? SECTIONS[id].title.toLowerCase(),
  );
  const leftOut = left.length ? ` Left out, having nothing to show: ${left.map(esc).join('; ')}.` : '';
  const hyper = hyperparameterSection(
    runs.map((r, i) => ({ label: r.label, color: RUN_COLORS[i % RUN_COLORS.length]!, settings: r.run.settings })),
  );

  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
${GENERATOR_MARK}
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)}</title>
<style>${STYLE}</style>
</head>
<body>
<header>
<h1>${esc(title)}</h1>
<p class="meta">Written ${esc(generated.toISOString().replace('T', ' ').slice(0, 19))} UTC by <code>paratrain report</code>. ${runs.length} run${runs.length === 1 ? '' : 's'}.${leftOut}${resumedNote(runs)}</p>
</header>
${summaryTable(runs)}
${runDetails(runs)}
${hyper}
<div class="controls"><label for="smoothing">Smoothing of the loss and accuracy curves</label>
<input type="range" id="smoothing" min="0" max="0.99" step="0.01" value="0.6"> <span id="smoothing-value">0.60</span></div>
<main>
${sections}
</main>
<script type="application/json" id="report-data">${jsonForScript(data)}</script>
<script>${chartLibrarySource()}</script>
<script>${CLIENT_SCRIPT}</script>
</body>
</html>
`;
}

/** Why a chart is left out, when no run has anything for it. */
const LEFT_OUT: Partial<Record<ChartId, string>> = {
  validation: 'validation (no run has a validation split)',
  lr: 'learning rate (not recorded)',
  staleness: 'staleness (only the parameter-server strategies, async and sync, record it)',
  stalls: 'stalls (none reported)',
  bytes: 'bytes communicated (no run communicated: one device)',
  memory: 'peak memory (not recorded)',
};

/** The charts that have something to draw for these runs, in page order. */
export function chartsFor(runs: readonly ReportRun[]): ChartId[] {
  const has: Partial<Record<ChartId, boolean>> = {
    validation: runs.some((r) => r.series.validation.length > 0),
    lr: runs.some((r) => r.series.lr.step.length > 0),
    staleness: runs.some((r) => r.series.staleness !== null),
    stalls: runs.some((r) => r.series.stalls.length > 0),
    bytes: runs.some((r) => r.summary.bytes > 0),
    memory: runs.some((r) => r.summary.maxRssBytes !== null),
  };
  return CHART_IDS.filter((id) => has[id] ?? true);
}

/** The error-rate chart's section, only when some run is a speech model's with error rates. */
function errorRateSection(runs: readonly ReportRun[]): string {
  if (!runs.some((r) => r.series.evals.some((e) => Number.isFinite(e.cer)))) return '';
  return `
<section class="chart" id="chart-${ERROR_RATE_CHART}">
<h2>Error rates (speech)</h2>
<p class="note">Character and word error rates of greedy decoding at each evaluation: test set (CER solid, WER dashed), validation set (dotted).</p>
<div class="box"></div>
</section>`;
}

function summaryTable(runs: readonly ReportRun[]): string {
  const columns = nonEmptyColumns(
    [
      'run',
      'devices',
      'test accuracy',
      'val accuracy',
      'best',
      'early stop',
      'wall time',
      'elapsed',
      'samples',
      'samples/s',
      'mean idle',
      'mean staleness',
      'stragglers',
      'bytes sent',
      'peak memory',
      'bad steps',
      'stalls',
    ],
    runs,
  );
  const head = columns.map((c) => `<th>${esc(c)}</th>`).join('');
  const body = runs
    .map((r, i) => {
      const row = summaryRow(r.label, r.summary);
      return `<tr>${columns
        .map((c, j) =>
          j === 0
            ? `<td><span class="swatch" style="background:${RUN_COLORS[i % RUN_COLORS.length]}"></span>${esc(row[c]!)}</td>`
            : `<td class="num">${esc(row[c]!)}</td>`,
        )
        .join('')}</tr>`;
    })
    .join('\n');
  return `<div class="wide-table"><table class="summary"><thead><tr>${head}</tr></thead><tbody>\n${body}\n</tbody></table></div>`;
}

function runDetails(runs: readonly ReportRun[]): string {
  const items = runs
    .map((r) => {
      const s = r.run.start;
      const n = (x: number) => (Number.isFinite(x) ? x.toLocaleString('en-US') : '?');
      return (
        `<li><b>${esc(r.label)}</b>: <code>${esc(r.run.dir)}</code> — ${esc(s.strategy)}, ${n(s.devices)} device(s), backend ${esc(s.backend)}, ` +
        `${n(s.parameters)} parameters, global batch ${n(s.globalBatch)}, ${n(s.epochs)} epoch(s) of ${n(s.stepsPerEpoch)} steps; data: ${esc(s.dataSource)}` +
        `${r.run.earlyStopped ? ` — stopped early after epoch ${n(r.run.earlyStopped.epoch + 1)} (${esc(r.run.earlyStopped.metric)} no longer improved)` : ''}` +
        `${r.run.end ? '' : ' — <b>unfinished</b> (no end event)'}` +
        segmentNotes(r.run, r.summary) +
        `${(r.run.settings?.commands ?? []).map((c) => `<br><code class="command">${esc(c)}</code>`).join('')}</li>`
      );
    })
    .join('\n');
  return `<details class="runs"><summary>Runs</summary><ul>\n${items}\n</ul></details>`;
}

/** JSON safe inside `<script>`: no `</script`, no `<!--`, and no literal `://`. */
function jsonForScript(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/:\/\//g, ':\\/\\/')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}

const STYLE = `
*{box-sizing:border-box}
body{margin:0;padding:20px 28px 40px;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#222;background:#f6f7f9}
header h1{font-size:22px;margin:0 0 4px}
.meta{color:#666;margin:0 0 14px}
table.summary{border-collapse:collapse;background:#fff;box-shadow:0 1px 2px rgba(0,0,0,.08);margin-bottom:12px;font-variant-numeric:tabular-nums}
table.summary th,table.summary td{padding:6px 12px;border-bottom:1px solid #e5e7eb;text-align:left;white-space:nowrap}
table.summary th{background:#eef0f3;font-weight:600;white-space:normal;vertical-align:bottom}
table.summary td.num{text-align:right}
.swatch{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:8px;vertical-align:-1px}
details.runs{margin:0 0 12px;color:#444}
details.runs ul{margin:6px 0;padding-left:20px}
details.runs ol.segments{margin:2px 0 4px;padding-left:22px}
.controls{margin:6px 0 14px;color:#444}
.controls input{vertical-align:middle;width:180px}
main{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:16px}
section.chart{background:#fff;border-radius:6px;box-shadow:0 1px 2px rgba(0,0,0,.08);padding:12px 16px 14px;min-width:0}
section.chart.wide{grid-column:1/-1}
section.chart h2{font-size:16px;margin:0 0 2px}
section.chart .note{color:#666;margin:0 0 8px;font-size:12.5px}
section.chart .box{position:relative;height:300px}
section#chart-timeline .box,section#chart-device-share .box{height:auto}
section#chart-device-share .box{position:relative}
.timeline h3{font-size:13px;margin:6px 0 0}
.timeline-box{position:relative}
.empty{color:#888;font-style:italic}
.wide-table{overflow-x:auto;max-width:100%}
section.hyperparameters{margin:0 0 14px}
section.hyperparameters h2{font-size:16px;margin:0 0 4px}
section.hyperparameters .note{color:#555;margin:0 0 6px}
table.hyper{border-collapse:collapse;background:#fff;box-shadow:0 1px 2px rgba(0,0,0,.08);margin:0 0 8px;font-variant-numeric:tabular-nums}
table.hyper th,table.hyper td{padding:4px 12px;border-bottom:1px solid #e5e7eb;text-align:left;white-space:nowrap}
table.hyper th{background:#eef0f3;font-weight:600}
table.hyper tr.differs td{background:#fff8e1}
details.runs code.command{color:#555;white-space:pre-wrap;word-break:break-all}
code{font-size:12.5px}
${PIPELINE_STYLE}`;
