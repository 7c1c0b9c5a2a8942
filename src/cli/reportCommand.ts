/**
 * `paratrain report RUN_DIR…`: a summary table on stdout and one self-contained HTML report,
 * by default `<first RUN_DIR>/report.html`. A directory `paratrain compare` wrote stands for its runs.
 */
import { join } from 'node:path';
import { loadReportRuns, summaryTable, writeReport, REPORT_FILE } from '../report/index.ts';

export interface ReportFlags {
  out?: string;
  force?: boolean;
  title?: string;
}

export async function runReport(dirs: string[], flags: ReportFlags): Promise<void> {
  const runs = loadReportRuns(dirs);
  const path = writeReport(runs, {
    out: flags.out ?? join(dirs[0]!, REPORT_FILE),
    force: flags.force,
    title: flags.title,
  });
  process.stdout.write(summaryTable(runs));
  process.stdout.write(`report: ${path}\n`);
}
