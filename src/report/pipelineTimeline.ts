/**
 * The pipeline timeline of a pipelined run: a Gantt chart of one sampled step as it executed, one
 * row per stage of pipeline 0, a box per forward F_k and backward B_k, a strip under the boxes where
 * a stage waited on a message, and the row's background where it did nothing; beside it the
 * measured bubble and the schedule's ideal (p − 1)/(m + p − 1). Drawn here as inline SVG (no
 * script, and no namespace: the report holds no address), from the 'pipelineTimeline' events the stages record (parallel/pipeline/timeline.ts).
 */
import type { MetricEvent } from '../runtime/events/metrics.ts';
import { idealBubble, PIPELINE_SCHEDULES } from '../parallel/pipeline/schedule.ts';
import type { StageTimeline, TimelineOp } from '../parallel/pipeline/timeline.ts';
import { esc } from './escape.ts';

const OP_KINDS = new Set(['recvActivation', 'forward', 'sendActivation', 'recvGradient', 'backward', 'sendGradient']);
const isNum = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

/**
 * A 'pipelineTimeline' event as a StageTimeline; null when it is malformed (a chart of one sampled
 * step is not worth refusing the whole report for: that step is left out).
 */
export function parseStageTimeline(e: MetricEvent): StageTimeline | null {
  const { step, stage, stages, pipeline, schedule, microBatches, origin, ops } = e;
  if (![step, stage, stages, microBatches, origin].every(isNum) || !Array.isArray(ops)) return null;
  if (typeof schedule !== 'string' || !(PIPELINE_SCHEDULES as readonly string[]).includes(schedule)) return null;
  const parsed: TimelineOp[] = [];
  for (const op of ops as Record<string, unknown>[]) {
    if (!op || !OP_KINDS.has(op.kind as string) || ![op.micro, op.start, op.end].every(isNum)) return null;
    parsed.push({
      kind: op.kind as TimelineOp['kind'],
      micro: op.micro as number,
      start: op.start as number,
      end: op.end as number,
    });
  }
  return {
    step: step as number,
    stage: stage as number,
    stages: stages as number,
    pipeline: isNum(pipeline) ? pipeline : 0,
    schedule: schedule as StageTimeline['schedule'],
    microBatches: microBatches as number,
    origin: origin as number,
    ops: parsed,
  };
}

const isCompute = (op: TimelineOp) => op.kind === 'forward' || op.kind === 'backward';

/** The sampled steps where every stage of pipeline 0 reported, oldest first: per step, its stages in order. */
export function completeSteps(timelines: readonly StageTimeline[]): StageTimeline[][] {
  const byStep = new Map<number, StageTimeline[]>();
  for (const t of timelines) {
    if (t.pipeline !== 0) continue;
    const list = byStep.get(t.step) ?? [];
    // a step redone after a resume: its last recording
    byStep.set(t.step, [...list.filter((x) => x.stage !== t.stage), t]);
  }
  return [...byStep.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([, list]) => list.sort((a, b) => a.stage - b.stage))
    .filter((list) => list.length > 0 && list.length === list[0]!.stages && list.every((t, s) => t.stage === s));
}

/** The step's span on the common clock (unix ms): the first op's start to the last op's end over every stage. */
function span(step: readonly StageTimeline[]): { from: number; to: number } {
  let from = Infinity,
    to = -Infinity;
  for (const t of step)
    for (const op of t.ops) {
      from = Math.min(from, t.origin + op.start);
      to = Math.max(to, t.origin + op.end);
    }
  return { from, to };
}

/** 1 − Σ forward and backward time / (p × the step's span): the share of the stages' time spent not computing. */
export function measuredBubble(step: readonly StageTimeline[]): number {
  const { from, to } = span(step);
  let busy = 0;
  for (const t of step) for (const op of t.ops) if (isCompute(op)) busy += op.end - op.start;
  return to > from ? 1 - busy / (step.length * (to - from)) : Number.NaN;
}

const COLORS = { forward: '#4e79a7', backward: '#f28e2b', wait: '#8d949c', idle: '#eef0f3' };
const W = 960,
  LEFT = 64,
  RIGHT = 12,
  TOP = 6,
  ROW = 26,
  GAP = 8,
  AXIS = 26;
const num = (x: number) => (Math.round(x * 10) / 10).toString();
const ms = (x: number) => `${x.toFixed(x < 10 ? 2 : 1)} ms`;
const WAITS: Record<string, string> = {
  recvActivation: 'waits for activation',
  recvGradient: 'waits for gradient',
  sendActivation: 'sends activation',
  sendGradient: 'sends gradient',
};

/** Tick spacing of 1, 2 or 5 × 10^k giving at most `most` ticks over `range`. */
function tickStep(range: number, most = 8): number {
  const raw = range / most,
    pow = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((k) => k * pow).find((s) => s >= raw) ?? 10 * pow;
}

/**
 * The SVG Gantt chart of one step's stages (in stage order): row s is stage s; each box has
 * `data-stage`, `data-kind` and `data-micro`, and a title with its times.
 */
