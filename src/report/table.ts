/** The terminal summary: one row per run, columns aligned. */
import type { RunSummary } from './analyze.ts';

export const pct = (x: number, digits = 1) => (Number.isFinite(x) ? `${(100 * x).toFixed(digits)}%` : '—');

export function formatBytes(n: number | null): string {
  if (n === null || !Number.isFinite(n)) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${i === 0 ? n.toFixed(0) : n.toFixed(1)} ${units[i]}`;
}

export function formatSeconds(s: number): string {
  if (!Number.isFinite(s)) return '—';
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  return m < 60
    ? `${m}m${String(Math.round(s - 60 * m)).padStart(2, '0')}s`
    : `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}

/** The columns of the summary, as text (shared by the terminal table and the HTML table). */
export function summaryRow(label: string, s: RunSummary): Record<string, string> {
  return {
    run: label,
    strategy: s.strategy,
    devices: String(s.devices) + (s.devicesLost ? ` (${s.devicesLost} lost)` : ''),
    'test accuracy': pct(s.testAccuracy, 2) + (s.finished ? '' : ' (unfinished)'),
    'val accuracy': pct(s.valAccuracy, 2),
    best: s.best
      ? `${s.best.metric} ${s.best.metric.endsWith('Accuracy') ? pct(s.best.value, 2) : s.best.value.toFixed(4)} (epoch ${s.best.epoch + 1})`
      : '—',
    'early stop': s.earlyStoppedEpoch === null ? '—' : `epoch ${s.earlyStoppedEpoch + 1}`,
    // a resumed run: the segments' training time; the elapsed column adds the gaps
    'wall time': formatSeconds(s.wallSeconds) + (s.segments > 1 ? `, ${s.segments} segments` : ''),
    elapsed: formatSeconds(s.elapsedSeconds),
    samples: Number.isFinite(s.samples) ? Math.round(s.samples).toLocaleString('en-US') : '—',
    'samples/s': Number.isFinite(s.samplesPerSecond) ? s.samplesPerSecond.toFixed(0) : '—',
    'mean idle': pct(s.idleShare),
    'mean staleness': s.meanStaleness === null ? '—' : s.meanStaleness.toFixed(2),
    stragglers:
      s.perDevice
        .filter((d) => d.straggler)
        .map((d) => `device ${d.rank}`)
        .join(', ') || '—',
    'bytes sent': formatBytes(s.bytes),
    'peak memory': formatBytes(s.maxRssBytes),
    'bad steps': String(s.badSteps),
    stalls: String(s.stalls),
  };
}

const NUMERIC = new Set([
  'devices',
  'test accuracy',
  'val accuracy',
  'wall time',
  'elapsed',
  'samples',
  'samples/s',
  'mean idle',
  'mean staleness',
  'bytes sent',
  'peak memory',
  'bad steps',
  'stalls',
]);

/** What a column shows when no run has anything in it (such a column is left out). */
const NOTHING: Record<string, (s: RunSummary) => boolean> = {
  'val accuracy': (s) => !Number.isFinite(s.valAccuracy),
  best: (s) => s.best === null,
  'early stop': (s) => s.earlyStoppedEpoch === null,
  // a run started once: its elapsed time is its wall time
  elapsed: (s) => s.segments === 1,
  'mean staleness': (s) => s.meanStaleness === null,
  // one device waits for nobody and is no straggler
  'mean idle': (s) => s.devices === 1,
  stragglers: (s) => s.devices === 1,
  'bytes sent': (s) => s.bytes === 0,
  'peak memory': (s) => s.maxRssBytes === null,
  'bad steps': (s) => s.badSteps === 0,
  stalls: (s) => s.stalls === 0,
};

/** `columns` without those that hold nothing for any of `rows` (but those in `keep`). */
export function nonEmptyColumns(
  columns: readonly string[],
  rows: readonly { summary: RunSummary }[],
  keep: readonly string[] = [],
): string[] {
  return columns.filter((c) => !NOTHING[c] || keep.includes(c) || rows.some((r) => !NOTHING[c]!(r.summary)));
}

/** A plain-text table; `columns` picks and orders the columns of `summaryRow`. */
export function formatTable(
  rows: { label: string; summary: RunSummary }[],
  columns: readonly string[] = nonEmptyColumns(TERMINAL_COLUMNS, rows, ['mean idle', 'mean staleness', 'stragglers']),
): string {
  const cells = rows.map((r) => summaryRow(r.label, r.summary));
  const width = columns.map((c) => Math.max(c.length, ...cells.map((row) => (row[c] ?? '').length)));
  const line = (values: string[]) =>
    values
      .map((v, i) => (NUMERIC.has(columns[i]!) ? v.padStart(width[i]!) : v.padEnd(width[i]!)))
      .join('  ')
      .trimEnd();
  const lines = [
    line([...columns]),
    line(width.map((w) => '-'.repeat(w))),
    ...cells.map((row) => line(columns.map((c) => row[c] ?? ''))),
  ];
  return `${lines.join('\n')}\n`;
}

/** The terminal's columns; those that hold nothing for any run (val accuracy without validation, bad steps when none…) are left out. */
export const TERMINAL_COLUMNS = [
  'strategy',
  'devices',
  'test accuracy',
  'val accuracy',
  'best',
  'early stop',
  'wall time',
  'samples/s',
  'mean idle',
  'mean staleness',
  'stragglers',
  'bad steps',
  'elapsed',
  'run',
] as const;
