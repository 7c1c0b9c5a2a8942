/** What a run's devices are told about its checkpoint sets: where they go and which one to resume. */
import type { SetState } from './checkpointSet.ts';

/** A complete set to resume from: its directory and state.json. */
export interface ResumePoint {
  dir: string;
  state: SetState;
}

/** What the devices of a run need to know about its checkpoint sets (plain data: it crosses to worker threads). */
export interface CheckpointSetup {
  /** the run directory this device writes its set files into; null: none (a process without it) */
  runDir: string | null;
  /** processes in the job, and the job config's hash (for state.json) */
  processes: number;
  configHash: string;
  /** the set to resume from, or null for a fresh run */
  resume: ResumePoint | null;
  /** a fresh run starting from a checkpoint's weights (--init-from), or null */
  initFrom: InitialWeights | null;
}

/** Where a fine-tuned run's weights come from: the checkpoint, but for the layers that start fresh. */
export interface InitialWeights {
  /** the model checkpoint (absolute) */
  path: string;
  /** indices in model.layers of the layers that keep the model's fresh initialisation */
  reinit: number[];
}
