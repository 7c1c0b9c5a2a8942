/**
 * What a text dataset's split carries besides its windows (plain data: it crosses to worker
 * threads): its characters as token ids, the vocabulary, and how training cuts the ids into windows.
 */
import type { TextWindows } from './spec.ts';

export interface TextTokens {
  /** the training split's characters sorted by code point: token id k is vocabulary[k] */
  vocabulary: string[];
  /** this split's characters as token ids */
  tokens: Int32Array;
  /** T: characters per window (model.input[0]) */
  context: number;
  /** sequential: the windows at 0, stride, 2·stride…; random: as many at offsets drawn each epoch */
  windows: TextWindows;
  /** characters between the starts of sequential windows */
  stride: number;
  /** the corpus's fingerprint (`sha256:` and the SHA-256 of its bytes) */
  fingerprint: string;
}
