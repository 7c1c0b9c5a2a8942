/**
 * `paratrain generate`: text from a trained character-level language model. The model and its
 * config come from the checkpoint (or the config given), the vocabulary from the checkpoint's
 * `paratrain.data` metadata (the training split's characters), so the ids mean what they meant
 * in training. Each new character is drawn from the model's scores at the last position of the
 * context (sampling.ts) with a seeded stream: a seed repeats a text.
 */
import { inferenceBackend } from './inferenceBackend.ts';
import { Tensor } from '../../tensor/tensor.ts';
import { CounterRng } from '../../tensor/rng.ts';
import { buildModel, type Sequential } from '../../nn/model.ts';
import type { ForwardContext } from '../../nn/layer.ts';
import type { RunConfig } from '../../config/runConfig.ts';
import { readCheckpoint } from '../checkpoint/checkpoint.ts';
import { loadModelCheckpoint } from '../checkpoint/modelCheckpoint.ts';
import { configOfCheckpoint } from '../checkpoint/checkpointInfo.ts';
import { readDataMetadata, textVocabularyOf } from '../../data/metadata.ts';
import { contextLength } from '../../data/textDataset.ts';
import { codePointsOf, type Vocabulary } from '../../data/vocabulary.ts';
import { checkSampling, sampleToken, type SamplingOptions } from './sampling.ts';

/** Salt separating generation's draws from the other streams keyed by the same seed. */
const GENERATE_STREAM = 0x9e7e;

export interface GenerateOptions extends SamplingOptions {
  /** characters to add after the prompt */
  length: number;
  /** keys the draws: the same seed, prompt and options give the same text */
  seed: number;
  /** each new character as soon as it is drawn */
  onText?: (text: string) => void;
}

/** A trained language model with its vocabulary, ready to continue a prompt. */
export class TextGenerator {
  /** T: the positions the model reads */
  readonly context: number;
  private readonly input: Float32Array;
  /** the last layer is a softmax: its outputs are probabilities, their logs the scores */
  private readonly probabilities: boolean;

  constructor(
    readonly checkpoint: string,
    readonly config: RunConfig,
    private readonly model: Sequential,
    readonly vocabulary: Vocabulary,
  ) {
    this.context = contextLength(model.inputShape);
    const [positions, tokens] = model.outputShape;
    if (model.outputShape.length !== 2 || positions !== this.context || tokens !== vocabulary.size) {
      throw new Error(
        `generate: the model of ${checkpoint} gives ${model.outputShape.join('×')} scores per window, but a language model over its vocabulary of ${vocabulary.size} characters gives ${this.context}×${vocabulary.size}; give the config it was trained with`,
      );
    }
    this.input = model.backend.alloc(this.context);
    this.probabilities = config.model.layers[config.model.layers.length - 1]?.type === 'softmax';
  }

  /** The prompt's token ids; a character the model never saw is an error naming it. */
  encode(prompt: string): Int32Array {
    if (prompt.length === 0) throw new Error('--prompt: empty; give at least one character for the model to continue');
    const known = JSON.stringify(this.vocabulary.symbols.join(''));
    return this.vocabulary.encode(
      codePointsOf(prompt),
      (i) => `--prompt (character ${i + 1})`,
      `the model knows only the characters of its training text: ${known}`,
    );
  }

  /** The scores of the next token after `ids` (the last T of them), one per vocabulary entry. */
  nextScores(ids: ArrayLike<number>): Float32Array {
    const t = this.context,
      v = this.vocabulary.size;
    const n = Math.min(ids.length, t);
    // the model reads a fixed [T]: the last n ids, then padding (id 0) on the right. Causal attention
    // makes position n − 1 independent of what follows it, and `lengths` tells the layers that mask
    // padding (attention's keys, recurrent layers) where the window ends, so its scores are exact
    this.input.fill(0);
    for (let j = 0; j < n; j++) this.input[j] = ids[ids.length - n + j]!;
    const ctx: ForwardContext = { training: false, seed: 0, step: 0, sampleOffset: 0, lengths: Int32Array.of(n) };
    const y = this.model.forward(new Tensor([1, ...this.model.inputShape], this.input), ctx);
    const scores = y.data.slice((n - 1) * v, n * v);
    if (this.probabilities) for (let i = 0; i < v; i++) scores[i] = Math.log(scores[i]!);
    return scores;
  }

  /** `length` characters that continue `prompt` (without the prompt). */
  generate(prompt: string, o: GenerateOptions): string {
    checkSampling(o);
    if (!(Number.isInteger(o.length) && o.length >= 0))
      throw new Error(`--length: expected an integer ≥ 0, got ${o.length}`);
    const ids = Array.from(this.encode(prompt));
    const rng = new CounterRng(o.seed, GENERATE_STREAM);
    let text = '';
    for (let i = 0; i < o.length; i++) {
      const id = sampleToken(this.nextScores(ids), o, rng.next());
      ids.push(id);
      const ch = this.vocabulary.symbols[id]!;
      text += ch;
      o.onText?.(ch);
    }
    return text;
  }
}

/**
 * The text model of `checkpoint` (a model.safetensors of a run on `dataset: text`), built from
 * `given` (absent: the config stored in the checkpoint) on `backend` (absent: the config's).
 */
export async function loadTextGenerator(
  checkpoint: string,
  given?: RunConfig,
  backend?: string,
): Promise<TextGenerator> {
  const { metadata } = readCheckpoint(checkpoint);
  const vocabulary = textVocabularyOf(readDataMetadata(metadata, checkpoint), checkpoint);
  if (!vocabulary) {
    throw new Error(
      `generate: ${checkpoint} records no text vocabulary (metadata paratrain.data); generate continues text with a model trained on data: { dataset: text }`,
    );
  }
  const config = given ?? configOfCheckpoint(checkpoint, metadata);
  const model = buildModel(await inferenceBackend(backend ?? config.train.backend), config.model);
  loadModelCheckpoint(checkpoint, model);
  return new TextGenerator(checkpoint, config, model, vocabulary);
}
