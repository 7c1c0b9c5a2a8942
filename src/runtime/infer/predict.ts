/**
 * Predictions from a model's outputs: the inputs a caller may give (one flat array, or one array
 * per sample, nested or flat) checked and packed into the model's layout, the checkpoint's
 * normalisation applied, and the outputs turned into what the task means — a class with its
 * probabilities (softmax), labels with theirs (sigmoid, multi-label), or values (regression).
 */
import { formatShape, shapeSize } from '../../tensor/shape.ts';
import type { DataInfo, Task } from '../checkpoint/checkpointInfo.ts';

/** One sample: its values in the model's layout (NHWC for images), flat or nested (`[28][28][1]`). */
export type SampleInput = ArrayLike<number> | readonly SampleInput[];

/**
 * What `predict` takes: one flat array of `count × values per sample` numbers (a Float32Array from
 * a file, say), or an array with one entry per sample.
 */
export type PredictInput = ArrayLike<number> | readonly SampleInput[];

/**
 * One sample's prediction, for the task the checkpoint records. Narrow on `task` and each task's
 * fields are there: `if (p.task === 'classification') use(p.probabilities)`.
 */
export type Prediction =
  | {
      task: 'classification';
      /** the most probable class's index */
      class: number;
      /** that class's name (its index as text when the checkpoint names no classes) */
      label: string;
      /** softmax probability per class */
      probabilities: number[];
    }
  | {
      task: 'multiLabel';
      /** the names of the labels whose probability is at least 0.5 */
      labels: string[];
      /** sigmoid probability per label */
      probabilities: number[];
    }
  | {
      task: 'regression';
      /** the model's outputs */
      values: number[];
    };

function flatten(sample: SampleInput, into: number[]): void {
  if (
    typeof sample === 'object' &&
    sample !== null &&
    'length' in sample &&
    sample.length > 0 &&
    typeof (sample as ArrayLike<unknown>)[0] === 'object'
  ) {
    for (const part of sample as readonly SampleInput[]) flatten(part, into);
    return;
  }
  const values = sample as ArrayLike<number>;
  for (let i = 0; i < values.length; i++) into.push(values[i]!);
}

/**
 * `inputs` as one Float32Array of `count` samples of `inputShape`; a wrong size names the sample
 * and the shape the model takes.
 */
export function packInputs(
  inputs: PredictInput,
  inputShape: readonly number[],
  what = 'predict',
): { data: Float32Array; count: number } {
  const per = shapeSize(inputShape);
  const takes = `the model takes ${formatShape(inputShape)} = ${per} values per sample`;
  if (inputs === null || typeof inputs !== 'object' || typeof inputs.length !== 'number') {
    throw new Error(`${what}: expected an array of samples or a flat array of numbers; ${takes}`);
  }
  const perSample = inputs.length > 0 && typeof inputs[0] === 'object' && inputs[0] !== null;
  let data: Float32Array;
  let count: number;
  if (!perSample) {
    if (inputs.length % per !== 0 || inputs.length === 0) {
      throw new Error(`${what}: ${inputs.length} values are not a whole number of samples; ${takes}`);
    }
    count = inputs.length / per;
    data = Float32Array.from(inputs as ArrayLike<number>);
  } else {
    const samples = inputs as readonly SampleInput[];
    count = samples.length;
    data = new Float32Array(count * per);
    const values: number[] = [];
    for (let s = 0; s < count; s++) {
      values.length = 0;
      flatten(samples[s]!, values);
      if (values.length !== per) throw new Error(`${what}: sample ${s} has ${values.length} values; ${takes}`);
      data.set(values, s * per);
    }
  }
  for (let i = 0; i < data.length; i++) {
    if (!Number.isFinite(data[i]))
      throw new Error(
        `${what}: sample ${Math.floor(i / per)} holds ${data[i]} at value ${i % per}; inputs must be finite numbers`,
      );
  }
  return { data, count };
}

/** (x − mean[c]) / std[c] in place, c the channel (last axis) of each value. */
export function normalizeInPlace(data: Float32Array, normalization: DataInfo['normalization']): void {
  if (!normalization) return;
  const { mean, std } = normalization;
  const channels = mean.length;
  for (let i = 0; i < data.length; i++) {
    const c = i % channels;
    data[i] = (data[i]! - mean[c]!) / std[c]!;
  }
}

/** What the model's raw outputs mean for the task; `applied` says the last layer already computed it. */
export function toPredictions(
  outputs: Float32Array,
  count: number,
  task: Task,
  classNames: readonly string[] | undefined,
  applied: boolean,
): Prediction[] {
  const k = outputs.length / count;
  const name = (c: number) => classNames?.[c] ?? String(c);
  const out: Prediction[] = [];
  for (let s = 0; s < count; s++) {
    const row = Array.from(outputs.subarray(s * k, (s + 1) * k));
    if (task === 'regression') {
      out.push({ task, values: row });
    } else if (task === 'multiLabel') {
      const p = applied ? row : row.map((z) => 1 / (1 + Math.exp(-z)));
      out.push({ task, labels: p.flatMap((v, c) => (v >= 0.5 ? [name(c)] : [])), probabilities: p });
    } else {
      const p = applied ? row : softmax(row);
      let best = 0;
      for (let c = 1; c < k; c++) if (p[c]! > p[best]!) best = c;
      out.push({ task: 'classification', class: best, label: name(best), probabilities: p });
    }
  }
  return out;
}

function softmax(z: number[]): number[] {
  const max = Math.max(...z);
  const e = z.map((v) => Math.exp(v - max));
  const sum = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / sum);
}
