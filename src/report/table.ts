/** The terminal summary: one row per run, columns aligned. */
import type { RunSummary } from './analyze.ts';

export const pct = (x: number, digits = 1) => (Number.isFinite(x) ? `${(100 * x).toFixed(digits)}%` : '—');

export function formatBytes(n: number | null): string {
  if (n === null || !Number.isFinite(n)) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i === 0 ? n.toFixed(0) : n.toFixed(1)} ${units[i]}`;
}

export function formatSeconds(s: number): string {
  if (!Number.isFinite(s)) return '—';
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  return m < 60 ? `${m}m${String(Math.round(s - 60 * m)).padStart(2, '0')}s` : `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}

/** The columns of the summary, as text (shared by the terminal table and the HTML table). */
export function summaryRow(label: string, s: RunSummary): Record<string, string> {
  return {
    run: label,
    strategy: s.strategy,
    devices: String(s.devices) + (s.devicesLost ? ` (${s.devicesLost} lost)` : ''),
    'test accuracy': pct(s.testAccuracy, 2) + (s.finished ? '' : ' (unfinished)'),
    'wall time': formatSeconds(s.wallSeconds),
    'samples/s': Number.isFinite(s.samplesPerSecond) ? s.samplesPerSecond.toFixed(0) : '—',
    'mean idle': pct(s.idleShare),
    'mean staleness': s.meanStaleness === null ? '—' : s.meanStaleness.toFixed(2),
    stragglers: s.perDevice.filter((d) => d.straggler).map((d) => `device ${d.rank}`).join(', ') || '—',
    'bytes sent': formatBytes(s.bytes),
    'peak memory': formatBytes(s.maxRssBytes),
    'bad steps': String(s.badSteps),
  };
}

const NUMERIC = new Set(['devices', 'test accuracy', 'wall time', 'samples/s', 'mean idle', 'mean staleness', 'bytes sent', 'peak memory', 'bad steps']);

/** A plain-text table; `columns` picks and orders the columns of `summaryRow`. */
export function formatTable(rows: { label: string; summary: RunSummary }[], columns: readonly string[] = withBadSteps(rows)): string {
  const cells = rows.map((r) => summaryRow(r.label, r.summary));
  const width = columns.map((c) => Math.max(c.length, ...cells.map((row) => (row[c] ?? '').length)));
  const line = (values: string[]) => values.map((v, i) => (NUMERIC.has(columns[i]!) ? v.padStart(width[i]!) : v.padEnd(width[i]!))).join('  ').trimEnd();
  return [line([...columns]), line(width.map((w) => '-'.repeat(w))), ...cells.map((row) => line(columns.map((c) => row[c] ?? '')))].join('\n') + '\n';
}

export const TERMINAL_COLUMNS = ['strategy', 'devices', 'test accuracy', 'wall time', 'samples/s', 'mean idle', 'mean staleness', 'stragglers', 'run'] as const;

/** The terminal columns, with 'bad steps' (steps skipped for NaN/Inf) before 'run' when some run has any. */
function withBadSteps(rows: { summary: RunSummary }[]): readonly string[] {
  return rows.some((r) => r.summary.badSteps > 0) ? [...TERMINAL_COLUMNS.slice(0, -1), 'bad steps', 'run'] : TERMINAL_COLUMNS;
}
