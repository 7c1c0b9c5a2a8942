/** A 4-feature, 3-class model's checkpoint written by hand (no training), for predict's tests; narrowing a prediction to its task. */
import assert from 'node:assert/strict';
import { writeCheckpoint, parseConfig, DATA_METADATA_KEY, type ConfigInput, type Prediction } from '../../src/index.ts';

export const W = [
  [0.5, -1.2, 0.3],
  [0.8, 0.1, -0.7],
  [-0.4, 0.9, 0.6],
  [0.2, -0.3, 1.1],
];
export const B = [0.1, -0.2, 0.05];
export const MEAN = [5.8, 3.0, 3.8, 1.2],
  STD = [0.8, 0.4, 1.8, 0.75];
export const ROWS = [
  [5.1, 3.5, 1.4, 0.2],
  [6.7, 3.0, 5.2, 2.3],
  [5.9, 2.8, 4.3, 1.3],
];

/** A 4-feature, 3-output dense model's checkpoint with the given paratrain.data (or none). */
export function writeFeatureCheckpoint(path: string, data?: object): string {
  const config = parseConfig({
    model: { input: [4], layers: [{ dense: { units: 3 } }] },
    train: { backend: 'js' },
  } satisfies ConfigInput);
  const metadata: Record<string, string> = { config: JSON.stringify(config), format: 'paratrain-checkpoint-1' };
  if (data) metadata[DATA_METADATA_KEY] = JSON.stringify(data);
  writeCheckpoint(
    path,
    [
      { name: 'layers.0.kernel', shape: [4, 3], data: Float32Array.from(W.flat()) },
      { name: 'layers.0.bias', shape: [3], data: Float32Array.from(B) },
    ],
    metadata,
  );
  return path;
}

/** `p` as a prediction of `task` (an assertion error otherwise), its fields typed without `!`. */
export function ofTask<T extends Prediction['task']>(
  p: Prediction | undefined,
  task: T,
): Extract<Prediction, { task: T }> {
  assert.equal(p?.task, task);
  return p as Extract<Prediction, { task: T }>;
}
