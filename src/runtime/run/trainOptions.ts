/**
 * `TrainOptions`: how a run is carried out, beside what the config says it trains. One list of the
 * option names (checked against the interface at compile time), so an unknown key passed from
 * JavaScript or with a typo (`epoch: 1`) is an error that names it, and every option is checked
 * before any work.
 */
import type { EventSink, TrainEvent } from '../events/events.ts';
import { FaultPlan } from '../faults/faultPlan.ts';
import { ConfigError, unknownKeyMessage, formatValue } from '../../config/errors.ts';
import type { InitFromInput } from '../../config/schema/initFrom.ts';

/** One global step, summed over this process's devices (`onStep`). */
export interface StepSummary {
  /** 0-based epoch */
  epoch: number;
  /** 0-based global step (counting from the start of the run, resumed runs included) */
  step: number;
  stepInEpoch: number;
  stepsPerEpoch: number;
  /** mean training loss over the step's samples (every device's) */
  loss: number;
  /** training accuracy over the step's samples */
  accuracy: number;
  /** learning rate of the step */
  lr: number;
  /** samples in the step (the global batch, or less in an epoch's last step) */
  samples: number;
  /** devices whose step this sums */
  devices: number;
}

/** An epoch's summary over this process's devices (`onEpoch`): the `'epoch'` event. */
export type EpochSummary = Omit<Extract<TrainEvent, { type: 'epoch' }>, 'type'>;

/** Where this process sits in a job of several processes, e.g. `rendezvousFromEnv(process.env)`. */
export interface ProcessesOption {
  /** this process's index, 0 … worldSize − 1 */
  rank: number;
  /** processes in the job */
  worldSize: number;
  /** address of process 0's host, reachable from every process */
  masterAddr: string;
  /** first TCP port process 0 listens on (it uses port … port + devices + 1) */
  masterPort: number;
}

/** How a run is carried out (not what it trains: that is the config). Every field is optional. */
export interface TrainOptions {
  /** run directory; default runs/<timestamp> with runs/latest pointing at it */
  out?: string;
  /** allow writing into a non-empty `out` directory */
  force?: boolean;
  /** receives every event of the run as it happens (start, step of each device, epoch, eval, checkpoint, end, …) */
  onEvent?: EventSink;
  /** called once per global step, when every device of this process has finished it */
  onStep?: (step: StepSummary) => void;
  /** called after every epoch with its training loss, accuracy and speed (evaluations arrive as 'eval' events in onEvent) */
  onEpoch?: (epoch: EpochSummary) => void;
  /** notes for people (data source, fall-backs) */
  log?: (message: string) => void;
  /** injected faults (stragglers, a failing device), for testing; or give them as slowDevices/failAt */
  faults?: FaultPlan;
  /** straggler injection: device rank → slowdown factor (≥ 1) */
  slowDevices?: Map<number, number>;
  /** failure injection for tests: device `rank` throws at global step `step` */
  failAt?: { rank: number; step: number };
  /**
   * The job spans several processes (rendezvousFromEnv gives these); each runs train.devices
   * device threads, so the job has processes × train.devices devices. Process 0 writes the run
   * directory, evaluates and checkpoints; the others only train.
   */
  processes?: ProcessesOption;
  /** several processes: rendezvous and communication deadline across processes, ms (default 300 000) */
  timeoutMs?: number;
  /** several processes: what carries collectives between them, tcp (default) or mpi (under mpirun, one device per process) */
  transport?: 'tcp' | 'mpi';
  /** continue the run in this directory from its newest complete checkpoint set (docs/architecture.md, checkpoint sets) */
  resume?: string;
  /**
   * start a new run from this checkpoint's weights and state (fresh optimizer, step 0): replaces
   * train.initFrom's path, or with `{ path, reinit, freeze }` the fields it gives
   */
  initFrom?: InitFromInput;
  /**
   * Aborting it stops the run gracefully, on any number of devices: every device (of every process)
   * finishes the step in flight, all agree on one last step, and the run ends as if it were the
   * last (the final checkpoint is written; result.stopped says so). `result.stopped.signal` is the
   * abort reason when it is 'SIGINT', 'SIGTERM' or 'SIGUSR1', else 'abort'; the test set is evaluated on the
   * weights it stopped with. An abort from onEpoch after epoch e stops every device before epoch e + 1's
   * first step (devices beside the main thread then wait at each epoch's end for its events to be
   * handled). In a job of several processes give it (and onEpoch) to every process or to none (they form
   * a control world for it).
   */
  signal?: AbortSignal;
  /** the command line that started the run, recorded in RUN_DIR/command.txt (the CLI gives its own; absent: the library call and its plain options are) */
  command?: readonly string[];
}

