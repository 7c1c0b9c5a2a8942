/**
 * The loss against the data, before a run starts: the loss must train for the dataset's task
 * (classification labels, regression targets, multi-label targets), and the model must give one
 * output per target. Errors name `loss` (or the last layer) and the dataset, and say the fix.
 */
import { lossTask, TASK_LOSSES } from '../../nn/losses.ts';
import type { Task } from '../../nn/loss.ts';
import { outputUnits, taskOf, type Dataset } from '../../data/dataset.ts';
import type { RunConfig } from '../../config/runConfig.ts';

const WHAT: Record<Task, string> = {
  classification: 'a classification dataset (one class label per sample)',
  regression: 'a regression dataset (real-valued targets)',
  multiLabel: 'a multi-label dataset (several yes/no labels per sample)',
  transcription: 'a speech dataset (a transcript per utterance; data: { dataset: speech })',
  language: 'a text dataset (the next token at every position of a window; data: { dataset: text })',
};

/**
 * Throws when `config.loss` does not fit the dataset `ds`, or (targets) when the model's outputs
 * per sample differ from the dataset's targets per sample.
 */
export function checkLossMatchesData(config: RunConfig, ds: Dataset, outputShape: readonly number[]): void {
  const task: Task = ds.task ?? 'classification',
    wants = lossTask(config.loss);
  if (task !== wants) {
    throw new Error(
      `loss: ${config.loss.type} trains on ${WHAT[wants]}, but ${ds.name} is ${WHAT[task]}; ` +
        `use loss: ${TASK_LOSSES[task]} for this data, or data that matches the loss`,
    );
  }
  // a speech model's outputs are checked against the alphabet in speechChecks.ts, a language model's below
  if (task === 'classification' || task === 'transcription' || task === 'language') return;
  const per = ds.targetSize ?? 0;
  if (!ds.targets || per < 1 || ds.targets.length !== ds.count * per) {
    throw new Error(
      `data: ${ds.name} is ${WHAT[task]} but holds no targets (${ds.targets ? `${ds.targets.length} values for ${ds.count} samples of ${per}` : 'none'}); ` +
        `a ${task} dataset needs targets with targetSize values per sample`,
    );
  }
  const outputs = outputShape.reduce((a, b) => a * b, 1);
  if (outputShape.length !== 1 || outputs !== per) {
    const last = config.model.layers.length - 1;
    throw new Error(
      `model.layers[${last}]: the model gives ${outputShape.join('×')} outputs per sample but ${ds.name} has ${per} ` +
        `${task === 'regression' ? 'target values' : 'labels'} per sample; end with a dense layer of ${per} units`,
    );
  }
}

/** The last layer gives one score per class (classification) or one value per target: sizes from the data. */
export function checkOutputUnits(config: RunConfig, outputShape: readonly number[], data: { train: Dataset }): void {
  const units = outputUnits(data.train),
    task = taskOf(data.train);
  if (task === 'transcription') return; // per frame, against the alphabet: speechChecks.ts
  if (task === 'language') {
    checkTokenOutputs(config, outputShape, data.train);
    return;
  }
  if (outputShape.length === 1 && outputShape[0] === units) return;
  const last = config.model.layers.length - 1;
  const what =
    task === 'classification'
      ? `${units} classes`
      : task === 'regression'
        ? `${units} regression target${units === 1 ? '' : 's'}`
        : `${units} labels (multi-label)`;
  const per = task === 'regression' ? 'values' : 'scores';
  throw new Error(
    `model.layers[${last}]: the model produces ${outputShape.join('×')} ${per} per sample but ${data.train.name} has ${what}; end with a dense layer of ${units} units`,
  );
}

/** A language model gives a score per token of the vocabulary at each of its input's positions: [T, vocab]. */
function checkTokenOutputs(config: RunConfig, outputShape: readonly number[], ds: Dataset): void {
  const positions = config.model.input[0]!,
    vocab = ds.classes;
  if (outputShape.length === 2 && outputShape[0] === positions && outputShape[1] === vocab) return;
  const last = config.model.layers.length - 1;
  throw new Error(
    `model.layers[${last}]: the model gives ${outputShape.join('×')} scores per sample, but a language model gives ${positions}×${vocab}: ` +
      `a score per token of ${ds.name}'s vocabulary (${vocab}) at each of its ${positions} positions; end with dense: { units: ${vocab} } or tiedEmbedding: {} on the sequence`,
  );
}
