/** `paratrain report RUN_DIR…`: a summary table on stdout and one self-contained HTML report. */
import { loadReportRuns, summaryTable, writeReport } from '../report/index.ts';

export interface ReportFlags { out?: string; force?: boolean; title?: string }

export async function runReport(dirs: string[], flags: ReportFlags): Promise<void> {
  const runs = loadReportRuns(dirs);
  const path = writeReport(runs, { out: flags.out, force: flags.force, title: flags.title });
  process.stdout.write(summaryTable(runs));
  process.stdout.write(`report: ${path}\n`);
}
