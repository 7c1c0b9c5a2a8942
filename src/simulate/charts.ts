/**
 * The simulation's figures as data: line charts of points, computed here so the page's script only
 * draws them. Per scenario (link × stragglers): samples/s, scaling efficiency, bytes per step and
 * device, idle share and async staleness against the device count. Across scenarios: each
 * strategy's samples/s relative to hybrid against the link bandwidth (where the trick overtakes
 * data parallelism as bandwidth falls) and against the stragglers' σ (where bmuf or async overtake
 * hybrid as stragglers grow).
 */
import type { SimRow } from './simulate.ts';
import { scenarios } from './table.ts';
import { sigmaOf } from './stragglers.ts';
import { formatRate } from './units.ts';

/** One line of a chart: its points [x, y]. */
export interface Series {
  label: string;
  color: string;
  dashed?: boolean;
  points: [number, number][];
}
/** A line chart of the report: axes (log or linear) and series. */
export interface ChartSpec {
  id: string;
  title: string;
  note: string;
  x: { label: string; log: boolean };
  y: { label: string; log: boolean; percent?: boolean };
  series: Series[];
}

/** One colour per strategy (Tableau 10, as the run reports use). */
const COLORS = [
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

function colorOf(names: string[], name: string): string {
  return COLORS[Math.max(0, names.indexOf(name)) % COLORS.length]!;
}

const slug = (s: string) =>
  s
    .replace(/[^a-z0-9]+/gi, '-')
    .replace(/^-|-$/g, '')
    .toLowerCase();

/** Every chart of the report. `oneDevice`: samples/s of one device (the ideal line). */
export function buildCharts(rows: readonly SimRow[], oneDevice: number): ChartSpec[] {
  const names = [...new Set(rows.map((r) => r.strategy))];
  const charts: ChartSpec[] = [];
  const groups = scenarios(rows);
  for (const g of groups) {
    const by = (name: string) => g.rows.filter((r) => r.strategy === name && r.feasible);
    const perStrategy = (value: (r: SimRow) => number | undefined): Series[] =>
      names
        .map((name) => ({
          label: name,
          color: colorOf(names, name),
          points: by(name)
            .map((r): [number, number] => [r.devices, value(r) ?? NaN])
            .filter((p) => Number.isFinite(p[1])),
        }))
        .filter((s) => s.points.length);
    const devices = [...new Set(g.rows.map((r) => r.devices))].sort((a, b) => a - b);
    const id = slug(g.key),
      where = `${g.key}.`;
    charts.push({
      id: `${id}-throughput`,
      title: `Samples/s — ${g.key}`,
      note: `Predicted training samples per second of the whole job; dashed: linear scaling of one device. ${where}`,
      x: { label: 'devices', log: true },
      y: { label: 'samples/s', log: true },
      series: [
        ...perStrategy((r) => r.samplesPerSecond),
        { label: 'linear', color: '#999', dashed: true, points: devices.map((d) => [d, d * oneDevice]) },
      ],
    });
    charts.push({
      id: `${id}-efficiency`,
      title: `Scaling efficiency — ${g.key}`,
      note: `Samples/s over the device count × one device's. ${where}`,
      x: { label: 'devices', log: true },
      y: { label: 'efficiency', log: false, percent: true },
      series: perStrategy((r) => r.efficiency),
    });
    charts.push({
      id: `${id}-bytes`,
      title: `Bytes per step and device — ${g.key}`,
      note: `What each device moves per step (sent + received), as paratrain's transports count it. ${where}`,
      x: { label: 'devices', log: true },
      y: { label: 'bytes', log: true },
      series: perStrategy((r) => (r.bytesPerStep > 0 ? r.bytesPerStep : undefined)),
    });
    charts.push({
      id: `${id}-idle`,
      title: `Idle share — ${g.key}`,
      note: `Share of a device's time spent waiting for slower devices (lockstep) or in the server's queue (parameter server). ${where}`,
      x: { label: 'devices', log: true },
      y: { label: 'idle', log: false, percent: true },
      series: perStrategy((r) => r.idleShare),
    });
    const stale = g.rows.filter((r) => r.staleness && r.feasible);
    if (stale.length) {
      const asyncNames = [...new Set(stale.map((r) => r.strategy))];
      charts.push({
        id: `${id}-staleness`,
        title: `Staleness of applied gradients — ${g.key}`,
        note: `Updates the server applied between a device's pull and its push being applied: mean (solid) and 95th percentile (dashed). ${where}`,
        x: { label: 'devices', log: true },
        y: { label: 'staleness (updates)', log: false },
        series: asyncNames.flatMap((name) => [
          {
            label: `${name} mean`,
            color: colorOf(names, name),
            points: stale
              .filter((r) => r.strategy === name)
              .map((r): [number, number] => [r.devices, r.staleness!.mean]),
          },
          {
            label: `${name} p95`,
            color: colorOf(names, name),
            dashed: true,
            points: stale
              .filter((r) => r.strategy === name)
              .map((r): [number, number] => [r.devices, r.staleness!.p95]),
          },
        ]),
      });
    }
  }
  charts.push(...relativeCharts(rows, names, 'link'), ...relativeCharts(rows, names, 'stragglers'));
  return charts;
}

/**
 * Each strategy's samples/s over hybrid's against the link bandwidth (`link`, when several links
 * share a latency… or not: the x axis is the bandwidth) or the stragglers' σ, one line per device count.
 */
function relativeCharts(rows: readonly SimRow[], names: string[], axis: 'link' | 'stragglers'): ChartSpec[] {
  const values = [...new Set(rows.map((r) => (axis === 'link' ? r.link.name : r.stragglers.name)))];
  if (values.length < 2 || !names.includes('hybrid')) return [];
  const xOf = (r: SimRow) => (axis === 'link' ? r.link.beta * 8 : sigmaOf(r.stragglers));
  const other = (r: SimRow) => (axis === 'link' ? r.stragglers.name : r.link.name);
  const charts: ChartSpec[] = [];
  const devices = [...new Set(rows.map((r) => r.devices))].filter((d) => d > 1).sort((a, b) => a - b);
  for (const name of names.filter((n) => n !== 'hybrid')) {
    for (const fixed of [...new Set(rows.map(other))]) {
      const series: Series[] = devices
        .map((d, i) => {
          const pts: [number, number][] = [];
          for (const r of rows) {
            if (r.strategy !== name || r.devices !== d || other(r) !== fixed || !r.feasible) continue;
            const h = rows.find(
              (q) =>
                q.strategy === 'hybrid' &&
                q.devices === d &&
                q.link === r.link &&
                q.stragglers === r.stragglers &&
                q.feasible,
            );
            if (h) pts.push([xOf(r), r.samplesPerSecond / h.samplesPerSecond]);
          }
          return { label: `${d} devices`, color: COLORS[i % COLORS.length]!, points: pts.sort((a, b) => a[0] - b[0]) };
        })
        .filter((s) => s.points.length);
      if (!series.length) continue;
      const held = axis === 'link' ? `stragglers ${fixed}` : `link ${fixed}`;
      charts.push({
        id: `${slug(name)}-vs-hybrid-by-${axis}-${slug(fixed)}`,
        title: `${name} / hybrid by ${axis === 'link' ? 'link bandwidth' : 'straggler σ'} (${held})`,
        note:
          axis === 'link'
            ? `Samples/s of ${name} over hybrid's; above 1 ${name} is faster. Links: ${values.join(', ')} (${[...new Set(rows.map((r) => formatRate(r.link.beta)))].join(', ')}).`
            : `Samples/s of ${name} over hybrid's as the stragglers' log-normal σ grows; above 1 ${name} is faster. Scenarios: ${values.join(', ')}.`,
        x: { label: axis === 'link' ? 'link bandwidth (bit/s)' : 'straggler σ', log: axis === 'link' },
        y: { label: `${name} / hybrid`, log: false },
        series,
      });
    }
  }
  return charts;
}