/** Every TrainOptions key; the compile-time check below keeps it equal to the interface. */
export const TRAIN_OPTION_KEYS = [
  'out',
  'force',
  'onEvent',
  'onStep',
  'onEpoch',
  'log',
  'faults',
  'slowDevices',
  'failAt',
  'processes',
  'timeoutMs',
  'transport',
  'resume',
  'initFrom',
  'signal',
  'command',
] as const satisfies readonly (keyof TrainOptions)[];
type Assert<T extends true> = T;
export type _TrainOptionKeysComplete = Assert<
  keyof TrainOptions extends (typeof TRAIN_OPTION_KEYS)[number] ? true : false
>;

const FUNCTIONS = ['onEvent', 'onStep', 'onEpoch', 'log'] as const;
const STRINGS = ['out', 'resume'] as const;

/**
 * Checks `options` (TrainOptions, plus the config override keys in `alsoAllowed`): an unknown key
 * names the closest known one, a value of the wrong kind names the option. Throws one ConfigError
 * listing every problem.
 */
export function checkTrainOptions(options: unknown, alsoAllowed: readonly string[] = []): void {
  if (options === undefined) return;
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new ConfigError([
      `train options: expected an object such as { epochs: 2, out: 'runs/a' }, got ${formatValue(options)}`,
    ]);
  }
  const o = options as Record<string, unknown>;
  const allowed = [...TRAIN_OPTION_KEYS, ...alsoAllowed];
  const problems: string[] = [];
  const bad = (key: string, expected: string) =>
    problems.push(`train options: ${key}: expected ${expected}, got ${formatValue(o[key])}`);
  for (const key of Object.keys(o)) {
    if (!allowed.includes(key)) problems.push(`train options: ${unknownKeyMessage(key, allowed, 'option')}`);
  }
  for (const key of FUNCTIONS) if (o[key] !== undefined && typeof o[key] !== 'function') bad(key, 'a function');
  for (const key of STRINGS)
    if (o[key] !== undefined && (typeof o[key] !== 'string' || o[key] === '')) bad(key, 'a path');
  // a map's fields are checked with train.initFrom's own schema when the run starts (initFromPlan.ts)
  if (
    o.initFrom !== undefined &&
    !(typeof o.initFrom === 'string' ? o.initFrom !== '' : isRecord(o.initFrom, ['path']))
  )
    bad('initFrom', 'a checkpoint path or { path, reinit, freeze }');
  if (o.force !== undefined && typeof o.force !== 'boolean') bad('force', 'true or false');
  if (o.command !== undefined && !(Array.isArray(o.command) && o.command.every((a) => typeof a === 'string')))
    bad('command', 'a list of strings (the command line)');
  if (o.signal !== undefined && !(o.signal instanceof AbortSignal))
    bad('signal', 'an AbortSignal (new AbortController().signal)');
  if (o.faults !== undefined && !(o.faults instanceof FaultPlan)) bad('faults', 'a FaultPlan');
  if (o.slowDevices !== undefined && !(o.slowDevices instanceof Map))
    bad('slowDevices', 'a Map of device rank → slowdown factor');
  if (o.failAt !== undefined && !isRecord(o.failAt, ['rank', 'step'])) bad('failAt', '{ rank, step }');
  if (o.timeoutMs !== undefined && !(typeof o.timeoutMs === 'number' && o.timeoutMs > 0))
    bad('timeoutMs', 'a positive number of milliseconds');
  if (o.transport !== undefined && o.transport !== 'tcp' && o.transport !== 'mpi') bad('transport', "'tcp' or 'mpi'");
  if (o.processes !== undefined && !isRecord(o.processes, ['rank', 'worldSize', 'masterAddr', 'masterPort'])) {
    bad('processes', '{ rank, worldSize, masterAddr, masterPort } (rendezvousFromEnv(process.env) gives it)');
  }
  // these only mean something between processes: silently ignoring them would hide a mistake
  for (const key of ['timeoutMs', 'transport'] as const) {
    if (o[key] !== undefined && o.processes === undefined) {
      problems.push(
        `train options: ${key} applies to a job of several processes; give processes (e.g. rendezvousFromEnv(process.env)) or leave ${key} out`,
      );
    }
  }
  if (problems.length) throw new ConfigError(problems);
}

function isRecord(v: unknown, keys: readonly string[]): boolean {
  return v !== null && typeof v === 'object' && keys.every((k) => k in v);
}
