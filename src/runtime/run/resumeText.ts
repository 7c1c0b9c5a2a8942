/**
 * A resumed text run reads its text with the vocabulary it trained with: the set's model file
 * records it (`paratrain.data`), and a text whose vocabulary differs is refused before any work
 * (data/metadata.ts checkResumedText).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Dataset } from '../../data/dataset.ts';
import { checkResumedText } from '../../data/metadata.ts';
import { readCheckpoint } from '../checkpoint/checkpoint.ts';
import { SET_MODEL_FILE } from '../checkpoint/checkpointSet.ts';

/** Checks `train`'s vocabulary against the one of the checkpoint set in `setDir` (a text dataset only). */
export function checkResumeText(setDir: string, train: Dataset, log?: (m: string) => void): void {
  if (!train.text) return;
  const file = join(setDir, SET_MODEL_FILE);
  // the job's model file is process 0's to write; a process that cannot see it leaves the check to process 0
  if (!existsSync(file)) return;
  checkResumedText(readCheckpoint(file).metadata, train, file, log);
}
