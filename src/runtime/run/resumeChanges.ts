/**
 * What a resume does with every change to the run's config (a flag, or a config file that differs
 * from RUN_DIR/config.yaml): it honours it and says so in one line (`resume: optimizer.lr 0.1 → 0.01`),
 * or it refuses it with one line naming both values and the fix. What a checkpoint set holds decides:
 * the model, the loss, the optimizer's kind, the strategy's state, the global batch (the data position
 * and the schedule count its steps) and the data order (seed, shuffle, the training data) are the
 * run's; how long it trains, how fast it learns and what it does around the steps may change.
 */
import { join } from 'node:path';
import type { RunConfig } from '../../config/runConfig.ts';
import type { SetState } from '../checkpoint/checkpointSet.ts';
import { learningRateAt } from '../../optim/schedule.ts';
import { baseLearningRate, globalBatchSize } from '../device/trainLoop.ts';

type Verdict = 'honour' | 'refuse' | 'skip';

/**
 * Each field's verdict, by the longest matching path. A field of the schema missing here is refused
 * (a test keeps every train.* and data field listed), so a new field is honoured only once decided.
 */
const VERDICTS: Record<string, Verdict> = {
  // the model has its own check (its hash, before this); the job's devices and the strategy's kind
  // are compared with the checkpoint set's state, not the config's per-process numbers
  model: 'skip',
  'train.devices': 'skip',
  'train.strategy.type': 'skip',
  loss: 'refuse',
  'optimizer.type': 'refuse',
  optimizer: 'honour',
  schedule: 'honour',
  // the training data and its order: the position in the data is a step of this data, in this order
  data: 'refuse',
  'data.batchSize': 'skip',
  'data.batchSizeScope': 'skip',
  'data.dir': 'honour',
  'data.test': 'honour',
  'data.testLimit': 'honour',
  'data.augment': 'honour',
  'train.seed': 'refuse',
  // the weights a run started from are behind it (the set's replace them); what else changes is said
  'train.initFrom': 'honour',
  'train.epochs': 'honour',
  'train.strategy': 'honour',
  // another compression (or none) on hybrid, bsp, bmuf, diloco: its error feedback starts afresh (compression/codec.ts)
  'train.strategy.compression': 'honour',
  // 1-bit Adam's frozen variance is optimizer state (frozen at a step): a resume cannot thaw it, nor freeze it at startStep
  'train.strategy.compression.freezeVariance': 'refuse',
  // diloco's outer optimizer state is of its kind: another kind cannot take it up
  'train.strategy.outer.type': 'refuse',
  'train.backend': 'honour',
  'train.lrScaling': 'honour',
  'train.evalEvery': 'honour',
  'train.checkpointEvery': 'honour',
  'train.keepLast': 'honour',
  'train.microBatches': 'honour',
  'train.syncBatchNorm': 'honour',
  'train.maxBadSteps': 'honour',
  'train.divergence': 'honour',
  'train.stallWarningSeconds': 'honour',
  'train.clipGradNorm': 'honour',
  'train.best': 'honour',
  'train.earlyStopping': 'honour',
  // a pipelined set holds the whole model too (its model file), so any layout takes it up
  'train.pipeline': 'honour',
  // the set's model file holds the split layers whole, so other groups take their shards from it
  'train.tensorParallel': 'honour',
};

/** The verdict of a field path (`optimizer.lr`), from its longest listed prefix; unlisted: refused. */
export function verdictOf(path: string): Verdict {
  for (let p = path; p; p = p.includes('.') ? p.slice(0, p.lastIndexOf('.')) : '') {
    const v = VERDICTS[p];
    if (v) return v;
  }
  return 'refuse';
}

/** The fields of the schema the table decides (for the test that keeps it whole). */
export const DECIDED_FIELDS: readonly string[] = Object.keys(VERDICTS);

interface Change {
  /** the path the verdict is looked up by (`optimizer.type` for another optimizer), and the field named (`optimizer`) */
  path: string;
  field: string;
  before: unknown;
  after: unknown;
}

const isMap = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The leaves that differ; a map whose `type` differs (another optimizer, decay) is one change, of `….type`. */
function changes(before: unknown, after: unknown, path: string, out: Change[]): Change[] {
  const at = (k: string) => (path ? `${path}.${k}` : k);
  if (isMap(before) && isMap(after) && before.type !== after.type)
    out.push({ path: at('type'), field: path, before, after });
  else if (isMap(before) && isMap(after)) {
    for (const k of new Set([...Object.keys(before), ...Object.keys(after)])) changes(before[k], after[k], at(k), out);
  } else if (JSON.stringify(before) !== JSON.stringify(after)) out.push({ path, field: path, before, after });
  return out;
}

/** A value as a config would write it: `0.01`, `cosine`, `{ steps: 5 }`, `none`. */
export function shown(v: unknown): string {
  if (v === undefined) return 'none';
  if (typeof v === 'number') return String(v);
  if (Array.isArray(v)) return `[${v.map(shown).join(', ')}]`;
  if (isMap(v)) {
    const { type, ...rest } = v;
    const body = Object.entries(rest)
      .filter(([, x]) => x !== undefined)
      .map(([k, x]) => `${k}: ${shown(x)}`)
      .join(', ');
    if (typeof type === 'string') return body ? `{ ${type}: { ${body} } }` : String(type);
    return `{ ${body} }`;
  }
  return String(v);
}

/** `auto` in the given config (train.best, train.earlyStopping's metric and mode) is the saved run's resolved choice, not a change. */
function resolvesTo(c: Change): boolean {
  return c.after === 'auto' && /^train\.(best|earlyStopping\.metric|earlyStopping\.mode)$/.test(c.path);
}

