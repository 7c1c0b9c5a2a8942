/**
 * A speech run's model against its data, before anything is written: the input is the features
 * per frame ([null, F·(2C + 1)]), the output one logit per class per frame, the classes the
 * alphabet's symbols plus the CTC blank, and every utterance long enough for its transcript after
 * the model's own time reduction (conv1d strides): each error names the field, or the manifest's
 * file and line, and the fix.
 */
import { formatShape, VARIABLE } from '../../tensor/shape.ts';
import { jsBackend } from '../../kernels/js/index.ts';
import { buildModel } from '../../nn/model.ts';
import { ctcMinFrames } from '../../ctc/ctcLoss.ts';
import { outputCount } from '../../speech/alphabet.ts';
import type { SpeechDataset } from '../../speech/speechDataset.ts';
import type { Dataset } from '../../data/dataset.ts';
import type { RunConfig } from '../../config/runConfig.ts';

/** Throws the first problem of a speech run (a CTC loss or speech data); nothing for other runs. */
export function checkSpeechRun(
  config: RunConfig,
  data: { train: Dataset; validation?: Dataset; test?: Dataset },
): void {
  const speech = data.train.speech;
  const ctc = config.loss.type === 'ctc' ? config.loss : null;
  if (!speech && !ctc) return;
  if (!speech) {
    throw new Error(
      `loss: ctc trains on speech (a transcript per utterance), but ${data.train.name} is not a speech dataset; use data: { dataset: speech, dir: DIR }, or another loss`,
    );
  }
  if (!ctc) {
    throw new Error(
      `loss: ${config.loss.type} does not train on ${data.train.name}, a speech dataset (a transcript per utterance); use loss: ctc`,
    );
  }
  const input = config.model.input,
    width = data.train.sampleShape[1]!;
  const { featureSize, context } = speech;
  if (input.length !== 2 || input[0] !== VARIABLE || input[1] !== width) {
    throw new Error(
      `model.input: the model takes ${formatShape(input)} per sample but ${data.train.name} gives utterances of any number of frames of ${width} values ` +
        `(${featureSize} features${context > 0 ? ` × ${2 * context + 1} frames of context (data.features.context ${context})` : ''}); set model.input: [null, ${width}]`,
    );
  }
  const model = buildModel(jsBackend, config.model);
  const out = model.outputShape,
    last = `model.layers[${config.model.layers.length - 1}]`;
  const classes = outputCount(speech.alphabet),
    symbols = speech.alphabet.symbols.length;
  if (out.length !== 2) {
    throw new Error(
      `${last}: loss ctc needs an output per frame [frames, ${classes}], but the model ends in ${formatShape(out)}; ` +
        `keep the frames (returnSequences: true, no flatten) and end with dense: { units: ${classes} }`,
    );
  }
  if (out[1] !== classes) {
    throw new Error(
      `${last}: the model gives ${out[1]} outputs per frame but the alphabet (${speech.alphabet.source}) has ${symbols} symbols: ` +
        `a CTC model needs ${classes}, one per symbol plus the blank; end with dense: { units: ${classes} }`,
    );
  }
  if (ctc.blank >= classes)
    throw new Error(
      `loss.blank: ${ctc.blank} is not one of the model's ${classes} classes; use 0 (the default) or ${classes - 1} (the last)`,
    );
  if (ctc.zeroInfinity) return;
  for (const ds of [data.train, data.validation, data.test])
    if (ds?.speech) checkLongEnough(ds.speech, (l) => model.outputLengths(l));
}

/** Every utterance has the frames CTC needs after the model (`outputLengths` maps input frames to output frames). */
function checkLongEnough(ds: SpeechDataset, outputLengths: (l: Int32Array) => Int32Array): void {
  const out = outputLengths(Int32Array.from(ds.frames));
  for (let i = 0; i < ds.count; i++) {
    const from = ds.labelOffsets[i]!,
      length = ds.labelOffsets[i + 1]! - from;
    const need = ctcMinFrames(ds.labels, length, from);
    if (need <= out[i]!) continue;
    const repeats = need - length;
    const reduced =
      out[i] !== ds.frames[i]
        ? ` (${ds.frames[i]} frames of features, ${out[i]} after the model's strides)`
        : ` (${ds.frames[i]} frames)`;
    throw new Error(
      `${ds.sources[i]}: the utterance is too short for its transcript "${ds.transcripts[i]}": ${out[i]} output frames${reduced}, but its ${length} characters` +
        `${repeats > 0 ? ` with ${repeats} repeated adjacent letter${repeats > 1 ? 's' : ''} (CTC needs a blank between them)` : ''} need at least ${need}; ` +
        `remove the line, use a smaller data.features.stepMs or fewer strides, or set loss.zeroInfinity: true to train on it as loss 0`,
    );
  }
}
