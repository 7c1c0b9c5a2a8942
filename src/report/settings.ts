/**
 * A run's settings as the report compares them: its config.yaml flattened to one value per
 * hyperparameter (`optimizer: adam`, `optimizer.lr: 0.001`, `model.layers[0]: conv2d`,
 * `model.layers[0].filters: 32`), and its command.txt lines; and which hyperparameters differ
 * between runs.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { COMMAND_FILE, CONFIG_FILE } from '../runtime/checkpoint/runConfigFiles.ts';

export interface RunSettings {
  /** hyperparameter → its value as text, in config.yaml's order */
  hyperparameters: Map<string, string>;
  /** how each start of the run was made (command.txt, one line each) */
  commands: string[];
}

/** Reads RUN_DIR/config.yaml and command.txt (null when there is no readable config.yaml). */
export function readRunSettings(dir: string): RunSettings | null {
  let config: unknown;
  try {
    config = parse(readFileSync(join(dir, CONFIG_FILE), 'utf8'));
  } catch {
    return null;
  }
  let commands: string[] = [];
  try {
    commands = readFileSync(join(dir, COMMAND_FILE), 'utf8')
      .split('\n')
      .filter((l) => l.trim() !== '');
  } catch {
    /* an older run directory */
  }
  return { hyperparameters: flattenSettings(config), commands };
}

const isMap = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * One entry per leaf. A one-key map whose value is a map (`adam: { lr: … }`, `bmuf: { period: 4 }`,
 * a layer) reads as its name at the path and its options below it, so `optimizer: adam` and
 * `optimizer: sgd` differ in one row rather than in every option.
 */
export function flattenSettings(value: unknown, path = '', out = new Map<string, string>()): Map<string, string> {
  if (Array.isArray(value) && value.some((v) => isMap(v) || Array.isArray(v))) {
    for (const [i, v] of value.entries()) flattenSettings(v, `${path}[${i}]`, out);
    if (value.length === 0) out.set(path, '[]');
  } else if (Array.isArray(value)) {
    out.set(path, `[${value.map((v) => String(v)).join(', ')}]`);
  } else if (isMap(value)) {
    const keys = Object.keys(value);
    if (keys.length === 1 && isMap(value[keys[0]!]) && path !== '') {
      out.set(path, keys[0]!);
      flattenSettings(value[keys[0]!], path, out);
    } else {
      for (const k of keys) flattenSettings(value[k], path ? `${path}.${k}` : k, out);
    }
  } else if (path !== '') {
    out.set(path, value === null || value === undefined ? '—' : String(value));
  }
  return out;
}

/**
 * The hyperparameters whose values differ between the runs that have settings (a run without one
 * is left out of the comparison), in the order they first appear; a key a run lacks counts as '—'.
 */
export function differingSettings(settings: readonly (RunSettings | null)[]): string[] {
  const known = settings.filter((s): s is RunSettings => s !== null);
  if (known.length < 2) return [];
  const keys = mergedKeys(known);
  return keys.filter((k) => new Set(known.map((s) => s.hyperparameters.get(k) ?? '—')).size > 1);
}

/** Every run's hyperparameters in one order: a key only some runs have goes after the key before it in theirs (`optimizer.momentum` beside `optimizer.lr`). */
export function mergedKeys(settings: readonly RunSettings[]): string[] {
  const keys: string[] = [];
  for (const s of settings) {
    let after = -1;
    for (const k of s.hyperparameters.keys()) {
      const at = keys.indexOf(k);
      if (at >= 0) {
        after = at;
        continue;
      }
      // beside its parent when another run has it (`train.earlyStopping: false` before `train.earlyStopping.metric`)
      after = Math.max(after, keys.indexOf(k.replace(/(\.[^.[\]]+|\[\d+\])$/, '')));
      keys.splice(after + 1, 0, k);
      after++;
    }
  }
  return keys;
}