/** The strategy as a checkpoint set names it: one device runs none. */
const strategyLabel = (config: RunConfig, devices: number) =>
  devices > 1 ? config.train.strategy.type : 'single device';

/** Strategies a set of the other can be resumed by: one device and hybrid keep no state (hybrid is one device with the global batch). */
const STATELESS = new Set(['single device', 'hybrid']);

export interface ResumeChangesInput {
  runDir: string;
  /** the newest complete set's directory and state */
  setDir: string;
  state: SetState;
  /** the run's config.yaml (null: unreadable; the fields are then not compared, the set's state still is) */
  saved: RunConfig | null;
  /** the config given to the resume, and the job's device count */
  given: RunConfig;
  devices: number;
}

/**
 * The lines of the changes the resume honours, after checking that none is refused: a refusal throws
 * one error with a line for each refused change.
 */
export function resumeChanges(o: ResumeChangesInput): string[] {
  const { state, given, devices } = o;
  const newRun = `start a new run from its weights with --init-from ${join(o.setDir, 'model.safetensors')}`;
  const refused: string[] = [];
  const honoured: string[] = [];
  const savedStrategy = state.strategy;
  const strategy = strategyLabel(given, devices);
  if (savedStrategy !== strategy && !(STATELESS.has(savedStrategy) && STATELESS.has(strategy))) {
    refused.push(
      `train.strategy ${savedStrategy} → ${strategy}: the checkpoint set holds ${savedStrategy}'s state, which ${strategy} cannot take up; ` +
        `resume with ${savedStrategy === 'single device' ? '--devices 1' : `--strategy ${savedStrategy}`}, or ${newRun}`,
    );
  }
  // on another device count a per-device batch cannot mean the run's: the resize keeps the global batch, and says so
  const resized = state.devices !== devices;
  const perDevice = given.data.batchSizeScope === 'perDevice';
  const givenBatch = globalBatchSize(given, state.devices);
  if (givenBatch !== state.globalBatch && !(resized && perDevice)) {
    const was = o.saved
      ? `${o.saved.data.batchSize}${o.saved.data.batchSizeScope === 'global' ? ' (global)' : ''} `
      : '';
    const now = `${given.data.batchSize}${given.data.batchSizeScope === 'global' ? ' (global)' : ''}`;
    refused.push(
      `data.batchSize ${was}→ ${now}, a global batch of ${state.globalBatch} → ${givenBatch} on the run's ${state.devices} device${state.devices === 1 ? '' : 's'}: ` +
        `a resumed run keeps its global batch (its position in the data and its schedule count its steps); ` +
        `resume with the run's batch (the run's own config, ${join(o.runDir, 'config.yaml')}), or ${newRun}`,
    );
  }
  if (resized) {
    const asked = globalBatchSize(given, devices);
    const aside =
      perDevice && asked !== state.globalBatch
        ? `, where data.batchSize ${given.data.batchSize} per device would make ${asked}`
        : '';
    honoured.push(
      `devices ${state.devices} → ${devices}: the global batch (${state.globalBatch}${aside}), the data order and the learning rate stay the run's`,
    );
  }
  const saved = o.saved;
  if (saved) {
    for (const c of changes(saved, given, '', [])) {
      const verdict = verdictOf(c.path);
      if (verdict === 'skip' || resolvesTo(c)) continue;
      if (verdict === 'refuse') {
        refused.push(
          `${c.field} ${shown(c.before)} → ${shown(c.after)}: the checkpoint set was trained with ${shown(c.before)}, ` +
            `and a resumed run keeps ${refusedWhat(c.path)}; resume with ${shown(c.before)}, or ${newRun}`,
        );
      } else if (c.path === 'train.epochs') honoured.push(epochsLine(saved, given, state, devices));
      else honoured.push(`${c.field} ${shown(c.before)} → ${shown(c.after)}`);
    }
  }
  if (refused.length) throw new Error(refused.map((r) => `--resume ${o.runDir}: ${r}`).join('\n'));
  return honoured.map((h) => `resume: ${h}`);
}

function refusedWhat(path: string): string {
  if (path.startsWith('loss')) return 'the loss it trained with';
  if (path.startsWith('optimizer')) return "the optimizer's kind (its saved slots are that optimizer's)";
  if (path.endsWith('.freezeVariance')) return "Adam's variance frozen or not as it was (it is optimizer state)";
  if (path === 'train.seed') return 'its seed (the data order and dropout of the epoch it is in follow it)';
  if (path.startsWith('data'))
    return 'its training data and their order (the step it resumes at is a position in them)';
  return 'it';
}

/**
 * `train.epochs a → b`; a cosine decay spans the run's steps, so more (or fewer) epochs move the
 * learning rate of the step the run resumes at: said in the same line, a finished schedule too.
 */
function epochsLine(saved: RunConfig, given: RunConfig, state: SetState, devices: number): string {
  const line = `train.epochs ${saved.train.epochs} → ${given.train.epochs}`;
  const { decay } = given.schedule;
  if (decay.type !== 'cosine' || saved.schedule.decay.type !== 'cosine') return line;
  const base = baseLearningRate(given, devices);
  const total = (epochs: number) => state.stepsPerEpoch * epochs;
  const was = learningRateAt(state.step, base, saved.schedule, total(saved.train.epochs));
  const now = learningRateAt(state.step, base, given.schedule, total(given.train.epochs));
  const finished = state.step >= total(saved.train.epochs) ? ', where the finished schedule had ended' : '';
  const lr = (v: number) => String(Number(v.toPrecision(3)));
  return (
    `${line} spreads the cosine decay over ${given.train.epochs} epochs: the learning rate at step ${state.step + 1} ` +
    `is ${lr(now)}, not ${lr(was)}${finished}`
  );
}
