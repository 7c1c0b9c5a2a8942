/**
 * Reports: run directories (their metrics.jsonl) → a terminal summary table and one self-contained
 * HTML file. Never trains.
 */
import { existsSync, readdirSync, readFileSync, renameSync, statSync, writeFileSync, unlinkSync } from 'node:fs';
import { METRICS_FILE } from '../runtime/events/metrics.ts';
import { join } from 'node:path';
import { loadRun, runLabels, type RunData } from './runData.ts';
import { series } from './series.ts';
import { summarize } from './analyze.ts';
import { GENERATOR_MARK, renderHtml, type HtmlOptions, type ReportRun } from './html.ts';
import { formatTable } from './table.ts';

export { CHART_IDS, GENERATOR_MARK, RUN_COLORS, chartsFor, renderHtml } from './html.ts';
export type { ChartId } from './html.ts';
export { differingSettings, flattenSettings, readRunSettings } from './settings.ts';
export type { RunSettings } from './settings.ts';
export { loadRun, parseRun, runLabels } from './runData.ts';
export type { RunData } from './runData.ts';
export { summarize } from './analyze.ts';
export { series, downsample, MAX_SERIES_POINTS } from './series.ts';
export type { RunSummary, DeviceSummary } from './analyze.ts';
export type { RunSeries } from './series.ts';
export { formatTable, summaryRow } from './table.ts';
export { findStragglers, STRAGGLER_RATIO } from './stragglers.ts';

export const REPORT_FILE = 'report.html';

/**
 * Loads and analyses runs, in the order given. A directory without a metrics.jsonl whose
 * sub-directories are runs (what `paratrain compare` writes) stands for those runs, in the order
 * they started. Throws one-line errors naming the bad directory or file.
 */
export function loadReportRuns(dirs: readonly string[]): ReportRun[] {
  if (dirs.length === 0) throw new Error('no run directory given; e.g. paratrain report runs/latest');
  const runs: RunData[] = dirs.flatMap((d) => {
    const children = existsSync(join(d, METRICS_FILE)) ? [] : childRuns(d);
    return children.length > 0
      ? // a resumed run started when its first segment did
        children.map((c) => loadRun(c)).sort((a, b) => a.segments[0]!.start - b.segments[0]!.start)
      : [loadRun(d)];
  });
  const labels = runLabels(runs);
  return runs.map((run, i) => ({ label: labels[i]!, run, summary: summarize(run), series: series(run) }));
}

/** The terminal summary table of the runs. */
export function summaryTable(runs: readonly ReportRun[]): string {
  return formatTable(runs.map((r) => ({ label: r.label, summary: r.summary })));
}

export interface WriteReportOptions extends HtmlOptions {
  /** output file (or an existing directory to put report.html in); default `<first run dir>/report.html` */
  out?: string;
  /** overwrite an existing file that is not a paratrain report */
  force?: boolean;
}

/**
 * Writes the HTML report of `runs` and returns its path. An existing file is replaced only when it is
 * a paratrain report (regenerating a report is always fine) or `force` is given; the new file is
 * written beside it and renamed over it, so a failure never leaves half a report.
 */
export function writeReport(runs: readonly ReportRun[], opts: WriteReportOptions = {}): string {
  let out = opts.out ?? join(runs[0]!.run.dir, REPORT_FILE);
  if (isDirectory(out)) out = join(out, REPORT_FILE);
  if (!opts.force && exists(out) && !isOurReport(out)) {
    throw new Error(
      `${out} already exists and is not a paratrain report; choose another --out or pass --force to overwrite it`,
    );
  }
  const html = renderHtml(runs, opts);
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
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new Error(`cannot write the report ${out}: its folder does not exist`);
    throw new Error(`cannot write the report ${out}: ${(e as Error).message}`);
  }
  return out;
}

/** Sub-directories of `dir` that hold a metrics.jsonl (none when `dir` is not a readable directory). */
function childRuns(dir: string): string[] {
  try {
    return readdirSync(dir, { withFileTypes: true })
      .filter((e) => e.isDirectory() && existsSync(join(dir, e.name, METRICS_FILE)))
      .map((e) => join(dir, e.name));
  } catch {
    return [];
  }
}

function exists(path: string): boolean {
  try {
    statSync(path);
    return true;
  } catch {
    return false;
  }
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

function isOurReport(path: string): boolean {
  try {
    return readFileSync(path, 'utf8').slice(0, 1000).includes(GENERATOR_MARK);
  } catch {
    return false;
  }
}
