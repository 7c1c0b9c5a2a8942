import type { Loss } from '../../nn/loss.ts';

/**
 * The model's output against what its loss reads: a CTC model gives logits per frame [T, C]
 * (speechChecks.ts says more before a run), a language model per position [T, V], the others one
 * row of scores or values per sample. Throws the fix otherwise.
 */
export function checkLossOutput(task: Loss['task'], outputShape: readonly number[]): void {
  const language = task === 'language';
  const perFrame = task === 'transcription' || language;
  const shape = `[${outputShape.join(', ')}]`;
  if (perFrame && outputShape.length !== 2) {
    throw new Error(
      language
        ? `model: loss tokenCrossEntropy needs an output per position [positions, vocab], but the last layer's output shape is ${shape}; end with dense or tiedEmbedding`
        : `model: loss ctc needs an output per frame [frames, classes], but the last layer's output shape is ${shape}; keep the frames and end with dense`,
    );
  }
  if (!perFrame && outputShape.length !== 1) {
    throw new Error(
      `model: the last layer must produce one ${task === 'classification' ? 'score per class' : 'value per target'}, ` +
        `but its output shape is ${shape}; end with flatten and dense`,
    );
  }
}
