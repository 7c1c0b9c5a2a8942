/**
 * Checks of the run's input that need the job's shape, the data or the machine (the schema checks
 * the config alone): run before the run directory is made, so bad input is one line naming the
 * field and the fix, and nothing is written or allocated for a run that cannot start.
 */
import { availableParallelism, totalmem } from 'node:os';
import { formatShape, shapeSize } from '../../tensor/shape.ts';
import { jsBackend } from '../../kernels/js/index.ts';
import { buildModel } from '../../nn/model.ts';
import { layerSizes } from '../../nn/modelSize.ts';
import type { Dataset } from '../../data/dataset.ts';
import { spinFromEnv } from '../../comm/shm/index.ts';
import { checkSecret } from '../../comm/tcp/secret.ts';
import { checkStrategy } from '../../parallel/strategies/index.ts';
import { modelParallelLayers, planModelParallelFrom } from '../../parallel/modelParallel/plan.ts';
import type { RunConfig } from '../../config/runConfig.ts';
import { multiDeviceIssues } from '../../config/schema/deviceChecks.ts';
import type { FaultPlan } from '../faults/faultPlan.ts';
import type { JobShape } from '../job/jobShape.ts';
import { globalBatchSize } from '../device/trainLoop.ts';
import type { LoadedData } from './loadData.ts';
import { checkLossMatchesData, checkOutputUnits } from './lossChecks.ts';
import { checkSpeechRun } from './speechChecks.ts';
import { checkLanguageRun } from './languageChecks.ts';
import { checkLinks } from './linkChecks.ts';

/**
 * What the job's shape and the launch environment allow, before the data is read: the device
 * threads of a process on this machine, one thread per process under MPI, injected faults on
 * devices the job has, the shared-memory spin setting, the shared secret of a job of several processes.
 */
export function checkLaunch(shape: JobShape, transport: 'tcp' | 'mpi', faults: FaultPlan): void {
  checkDeviceThreads(shape.threads);
  if (transport === 'mpi' && shape.processes > 1 && shape.threads > 1) {
    throw new Error(
      `--transport mpi: each process runs one device (MPI is driven by one thread per process), but train.devices is ${shape.threads}; ` +
        `use --devices 1 and start more processes (mpirun -np ${shape.devices}), or --transport tcp`,
    );
  }
  faults.checkDevices(shape.devices);
  spinFromEnv();
  // every process's TCP worlds (the stop control's, even under MPI) prove the job's secret: refuse before any file is written
  if (shape.processes > 1) checkSecret(shape.processes, process.env);
}

/**
 * The config and the data against each other and against the job's devices; returns the model's
 * parameter count.
 */
export function checkRun(config: RunConfig, data: LoadedData, shape: JobShape): number {
  checkNotEmpty(data.train);
  checkSpeechRun(config, data);
  checkLanguageRun(config, data);
  checkDataShape(config, data);
  checkModelFits(config, shape);
  const { devices } = shape;
  // the schema asked this of train.devices; a job of several processes has more devices than that
  const [issue] = multiDeviceIssues(config, devices);
  if (issue) throw new Error(`${issue.path.join('.')}: ${issue.message}`);
  // pipelines and tensor-parallel groups send point to point, which a job's processes do not all have
  checkLinks(config, shape);
  const model = buildModel(jsBackend, config.model);
  if (devices > 1 && modelParallelLayers(config.model).length > 0) {
    planModelParallelFrom(
      config.model,
      config.train.tensorParallel ?? devices,
      model.layers.map((l) => l.inputShape),
    );
  }
  // the loss must fit the task first: its message says more than a count of output units
  checkLossMatchesData(config, data.train, model.outputShape);
  checkOutputUnits(config, model.outputShape, data);
  if (devices > 1) checkStrategy(config.train.strategy, devices);
  const globalBatch = globalBatchSize(config, devices);
  if (globalBatch < devices) {
    throw new Error(
      `data.batchSize: a global batch of ${globalBatch} cannot be split over ${devices} devices; use at least ${devices}`,
    );
  }
  return model.parameterCount;
}

/**
 * The model's input must be the data's per-sample shape [H, W, C], or its flattened form [H·W·C]
 * (same bytes), or differ from it by a trailing axis of 1 ([28, 28] data for a [28, 28, 1] model).
 * Comparing only the total size let a 56×14 set train as 28×28.
 */
