/**
 * RUN_DIR/model-best.safetensors: the job's model (weights and BatchNorm statistics, no optimizer
 * state) at the evaluation where `train.best`'s metric was best so far. Its metadata says which
 * evaluation: `epoch` (the file's metadata counts from 1, as model files do), `step`, `best.metric`,
 * `best.mode`, `best.value`.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { readCheckpoint } from './checkpoint.ts';

export const BEST_FILE = 'model-best.safetensors';

/** The best checkpoint of a run, as its metadata describes it. */
export interface BestCheckpoint {
  path: string;
  metric: string;
  mode: 'min' | 'max';
  value: number;
  /** the evaluation's epoch (0-based, as TrainResult and the events count) and global step */
  epoch: number;
  step: number;
}

/** Reads the metadata of a best checkpoint file (null: no such file, or not one; an unreadable file counts as none). */
export function readBestCheckpoint(path: string): BestCheckpoint | null {
  if (!existsSync(path)) return null;
  try {
    const m = readCheckpoint(path).metadata;
    const mode = m['best.mode'];
    if (m['best.metric'] === undefined || (mode !== 'min' && mode !== 'max')) return null;
    return {
      path,
      metric: m['best.metric'],
      mode,
      value: Number(m['best.value']),
      epoch: Number(m.epoch) - 1,
      step: Number(m.step),
    };
  } catch {
    return null;
  }
}

/** RUN_DIR's best checkpoint, or null. */
export function bestCheckpointOf(runDir: string): BestCheckpoint | null {
  return readBestCheckpoint(join(runDir, BEST_FILE));
}
