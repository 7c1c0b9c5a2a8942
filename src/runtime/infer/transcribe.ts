/**
 * `paratrain transcribe`: a trained speech model (loss ctc) turns WAV files into text. The config
 * is the one given or the one stored in the checkpoint; the features and alphabet are the ones the
 * checkpoint was trained with (its `paratrain.data` metadata; the config's data section for a
 * checkpoint without it); every file is read and checked before anything is decoded, so a bad file
 * is one error naming it and nothing is printed.
 */
import { inferenceBackend } from './inferenceBackend.ts';
import { Tensor } from '../../tensor/tensor.ts';
import { buildModel } from '../../nn/model.ts';
import { loadModelCheckpoint } from '../checkpoint/modelCheckpoint.ts';
import { readCheckpoint } from '../checkpoint/checkpoint.ts';
import { configOfCheckpoint } from '../checkpoint/checkpointInfo.ts';
import { readDataMetadata } from '../../data/metadata.ts';
import { resolveDataPath } from '../../data/files.ts';
import { DEFAULT_ALPHABET, readAlphabet } from '../../speech/alphabet.ts';
import { resolveFeatureOptions, type FeatureOptions } from '../../speech/featureOptions.ts';
import { FeatureExtractor } from '../../speech/features.ts';
import { wavFeatures } from '../../speech/wavFeatures.ts';
import { greedyDecode, labelsToText } from '../../ctc/ctcDecode.ts';
import { prefixBeamSearch } from '../../ctc/prefixBeamSearch.ts';
import type { RunConfig } from '../../config/runConfig.ts';

export interface TranscribeOptions {
  /** prefix beam search with this beam width (absent: greedy decoding) */
  beam?: number;
  /** kernel backend (absent: the config's train.backend) */
  backend?: string;
}

export interface Transcript {
  file: string;
  text: string;
  /** frames of features the model read */
  frames: number;
}

/** What the checkpoint's model hears and writes: its features and its alphabet's symbols. */
function speechSetup(config: RunConfig, checkpoint: string): { features: FeatureOptions; symbols: string[] } {
  const meta = readDataMetadata(readCheckpoint(checkpoint).metadata, checkpoint)?.speech;
  if (meta)
    return { features: resolveFeatureOptions(meta.features, `${checkpoint}: features`), symbols: meta.alphabet };
  if (config.data.dataset !== 'speech') {
    throw new Error(
      `transcribe: ${checkpoint} does not record its features and the config's data is not a speech dataset; give the config it was trained with`,
    );
  }
  const { features, alphabet, dir } = config.data;
  return {
    features: resolveFeatureOptions(features, 'data.features'),
    symbols:
      alphabet === undefined ? [...DEFAULT_ALPHABET.symbols] : readAlphabet(resolveDataPath(alphabet, dir)).symbols,
  };
}

/**
 * The transcripts of `files` by the model of `config` (absent: the config stored in the checkpoint,
 * as eval and predict read it) with `checkpoint`'s weights, in order.
 */
export async function transcribe(
  given: RunConfig | undefined,
  checkpoint: string,
  files: readonly string[],
  o: TranscribeOptions = {},
): Promise<Transcript[]> {
  const config = given ?? configOfCheckpoint(checkpoint, readCheckpoint(checkpoint).metadata);
  if (config.loss.type !== 'ctc')
    throw new Error(
      `transcribe: the config's loss is ${config.loss.type}; transcribe runs a speech model trained with loss: ctc`,
    );
  if (o.beam !== undefined && !(Number.isInteger(o.beam) && o.beam >= 1))
    throw new Error(`--beam: expected a positive integer, got ${o.beam}`);
  const { blank } = config.loss;
  const { features, symbols } = speechSetup(config, checkpoint);
  const model = buildModel(await inferenceBackend(o.backend ?? config.train.backend), config.model);
  loadModelCheckpoint(checkpoint, model);
  const classes = model.outputShape[1];
  if (model.outputShape.length !== 2 || classes !== symbols.length + 1) {
    throw new Error(
      `transcribe: the model gives [${model.outputShape.join(', ')}] outputs but its alphabet has ${symbols.length} symbols (${symbols.length + 1} classes with the blank); give the config the checkpoint was trained with`,
    );
  }
  // every file first: a bad one stops the command before any output
  const extractor = new FeatureExtractor(features);
  const inputs = files.map((file) => ({ file, ...wavFeatures(file, features, extractor) }));
  const width = model.inputShape[1];
  if (inputs.length > 0 && inputs[0]!.width !== width) {
    throw new Error(
      `transcribe: the features give ${inputs[0]!.width} values per frame but the model takes ${width}; the checkpoint was trained with other features (data.features)`,
    );
  }
  return inputs.map(({ file, inputs: x, frames }) => {
    const logits = model.forward(new Tensor([1, frames, width!], x), {
      training: false,
      seed: 0,
      step: 0,
      sampleOffset: 0,
      lengths: Int32Array.of(frames),
    });
    const t = model.outputLengths(Int32Array.of(frames))[0]!;
    const labels =
      o.beam === undefined
        ? greedyDecode(logits.data, t, classes!, blank)
        : (prefixBeamSearch(logits.data, t, classes!, { beamWidth: o.beam, blank })[0]?.labels ?? new Int32Array(0));
    return { file, text: labelsToText(labels, symbols, blank), frames };
  });
}