export function checkDataShape(
  config: RunConfig,
  data: { train: Dataset; validation?: Dataset; test?: Dataset },
): void {
  const input = config.model.input;
  const squeeze = (s: readonly number[]) => (s.length > 1 && s[s.length - 1] === 1 ? s.slice(0, -1) : [...s]);
  for (const ds of [data.train, data.validation, data.test]) {
    if (!ds) continue;
    const sample = ds.sampleShape;
    const same = (a: readonly number[], b: readonly number[]) => a.length === b.length && a.every((d, i) => d === b[i]);
    const flat = input.length === 1 && input[0] === shapeSize(sample);
    if (!same(input, sample) && !flat && !same(squeeze(input), squeeze(sample))) {
      throw new Error(
        `model.input: the model takes ${formatShape(input)} per sample but ${ds.name} holds ${sample.join('×')} samples; ` +
          `set model.input: [${sample.join(', ')}] (or [${shapeSize(sample)}] for a flat input), or point the data config (data.dir, --data) at the data the model was made for`,
      );
    }
  }
}

/** A run needs something to train on (0 samples used to end "successfully" with rc 0). */
export function checkNotEmpty(train: Dataset): void {
  if (train.count === 0) {
    throw new Error(
      `data: the training set ${train.name} holds 0 samples; point the data config (data.train, data.dir, --data) at a set with samples, or raise data.trainLimit`,
    );
  }
}

/**
 * The most device threads one process may run: 4 per core, at least 16 (so a small machine can
 * still simulate a few devices). More only time-slices the cores and costs a V8 isolate each.
 */
export function maxDeviceThreads(cores = availableParallelism()): number {
  return Math.max(16, 4 * cores);
}

/** `threads`: the device threads of this process (train.devices / --devices). */
export function checkDeviceThreads(threads: number, cores = availableParallelism()): void {
  const max = maxDeviceThreads(cores);
  if (threads > max) {
    throw new Error(
      `train.devices (--devices): ${threads} device threads in one process are more than this machine can run (${cores} cores, at most ${max}: 4 per core, at least 16); ` +
        `use --devices ${Math.min(max, Math.max(1, cores))} or spread the job over processes (paratrain launch)`,
    );
  }
}

/** Optimizer slots per parameter (Adam's two moments, momentum's velocity). */
function optimizerSlots(config: RunConfig): number {
  const o = config.optimizer;
  if (o.type === 'sgd') return o.momentum > 0 ? 1 : 0;
  return 2;
}

const GB = (bytes: number) => `${(bytes / 2 ** 30).toFixed(bytes < 2 ** 30 ? 3 : 1)} GiB`;

/** wasm32's limit: the one memory the device threads of a process keep their kernels' heaps in. */
const SHARED_HEAP_BYTES = 2 ** 32;

/**
 * The model's flat buffers (parameters, gradients, optimizer slots, state) for every device thread
 * of this process, computed from the layer specs without allocating: refused over half the
 * machine's memory, naming the largest layer. Model-parallel layers count 1/devices per device
 * (the job's devices). With several device threads on a wasm-based backend (`sharedHeap`,
 * runtime/device/deviceBackend.ts) they share one memory of 4 GiB, activations included: refused
 * over that too.
 */
export function checkModelFits(
  config: RunConfig,
  shape: Pick<JobShape, 'threads' | 'devices'>,
  limitBytes = totalmem() / 2,
  sharedHeap = shape.threads > 1 && config.train.backend !== 'js' && process.env.PARATRAIN_SHM_HEAP !== '0',
): void {
  const sizes = layerSizes(jsBackend, config.model);
  const buffers = 2 + optimizerSlots(config);
  const { threads, devices } = shape;
  let perDevice = 0;
  let largest = { name: '', bytes: 0, params: 0 };
  sizes.forEach((s, i) => {
    const spec = config.model.layers[i]!;
    const split = 'parallel' in spec && spec.parallel === 'model' && devices > 1 ? devices : 1;
    const bytes = (4 * (s.params * buffers + s.state)) / split;
    perDevice += bytes;
    if (bytes > largest.bytes) largest = { name: s.name, bytes, params: s.params };
  });
  const total = perDevice * threads;
  if (total > limitBytes) {
    const [field, type] = largest.name.split(' ');
    throw new Error(
      `${field}: this ${type} layer has ${largest.params.toLocaleString('en-US')} parameters, ${GB(largest.bytes)} per device ` +
        `(parameters, gradients and ${buffers - 2} optimizer slots of 4 bytes); the model needs ${GB(total)} on ${threads} device(s), ` +
        `more than the limit of ${GB(limitBytes)} (half this machine's memory); make the layer smaller`,
    );
  }
  if (sharedHeap && total > SHARED_HEAP_BYTES) {
    throw new Error(
      `model: its flat buffers (parameters, gradients, ${buffers - 2} optimizer slots) need ${GB(total)} on the ${threads} device threads ` +
        `of this process, more than the 4 GiB of wasm memory they share; run fewer device threads per process (more processes), ` +
        `make the model smaller, or set PARATRAIN_SHM_HEAP=0 (each device thread its own 4 GiB; collectives then copy through scratch)`,
    );
  }
}
