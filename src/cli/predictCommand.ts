/**
 * `paratrain predict [CONFIG] --checkpoint FILE INPUT…`: predictions for CSV rows, .npy arrays and
 * images, as CSV (default) or JSON, on stdout or into --output. With --label-column the CSV's true
 * labels are kept beside the predictions and the accuracy (or, for regression, the mean squared
 * error) is printed on stderr.
 */
import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { loadModel, type LoadedModel } from '../runtime/infer/loadModel.ts';
import type { Prediction } from '../runtime/infer/predict.ts';
import { readPredictInputs } from '../runtime/infer/predictInputs.ts';

export interface PredictFlags {
  checkpoint: string;
  output?: string;
  format?: 'csv' | 'json';
  labelColumn?: string;
  backend?: string;
  quiet?: boolean;
}

/** `predict [CONFIG] INPUT…`: a first argument ending in .yaml/.yml is the config. */
export function splitPredictArgs(args: readonly string[]): { config?: string; inputs: string[] } {
  const [first, ...rest] = args;
  return first !== undefined && /\.ya?ml$/i.test(first) ? { config: first, inputs: rest } : { inputs: [...args] };
}

/** Where a command writes (tests pass their own). */
export interface CommandOutput {
  out: { write(s: string): unknown };
  err: { write(s: string): unknown };
}
const STDIO: CommandOutput = { out: process.stdout, err: process.stderr };

export async function runPredict(args: string[], flags: PredictFlags, io: CommandOutput = STDIO): Promise<void> {
  const { config, inputs } = splitPredictArgs(args);
  if (inputs.length === 0)
    throw new Error(
      'predict: no input files; give CSV rows (.csv), NumPy arrays (.npy) or images (.png, .jpg) after the options',
    );
  if (flags.output !== undefined && inputs.some((f) => resolve(f) === resolve(flags.output!))) {
    throw new Error(`--output ${flags.output} is one of the inputs; write the predictions elsewhere`);
  }
  const model = await loadModel(flags.checkpoint, { config, backend: flags.backend });
  const data = model.config.data;
  const samples = readPredictInputs(inputs, model.inputShape, {
    labelColumn: flags.labelColumn,
    resize: data.dataset === 'imageFolder' && data.resize,
    columns: model.columns,
    ...(data.dataset === 'csv' ? { delimiter: data.delimiter } : {}),
  });
  if (!flags.quiet) for (const note of samples.notes) io.err.write(`${note}\n`);
  if (samples.truth && model.task === 'multiLabel')
    throw new Error("--label-column: a multi-label model's true labels are not one column; leave it out");
  if (samples.count === 0) throw new Error(`predict: ${inputs.join(', ')} hold no samples (a CSV with a header only?)`);
  const predictions = model.predict(samples.data);
  const truth = samples.truth?.map((t, i) => trueValue(model, t, samples.sources[i]!));
  const text =
    flags.format === 'json'
      ? toJson(model, samples.sources, predictions, truth)
      : toCsv(model, samples.sources, predictions, truth);
  if (flags.output !== undefined) writeFileSync(flags.output, text);
  else io.out.write(text);
  if (truth && !flags.quiet) io.err.write(`${scoreLine(model, predictions, truth)}\n`);
}

/** A true label as the model's output: a class index (by name or number) or a regression value. */
function trueValue(model: LoadedModel, cell: string, source: string): number {
  if (model.task === 'regression') {
    const v = Number(cell);
    if (cell === '' || !Number.isFinite(v))
      throw new Error(`${source}: the label column holds '${cell}', not a number`);
    return v;
  }
  const byName = model.classNames?.indexOf(cell) ?? -1;
  if (byName >= 0) return byName;
  const n = Number(cell);
  if (cell !== '' && Number.isInteger(n) && n >= 0 && n < model.outputs) return n;
  const names = model.classNames ? `one of ${model.classNames.join(', ')} or ` : '';
  throw new Error(`${source}: the label column holds '${cell}'; expected ${names}a class index 0–${model.outputs - 1}`);
}

function scoreLine(model: LoadedModel, predictions: Prediction[], truth: number[]): string {
  if (model.task === 'regression') {
    let sum = 0;
    predictions.forEach((p, i) => {
      if (p.task === 'regression') sum += (p.values[0]! - truth[i]!) ** 2;
    });
    return `mean squared error on ${truth.length} labelled rows: ${(sum / Math.max(truth.length, 1)).toPrecision(6)}`;
  }
  const correct = predictions.filter((p, i) => p.task === 'classification' && p.class === truth[i]).length;
  return `accuracy on ${truth.length} labelled rows: ${(correct / Math.max(truth.length, 1)).toFixed(4)} (${correct} of ${truth.length})`;
}

const cell = (v: string | number) => {
  const s = String(v);
  return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
};

function names(model: LoadedModel): string[] {
  return Array.from({ length: model.outputs }, (_, c) => model.classNames?.[c] ?? String(c));
}

/** One row per sample: source, (true,) then the class, its name and a probability per class; or the values; or the labels. */
function toCsv(model: LoadedModel, sources: string[], predictions: Prediction[], truth?: number[]): string {
  const header = ['source', ...(truth ? ['true'] : [])];
  if (model.task === 'regression')
    header.push(...(model.outputs === 1 ? ['value'] : names(model).map((_, i) => `value_${i}`)));
  else if (model.task === 'multiLabel') header.push('labels', ...names(model).map((n) => `p_${n}`));
  else header.push('class', 'label', ...names(model).map((n) => `p_${n}`));
  const rows = predictions.map((p, i) => {
    const row: (string | number)[] = [sources[i]!, ...(truth ? [truthCell(model, truth[i]!)] : [])];
    if (p.task === 'regression') row.push(...p.values);
    else if (p.task === 'multiLabel') row.push(p.labels.join('|'), ...p.probabilities);
    else row.push(p.class, p.label, ...p.probabilities);
    return row.map(cell).join(',');
  });
  return `${[header.map(cell).join(','), ...rows].join('\n')}\n`;
}

const truthCell = (model: LoadedModel, t: number) => (model.task === 'regression' ? t : (model.classNames?.[t] ?? t));

function toJson(model: LoadedModel, sources: string[], predictions: Prediction[], truth?: number[]): string {
  const document = {
    checkpoint: model.checkpoint,
    task: model.task,
    ...(model.task === 'regression' ? {} : { classNames: names(model) }),
    // the document states the task once, above the predictions
    predictions: predictions.map(({ task: _, ...fields }, i) => ({
      source: sources[i],
      ...(truth ? { true: truthCell(model, truth[i]!) } : {}),
      ...fields,
    })),
  };
  return `${JSON.stringify(document, null, 1)}\n`;
}
