/**
 * The parameter server's part of a checkpoint set, `server.safetensors` (sync, async, asynchronous
 * EASGD): the server's weights (`params`), its optimizer's slots (`optimizer.<name>`) and, in the
 * metadata, its version — the updates applied so far, which is also its optimizer's step count
 * (Adam's bias correction). Device 0 writes it from a snapshot of the server, whether the server
 * lives in shared memory or in process 0's main thread; a resumed job's server starts from it.
 * The server's state is the job's, not a device's: a resize carries it over unchanged.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { jsBackend } from '../../kernels/js/index.ts';
import { createOptimizer } from '../../optim/optimizer.ts';
import { loadInitialWeights } from './initFrom.ts';
import type { OptimizerSpec } from '../../optim/spec.ts';
import type { ParameterServerSnapshot, ParameterServerStart } from '../../parallel/parameterServer/index.ts';
import type { Sequential } from '../../nn/model.ts';
import { readCheckpoint, writeCheckpoint } from './checkpoint.ts';
import { loadModelCheckpoint } from './modelCheckpoint.ts';
import { SET_MODEL_FILE } from './checkpointSet.ts';
import type { CheckpointSetup } from './checkpointSetup.ts';

export const SET_SERVER_FILE = 'server.safetensors';

/** The names of `spec`'s optimizer buffers, in the order the optimizer allocates them (a snapshot's order). */
function bufferNames(spec: OptimizerSpec): string[] {
  return createOptimizer(jsBackend, spec, 0)
    .state()
    .buffers.map((b) => b.name);
}

/** Writes the server's snapshot into the (partial) set directory `dir`. */
export function writeServerState(dir: string, snapshot: ParameterServerSnapshot, spec: OptimizerSpec): void {
  const names = bufferNames(spec);
  const tensors = [
    { name: 'params', shape: [snapshot.params.length], data: snapshot.params },
    ...snapshot.optimizer.map((data, i) => ({ name: `optimizer.${names[i]}`, shape: [data.length], data })),
  ];
  writeCheckpoint(join(dir, SET_SERVER_FILE), tensors, {
    format: 'paratrain-server-1',
    version: String(snapshot.version),
    'optimizer.type': spec.type,
  });
}

/** Reads a set's server file into a server start, checking it fits the model and the optimizer. */
function readServerState(path: string, spec: OptimizerSpec, paramCount: number): ParameterServerStart {
  const { tensors, metadata } = readCheckpoint(path);
  const fits = (name: string) => {
    const t = tensors.get(name);
    if (!t || t.data.length !== paramCount) {
      throw new Error(
        `checkpoint set: ${path} ${t ? `holds ${t.data.length} values in '${name}', the model needs ${paramCount}` : `has no '${name}'`}; ` +
          "it was written for another model or optimizer; resume with the run's own config",
      );
    }
    return t.data;
  };
  if (metadata['optimizer.type'] !== spec.type) {
    throw new Error(
      `checkpoint set: ${path} was written with optimizer ${metadata['optimizer.type']}, the config asks for ${spec.type}; keep the optimizer to resume (or start a new run with --init-from)`,
    );
  }
  const version = Number(metadata.version ?? 0);
  return {
    params: fits('params'),
    version,
    optimizer: { step: version, buffers: bufferNames(spec).map((name) => ({ name, data: fits(`optimizer.${name}`) })) },
  };
}

/**
 * Where the job's parameter server starts: a resumed set's server file, a fine-tuned run's
 * checkpoint weights, else the freshly initialised `model`'s weights. A set that should hold a
 * server file and does not failed verification before it got here (resumeSet.ts); one without it
 * is a set of a strategy without a server (resumed with --strategy sync, say), whose job model the
 * server starts from, with a fresh optimizer.
 */
export function serverStart(setup: CheckpointSetup, model: Sequential, spec: OptimizerSpec): ParameterServerStart {
  const fresh = (): ParameterServerStart => ({ params: model.params, version: 0, optimizer: null });
  if (setup.resume) {
    const saved = join(setup.resume.dir, SET_SERVER_FILE);
    if (existsSync(saved)) return readServerState(saved, spec, model.params.length);
    loadModelCheckpoint(join(setup.resume.dir, SET_MODEL_FILE), model);
  } else if (setup.initFrom) loadInitialWeights(setup.initFrom, model);
  return fresh();
}
