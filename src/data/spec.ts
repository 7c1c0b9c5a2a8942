/** Normalised dataset and batching description (defaults filled in). */
export interface DataSpec {
  dataset: 'fashion-mnist';
  /** directory holding the IDX files; when absent the lookup order in README applies */
  dir?: string;
  /** batch size; see batchSizeScope */
  batchSize: number;
  /** 'perDevice': every device gets batchSize samples a step; 'global': batchSize is split across devices */
  batchSizeScope: 'perDevice' | 'global';
  shuffle: boolean;
  /** use only the first N training / test samples (quick runs) */
  trainLimit?: number;
  testLimit?: number;
}
