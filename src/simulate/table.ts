/**
 * The simulation as text: one table per (link, stragglers) scenario, rows by strategy and device
 * count, and the crossovers the figures are about (where a strategy overtakes hybrid).
 */
import type { SimRow } from './simulate.ts';

const pct = (x: number) => (Number.isFinite(x) ? `${(100 * x).toFixed(1)}%` : '—');
const num = (x: number, digits = 0) => (Number.isFinite(x) ? x.toFixed(digits) : '—');
const ms = (s: number) => (Number.isFinite(s) ? (s * 1000 < 10 ? (s * 1000).toFixed(2) : (s * 1000).toFixed(1)) : '—');
const mb = (b: number) => (Number.isFinite(b) ? (b / 1e6 < 10 ? (b / 1e6).toFixed(2) : (b / 1e6).toFixed(1)) : '—');

/** The columns of the tables, in order. */
export const SIM_COLUMNS = [
  'strategy',
  'devices',
  'step ms',
  'samples/s',
  'efficiency',
  'MB/step/device',
  'MB memory/device',
  'idle',
  'staleness mean/p50/p95',
] as const;

/** The text of one row's cells (shared by the terminal table and the HTML report). */
export function simCells(r: SimRow): Record<(typeof SIM_COLUMNS)[number], string> {
  const s = r.staleness;
  return {
    strategy: r.strategy,
    devices: String(r.devices),
    'step ms': r.feasible ? ms(r.stepSeconds) : `n/a: ${r.reason}`,
    'samples/s': r.feasible ? num(r.samplesPerSecond) : '',
    efficiency: r.feasible ? pct(r.efficiency) : '',
    'MB/step/device': r.feasible ? mb(r.bytesPerStep) : '',
    'MB memory/device': r.feasible ? mb(r.memoryBytes) : '',
    idle: r.feasible ? pct(r.idleShare) : '',
    'staleness mean/p50/p95': s ? `${s.mean.toFixed(2)} / ${s.p50} / ${s.p95}` : '',
  };
}

/** Rows grouped by scenario, in the order they came. */
export function scenarios(
  rows: readonly SimRow[],
): { key: string; link: SimRow['link']; stragglers: SimRow['stragglers']; rows: SimRow[] }[] {
  const out = new Map<
    string,
    { key: string; link: SimRow['link']; stragglers: SimRow['stragglers']; rows: SimRow[] }
  >();
  for (const r of rows) {
    const key = `link ${r.link.name}, stragglers ${r.stragglers.name}`;
    const g = out.get(key) ?? { key, link: r.link, stragglers: r.stragglers, rows: [] };
    g.rows.push(r);
    out.set(key, g);
  }
  return [...out.values()];
}

function table(rows: readonly SimRow[]): string {
  const cells = rows.map(simCells);
  const cols = [...SIM_COLUMNS];
  const width = cols.map((c) => Math.max(c.length, ...cells.map((r) => (r[c].startsWith('n/a') ? 0 : r[c].length))));
  const numeric = (c: string) => c !== 'strategy';
  const line = (vals: string[]) =>
    vals
      .map((v, i) => (v.startsWith('n/a') ? v : numeric(cols[i]!) ? v.padStart(width[i]!) : v.padEnd(width[i]!)))
      .join('  ')
      .trimEnd();
  return [line(cols), line(width.map((w) => '-'.repeat(w))), ...cells.map((r) => line(cols.map((c) => r[c])))].join(
    '\n',
  );
}

/**
 * For each strategy other than `against`, per scenario, the device counts at which it is faster
 * than `against` (the figures' crossovers).
 */
export function crossovers(rows: readonly SimRow[], against = 'hybrid'): string[] {
  const lines: string[] = [];
  for (const g of scenarios(rows)) {
    const base = new Map(
      g.rows.filter((r) => r.strategy === against && r.feasible).map((r) => [r.devices, r.samplesPerSecond]),
    );
    if (!base.size) continue;
    const names = [...new Set(g.rows.map((r) => r.strategy))].filter((s) => s !== against);
    for (const name of names) {
      const wins = g.rows.filter(
        (r) =>
          r.strategy === name && r.feasible && r.devices > 1 && (base.get(r.devices) ?? Infinity) < r.samplesPerSecond,
      );
      if (wins.length)
        lines.push(
          `${g.key}: ${name} beats ${against} at ${wins.map((r) => `${r.devices} (${(r.samplesPerSecond / base.get(r.devices)!).toFixed(2)}×)`).join(', ')} devices`,
        );
    }
  }
  return lines;
}

/** The whole terminal output. */
export function formatSimulation(rows: readonly SimRow[], header: string[]): string {
  const parts = [...header, ''];
  for (const g of scenarios(rows)) parts.push(g.key, table(g.rows), '');
  const cross = crossovers(rows);
  parts.push(
    cross.length
      ? 'Where a strategy beats hybrid (samples/s):'
      : 'No strategy beats hybrid at any simulated device count.',
    ...cross.map((l) => `  ${l}`),
    '',
  );
  return parts.join('\n');
}
