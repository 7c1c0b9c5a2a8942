/** The run's data: the configured dataset from the registry (src/data/registry.ts), as the config asks. */
import { loadDataset, type LoadedData } from '../../data/registry.ts';
import type { RunConfig } from '../../config/runConfig.ts';

export type { LoadedData } from '../../data/registry.ts';

/** The configured dataset: its splits, limited, split, checked and normalised as the config asks. */
export function loadData(config: RunConfig, log?: (m: string) => void): Promise<LoadedData> {
  return loadDataset(config.data, { inputShape: config.model.input, seed: config.train.seed, log });
}
