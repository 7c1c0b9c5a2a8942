/**
 * `paratrain eval [CONFIG] --checkpoint FILE`: one JSON line on stdout (test loss and accuracy,
 * and for a classifier the per-class figures and the confusion matrix), and for people the
 * per-class table and the confusion matrix on stderr (unless --quiet).
 */
import { evaluateCheckpoint } from '../runtime/infer/evaluateCheckpoint.ts';
import type { ClassReport } from '../runtime/eval/classMetrics.ts';
import type { CommandOutput } from './predictCommand.ts';

export interface EvalFlags {
  checkpoint: string;
  data?: string;
  backend?: string;
  quiet?: boolean;
}

export async function runEval(
  configPath: string | undefined,
  flags: EvalFlags,
  io: CommandOutput = { out: process.stdout, err: process.stderr },
): Promise<void> {
  const log = flags.quiet ? () => {} : (m: string) => io.err.write(`${m}\n`);
  const e = await evaluateCheckpoint(flags.checkpoint, {
    configPath,
    dataDir: flags.data,
    backend: flags.backend,
    log,
  });
  const { report: _report, ...figures } = e;
  const summary: Record<string, unknown> = { ...figures };
  if (e.report) {
    summary.classes = e.report.perClass;
    summary.macro = e.report.macro;
    summary.confusion = e.report.confusion;
  }
  io.out.write(`${JSON.stringify(summary)}\n`);
  if (!flags.quiet) io.err.write(formatEval(e.testSamples, e.testLoss, e.testAccuracy, e.report));
}

const fixed = (x: number) => x.toFixed(3);

/** The table people read: per-class precision, recall, F1 and support, then the confusion matrix. */
export function formatEval(samples: number, loss: number, accuracy: number, report?: ClassReport): string {
  const lines = [`test set: ${samples} samples, accuracy ${accuracy.toFixed(4)}, loss ${loss.toFixed(4)}`];
  if (report) {
    const names = report.perClass.map((c) => `${c.class} ${c.name}`);
    const w = Math.max(9, ...names.map((n) => n.length));
    lines.push('', `${'class'.padEnd(w)}  precision  recall     f1  support`);
    report.perClass.forEach((c, i) => {
      lines.push(
        `${names[i]!.padEnd(w)}  ${fixed(c.precision).padStart(9)}  ${fixed(c.recall).padStart(6)}  ${fixed(c.f1).padStart(5)}  ${String(c.support).padStart(7)}`,
      );
    });
    const m = report.macro;
    lines.push(
      `${'macro avg'.padEnd(w)}  ${fixed(m.precision).padStart(9)}  ${fixed(m.recall).padStart(6)}  ${fixed(m.f1).padStart(5)}  ${String(report.samples).padStart(7)}`,
    );
    // columns are predicted classes by index, rows true classes by index and name
    const cw = Math.max(4, ...report.confusion.flat().map((n) => String(n).length + 1));
    lines.push('', 'confusion matrix (rows: true class, columns: predicted class)');
    lines.push(`${''.padEnd(w)} ${report.perClass.map((c) => String(c.class).padStart(cw)).join('')}`);
    for (const [i, row] of report.confusion.entries())
      lines.push(`${names[i]!.padEnd(w)} ${row.map((n) => String(n).padStart(cw)).join('')}`);
  }
  return `${lines.join('\n')}\n`;
}