export function timelineSvg(step: readonly StageTimeline[]): string {
  const { from, to } = span(step);
  const range = Math.max(to - from, 1e-3),
    plot = W - LEFT - RIGHT;
  const x = (t: number) => LEFT + ((t - from) / range) * plot;
  const height = TOP + step.length * (ROW + GAP) + AXIS;
  const parts: string[] = [];
  for (const [s, t] of step.entries()) {
    const y = TOP + s * (ROW + GAP);
    parts.push(
      `<text x="${LEFT - 8}" y="${num(y + ROW / 2 + 4)}" text-anchor="end" font-size="12" fill="#333">stage ${t.stage}</text>`,
      `<rect x="${LEFT}" y="${y}" width="${num(plot)}" height="${ROW}" fill="${COLORS.idle}"/>`,
    );
    for (const op of t.ops) {
      const x0 = x(t.origin + op.start),
        w = Math.max(x(t.origin + op.end) - x0, 0.5);
      const when = `${ms(t.origin + op.start - from)} – ${ms(t.origin + op.end - from)}`;
      if (isCompute(op)) {
        const label = `${op.kind === 'forward' ? 'F' : 'B'}${op.micro}`;
        parts.push(
          `<g data-stage="${t.stage}" data-kind="${op.kind}" data-micro="${op.micro}"><title>stage ${t.stage}: ${op.kind} of micro-batch ${op.micro}, ${when}</title>` +
            `<rect x="${num(x0)}" y="${y}" width="${num(w)}" height="${ROW}" fill="${COLORS[op.kind as 'forward' | 'backward']}" stroke="#fff" stroke-width="0.5"/>` +
            (w >= 8 * label.length
              ? `<text x="${num(x0 + w / 2)}" y="${num(y + ROW / 2 + 4)}" text-anchor="middle" font-size="11" fill="#fff">${label}</text>`
              : '') +
            '</g>',
        );
      } else if (op.end > op.start)
        parts.push(
          `<rect data-stage="${t.stage}" data-kind="${op.kind}" data-micro="${op.micro}" x="${num(x0)}" y="${y + ROW - 5}" width="${num(w)}" height="5" fill="${COLORS.wait}"><title>stage ${t.stage}: ${WAITS[op.kind]} ${op.micro}, ${when}</title></rect>`,
        );
    }
  }
  const axisY = TOP + step.length * (ROW + GAP);
  const every = tickStep(range);
  parts.push(`<line x1="${LEFT}" y1="${axisY}" x2="${LEFT + plot}" y2="${axisY}" stroke="#999"/>`);
  for (let v = 0; v <= range + 1e-9; v += every)
    parts.push(
      `<line x1="${num(x(from + v))}" y1="${axisY}" x2="${num(x(from + v))}" y2="${axisY + 4}" stroke="#999"/>`,
      `<text x="${num(x(from + v))}" y="${axisY + 16}" text-anchor="middle" font-size="11" fill="#555">${num(v)}</text>`,
    );
  parts.push(`<text x="${LEFT + plot}" y="${axisY + 16}" text-anchor="end" font-size="11" fill="#555">ms</text>`);
  return `<svg class="pipeline-timeline" viewBox="0 0 ${W} ${height}" width="100%" role="img" aria-label="pipeline timeline of step ${step[0]?.step ?? '?'}">${parts.join('')}</svg>`;
}

const pct = (x: number) => (Number.isFinite(x) ? `${(100 * x).toFixed(1)}%` : '?');

/** One run's chart: its last complete sampled step, the measured bubble beside the ideal; '' without one. */
export function runTimeline(label: string, color: string, timelines: readonly StageTimeline[]): string {
  const steps = completeSteps(timelines);
  const shown = steps.at(-1);
  if (!shown) return '';
  const first = shown[0]!,
    p = first.stages,
    m = first.microBatches;
  const bubbles = steps.map(measuredBubble).filter(Number.isFinite);
  const mean = bubbles.reduce((a, b) => a + b, 0) / Math.max(bubbles.length, 1);
  const over = steps.length > 1 ? `; mean over the ${steps.length} sampled steps ${pct(mean)}` : '';
  return `<div class="pipeline-run">
<h3><span class="swatch" style="background:${esc(color)}"></span>${esc(label)}: step ${first.step}, ${p} stages, ${m} micro-batches, ${esc(first.schedule)}</h3>
<p class="bubble">measured bubble <b>${pct(measuredBubble(shown))}</b>, ideal (p − 1)/(m + p − 1) = ${pct(idealBubble(p, m))}${over}</p>
${timelineSvg(shown)}
</div>`;
}

/** The report's section of pipeline timelines, one per pipelined run; '' when no run recorded one. */
export function pipelineSection(
  runs: readonly { label: string; color: string; timelines: readonly StageTimeline[] }[],
): string {
  const charts = runs.map((r) => runTimeline(r.label, r.color, r.timelines)).filter((c) => c !== '');
  if (charts.length === 0) return '';
  return `
<section class="chart wide" id="chart-pipeline">
<h2>Pipeline timeline</h2>
<p class="note">One sampled step of each pipelined run as it ran (pipeline 0): a row per stage, F<sub>k</sub> and B<sub>k</sub> the forward and backward of micro-batch k, a grey strip where the stage waited on a message, the pale background where it did nothing. The bubble is the share of the stages' time not spent computing over the step (its first op's start to its last op's end).</p>
<div class="legend"><span class="swatch" style="background:${COLORS.forward}"></span>forward <span class="swatch" style="background:${COLORS.backward}"></span>backward <span class="swatch" style="background:${COLORS.wait}"></span>message wait <span class="swatch" style="background:${COLORS.idle};border:1px solid #ccc"></span>idle</div>
${charts.join('\n')}
</section>`;
}

/** The section's styles, added to the report's. */
export const PIPELINE_STYLE = `
section#chart-pipeline h3{font-size:13px;margin:10px 0 0}
section#chart-pipeline .bubble{margin:2px 0 4px;color:#444;font-size:12.5px}
section#chart-pipeline .legend{font-size:12px;color:#555}
section#chart-pipeline svg{display:block;max-width:100%}
`;
