/**
 * One device's part of a checkpoint set, `device-<rank>.safetensors`: its replica's flat buffers
 * (`params` — with a model-parallel device's shards —, `state`: BatchNorm statistics), its
 * optimizer's slots (`optimizer.<name>`) and its strategy's state (`strategy.<name>`, counters in
 * the metadata). Restoring on the same devices gives every device exactly what it had.
 *
 * Resized (a set of G devices resumed on G′), the rule is: device r′ takes the weights, optimizer
 * slots and strategy state of saved device ⌊r′·G/G′⌋; the BatchNorm statistics are the mean over
 * all G saved devices. (Replicas that are equal — hybrid, or BMUF/EASGD just after a sync — stay
 * equal; the job's own state — BMUF's block model and momentum, EASGD's centre — is the same on
 * every saved device, so it carries over unchanged.) Shards or stages cut for another layout are
 * not taken from here but from the set's model file (deviceLayout.ts, wholeModelRestore.ts).
 */
import { join } from 'node:path';
import { readCheckpoint, writeCheckpoint, type CheckpointTensor } from '../checkpoint/checkpoint.ts';
import { deviceFileName } from '../checkpoint/checkpointSet.ts';
import type { ResumePoint } from '../checkpoint/checkpointSetup.ts';
import type { Replica } from './replica.ts';
import { optimizerFrozenFromMeta, optimizerFrozenMeta } from '../checkpoint/modelCheckpoint.ts';
import type { TrainableModel } from '../../nn/trainableModel.ts';
import type { Strategy, StrategyState } from '../../parallel/strategy.ts';

const flat = (name: string, data: Float32Array): CheckpointTensor => ({ name, shape: [data.length], data });

/** Writes this device's file into the (partial) set directory `dir`. */
export function writeDeviceState(
  dir: string,
  rank: number,
  replica: Replica<TrainableModel>,
  strategy: Strategy,
  step: number,
): void {
  const { model, optimizer } = replica;
  const opt = optimizer.state();
  const saved = strategy.saveState?.() ?? { tensors: {}, counters: {} };
  const tensors = [
    flat('params', model.params),
    flat('state', model.state),
    ...opt.buffers.map((b) => flat(`optimizer.${b.name}`, b.data)),
    ...Object.entries(saved.tensors).map(([name, data]) => flat(`strategy.${name}`, data)),
  ];
  writeCheckpoint(join(dir, deviceFileName(rank)), tensors, {
    format: 'paratrain-device-1',
    rank: String(rank),
    step: String(step),
    strategy: strategy.name,
    'optimizer.type': optimizer.spec.type,
    'optimizer.step': String(opt.step),
    ...optimizerFrozenMeta(opt),
    'strategy.counters': JSON.stringify(saved.counters),
  });
}

type DeviceFile = ReturnType<typeof readCheckpoint>;

export function readDeviceFile(point: ResumePoint, rank: number): DeviceFile {
  const path = join(point.dir, deviceFileName(rank));
  try {
    return readCheckpoint(path);
  } catch (e) {
    const multi =
      point.state.processes > 1
        ? " (in a job of several processes every process writes its devices' files only when --out names one directory on a shared file system)"
        : '';
    throw new Error(
      `${(e as Error).message}; the checkpoint set ${point.dir} is missing device ${rank}'s state${multi}; resume from an earlier set or start afresh`,
      { cause: e },
    );
  }
}

function tensor(file: DeviceFile, name: string, length: number, what: string): Float32Array {
  const t = file.tensors.get(name);
  if (!t) throw new Error(`checkpoint set: ${what} has no '${name}'; it was written by another version or model`);
  if (t.data.length !== length) {
    throw new Error(
      `checkpoint set: '${name}' of ${what} holds ${t.data.length} values, this device needs ${length}; the checkpoint was written for a different model or device layout`,
    );
  }
  return t.data;
}

/** The saved device this device takes its state from (the resize rule; itself on the same size). */
export function sourceDevice(rank: number, savedDevices: number, devices: number): number {
  return Math.floor((rank * savedDevices) / devices);
}

/**
 * Puts this device's saved state back (after the strategy's onStart): the same device's on the
 * same size, else by the resize rule above.
 */
export function restoreDeviceState(
  point: ResumePoint,
  rank: number,
  devices: number,
  replica: Replica<TrainableModel>,
  strategy: Strategy,
): void {
  const saved = point.state.devices;
  const from = sourceDevice(rank, saved, devices);
  const file = readDeviceFile(point, from);
  const what = `device ${from}'s state in ${point.dir}`;
  const { model, optimizer } = replica;
  model.params.set(tensor(file, 'params', model.params.length, what));
  if (saved === devices) {
    model.state.set(tensor(file, 'state', model.state.length, what));
  } else {
    // per-replica statistics merge into their mean
    const sum = new Float64Array(model.state.length);
    for (let r = 0; r < saved; r++) {
      const s =
        r === from
          ? tensor(file, 'state', sum.length, what)
          : tensor(readDeviceFile(point, r), 'state', sum.length, `device ${r}'s state`);
      for (let i = 0; i < sum.length; i++) sum[i] = sum[i]! + s[i]!;
    }
    for (let i = 0; i < sum.length; i++) model.state[i] = sum[i]! / saved;
  }
  const meta = file.metadata;
  if (meta['optimizer.type'] !== optimizer.spec.type) {
    throw new Error(
      `checkpoint set ${point.dir} was written with optimizer ${meta['optimizer.type']}, the config asks for ${optimizer.spec.type}; keep the optimizer to resume (or start a new run with --init-from)`,
    );
  }
  // the saved buffers by name (loadState names any the optimizer misses): a sharded optimizer
  // has no whole state to name its own by, and takes its slices of these
  const names = [...file.tensors.keys()].filter((n) => n.startsWith('optimizer.'));
  optimizer.loadState({
    step: Number(meta['optimizer.step'] ?? 0),
    buffers: names.map((name) => ({ name: name.slice(10), data: tensor(file, name, model.params.length, what) })),
    ...optimizerFrozenFromMeta(meta),
  });
  restoreStrategyState(file, strategy);
}

/** The strategy's state in a device file, back into `strategy` (which keeps none: nothing to do). */
export function restoreStrategyState(file: DeviceFile, strategy: Strategy): void {
  if (!strategy.restoreState) return;
  const meta = file.metadata;
  const state: StrategyState = {
    tensors: {},
    counters: JSON.parse(meta['strategy.counters'] ?? '{}') as Record<string, number>,
  };
  for (const [name, t] of file.tensors) if (name.startsWith('strategy.')) state.tensors[name.slice(9)] = t.data;
  strategy.restoreState(state);
}
