import { readFileSync } from 'node:fs';
import { Command, Option } from 'commander';
import { DEFAULT_SIM_STRATEGIES } from '../simulate/strategyNames.ts';
import { FaultPlan } from '../runtime/faults/faultPlan.ts';
import { STRATEGY_NAMES } from '../parallel/strategies/index.ts';

/**
 * The `paratrain` command. Every failure ends as one line on stderr and exit code 1; the stack
 * trace only with --verbose.
 */
// A reader that closes the pipe early (`paratrain info | head -1`) just ends the output: the command
// goes on (a training run keeps training) instead of dying on an unhandled EPIPE.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code !== 'EPIPE') throw err;
});

/** The package's version: package.json is two folders up from src/cli/ and from dist/cli/ alike. */
const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  version: string;
};

const program = new Command()
  .name('paratrain')
  .description('Train neural networks in parallel across worker threads and machines')
  .version(`paratrain ${version}`, '-V, --version', "print paratrain's version")
  .option('--verbose', 'show stack traces and extra detail')
  .showHelpAfterError();

const positiveInt = (name: string) => (value: string) => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name}: expected a positive integer, got '${value}'`);
  return n;
};
const positiveNumber = (name: string) => (value: string) => {
  const n = Number(value);
  if (!(n > 0)) throw new Error(`--${name}: expected a positive number, got '${value}'`);
  return n;
};

const nonNegativeInt = (name: string) => (value: string) => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new Error(`--${name}: expected an integer ≥ 0, got '${value}'`);
  return n;
};
const nonNegativeNumber = (name: string) => (value: string) => {
  const n = Number(value);
  if (!(Number.isFinite(n) && n >= 0)) throw new Error(`--${name}: expected a number ≥ 0, got '${value}'`);
  return n;
};
const integer = (name: string) => (value: string) => {
  const n = Number(value);
  if (!Number.isSafeInteger(n)) throw new Error(`--${name}: expected an integer, got '${value}'`);
  return n;
};

/** `--slow-device 1:2.5` → rank 1 computes 2.5× slower. */
function collectSlowDevice(value: string, into: Map<number, number>): Map<number, number> {
  const [rank, factor] = FaultPlan.parseSlowDevice(value);
  return into.set(rank, factor);
}

program
  .command('train')
  .description('train the model a YAML config describes')
  .argument(
    '[config]',
    'YAML run configuration, e.g. examples/mnist-small.yaml (with --resume: default RUN_DIR/config.yaml)',
  )
  .option(
    '--resume <runDir>',
    'continue the run in RUN_DIR from its newest checkpoint set that verifies, or from one set given as RUN_DIR/checkpoints/step-N (the newer sets move to checkpoints/superseded/); --epochs, --devices may change',
  )
  .option('--init-from <checkpoint>', "start a new run from a checkpoint's weights (fresh optimizer, step 0)")
  .option(
    '--reinit <layers>',
    "with --init-from: layers that start from fresh weights instead, 'mismatched' (those whose shapes differ) or names, e.g. layers.3",
  )
  .option(
    '--freeze <layers>',
    'with --init-from: layers whose weights training leaves as they are, e.g. layers.0,layers.2',
  )
  .option('--epochs <n>', 'number of epochs', positiveInt('epochs'))
  .option('--batch-size <n>', 'batch size (per device unless data.batchSizeScope is global)', positiveInt('batch-size'))
  .option('--lr <x>', 'base learning rate', positiveNumber('lr'))
  .option('--seed <n>', 'random seed', (v) => {
    const n = Number(v);
    if (!Number.isInteger(n)) throw new Error(`--seed: expected an integer, got '${v}'`);
    return n;
  })
  .option(
    '--devices <n>',
    'number of devices (worker threads; per process when started as several processes)',
    positiveInt('devices'),
  )
  .option('--strategy <name>', STRATEGY_NAMES.join(' | '))
  .addOption(
    new Option('--backend <name>', 'kernel backend').choices(['auto', 'js', 'wasm', 'native', 'onednn', 'webgpu']),
  )
  .option('--data <dir>', 'directory holding the Fashion-MNIST IDX files')
  .option('--out <dir>', 'run directory (default runs/<timestamp>, linked as runs/latest)')
  .option('--force', 'write into a non-empty --out directory')
  .option(
    '--slow-device <rank:factor>',
    'make a device a straggler, e.g. 1:3 (repeatable)',
    collectSlowDevice,
    new Map<number, number>(),
  )
  .addOption(
    new Option(
      '--transport <name>',
      'several processes: what carries the collectives (mpi: under mpirun, one device per process)',
    ).choices(['tcp', 'mpi']),
  )
  .option(
    '--timeout <seconds>',
    'several processes: deadline for the rendezvous and for any wait on another process (default 300)',
    positiveNumber('timeout'),
  )
  .option('--quiet', 'no progress output')
  .action(async (config: string | undefined, opts) => (await import('./commands.ts')).runTrain(config, opts));

program
  .command('launch')
  .description(
    'start several paratrain processes on this host as one job (torchrun-style), e.g. launch --nproc-per-node 2 -- train examples/mnist-small.yaml',
  )
  .argument('<args...>', 'the paratrain command every process runs, after --')
  .option('--nproc-per-node <n>', 'processes on this host', positiveInt('nproc-per-node'), 1)
  .option('--nnodes <n>', 'hosts in the job (run launch once on each)', positiveInt('nnodes'), 1)
  .option(
    '--node-rank <n>',
    "this host's index, 0 … nnodes − 1 (0 holds rank 0)",
    (v) => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 0) throw new Error(`--node-rank: expected a non-negative integer, got '${v}'`);
      return n;
    },
    0,
  )
  .option('--master-addr <host>', 'address of node 0, reachable from every host', '127.0.0.1')
  .option(
    '--max-restarts <n>',
    'when a process dies, restart the whole job from its last checkpoint (--resume), at most n times (one host)',
    (v) => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 0) throw new Error(`--max-restarts: expected a non-negative integer, got '${v}'`);
      return n;
    },
    0,
  )
  .option(
    '--master-port <port>',
    'first of the TCP ports node 0 listens on (port … port + devices per process + 1; a restart moves up 64)',
    (v) => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 1 || n > 65535)
        throw new Error(`--master-port: expected a TCP port 1–65535, got '${v}'`);
      return n;
    },
    29500,
  )
  .action(async (args: string[], opts) => (await import('./launchCommand.ts')).runLaunch(args, opts));

program
  .command('eval')
  .description(
    'evaluate a checkpoint on the test set: loss, accuracy, per-class precision/recall/F1 and the confusion matrix',
  )
  .argument(
    '[config]',
    'the YAML configuration the checkpoint was trained with (default: the one stored in the checkpoint)',
  )
  .requiredOption('--checkpoint <file>', 'a model.safetensors written by paratrain train')
  .option('--data <dir>', 'directory holding the dataset (overrides data.dir)')
  .addOption(new Option('--backend <name>', 'kernel backend').choices(['auto', 'js', 'wasm', 'native', 'onednn']))
  .option('--quiet', 'only the JSON line on stdout, no table on stderr')
  .action(async (config: string | undefined, opts) => (await import('./evalCommand.ts')).runEval(config, opts));

program
  .command('predict')
  .description('predict classes, probabilities or values for new samples with a trained checkpoint')
  .usage('[CONFIG.yaml] --checkpoint FILE [options] INPUT...')
  .argument(
    '<inputs...>',
    'CSV files (one sample per row), .npy arrays, PNG/JPEG images; an optional first CONFIG.yaml (default: the config stored in the checkpoint)',
  )
  .requiredOption('--checkpoint <file>', 'a model.safetensors written by paratrain train')
  .option('--output <file>', 'write the predictions here (default: stdout)')
  .addOption(new Option('--format <format>', 'output format').choices(['csv', 'json']).default('csv'))
  .option(
    '--label-column <column>',
    'CSV inputs: the column holding the true label (header name or 0-based index), left out of the features; prints the accuracy',
  )
  .addOption(new Option('--backend <name>', 'kernel backend').choices(['auto', 'js', 'wasm', 'native', 'onednn']))
  .option('--quiet', 'no accuracy line on stderr')
  .action(async (inputs: string[], opts) => (await import('./predictCommand.ts')).runPredict(inputs, opts));

program
  .command('transcribe')
  .description(
    'turn WAV files into text with a trained speech model (loss: ctc): one line per file, the file and its transcript separated by a tab',
  )
  .usage('[CONFIG.yaml] --checkpoint FILE [options] WAV...')
  .argument(
    '<wavs...>',
    'WAV files to transcribe; an optional first CONFIG.yaml (default: the config stored in the checkpoint)',
  )
  .requiredOption('--checkpoint <file>', 'a model.safetensors written by paratrain train')
  .option('--beam <n>', 'prefix beam search with this beam width (default: greedy decoding)', positiveInt('beam'))
  .addOption(new Option('--backend <name>', 'kernel backend').choices(['auto', 'js', 'wasm', 'native', 'onednn']))
  .action(async (args: string[], opts) => {
    const command = await import('./transcribeCommand.ts');
    const { config, wavs } = command.splitTranscribeArgs(args);
    await command.runTranscribe(config, wavs, opts);
  });

program
  .command('generate')
  .description(
    'continue a prompt with a trained character-level language model (data: { dataset: text }): prints the prompt and the new text',
  )
  .argument(
    '[config]',
    'the YAML configuration the checkpoint was trained with (default: the one stored in the checkpoint)',
  )
  .requiredOption('--checkpoint <file>', 'a model.safetensors written by paratrain train')
  .requiredOption('--prompt <text>', 'the text to continue (characters of the training text)')
  .option('--length <n>', 'characters to generate', nonNegativeInt('length'), 500)
  .option(
    '--temperature <t>',
    'divides the scores before the softmax: < 1 sharper, > 1 flatter, 0 always the most likely character',
    nonNegativeNumber('temperature'),
    0.8,
  )
  .option('--top-k <k>', 'draw only among the k most likely characters', positiveInt('top-k'), 200)
  .option('--seed <n>', 'seed of the draws: the same seed gives the same text', integer('seed'), 1)
  .addOption(new Option('--backend <name>', 'kernel backend').choices(['auto', 'js', 'wasm', 'native', 'onednn']))
  .action(async (config: string | undefined, opts) => (await import('./generateCommand.ts')).runGenerate(config, opts));

program
  .command('report')
  .description('write one self-contained HTML report (and print a summary table) for one or more runs')
  .argument('<runDirs...>', 'run directories holding metrics.jsonl, e.g. runs/latest; several are overlaid')
  .option('--out <file>', 'output HTML file (default <first run dir>/report.html)')
  .option('--force', 'overwrite an existing --out file that is not a paratrain report')
  .option('--title <text>', 'title of the report')
  .action(async (dirs: string[], opts) => (await import('./reportCommand.ts')).runReport(dirs, opts));

program
  .command('compare')
  .description(
    'train one config with several strategies (same data, seed and devices) and write one report comparing them',
  )
  .argument('<config>', 'YAML run configuration, e.g. examples/mnist-small.yaml')
  .option(
    '--strategies <list>',
    `comma-separated strategies, options after colons as hybrid:shard=1, or trick, pipeline:stages=2, tensor:size=2 (default: ${STRATEGY_NAMES.join(',')})`,
  )
  .option('--devices <n>', 'number of devices for every run (at least 2)', positiveInt('devices'))
  .option('--epochs <n>', 'number of epochs', positiveInt('epochs'))
  .option('--batch-size <n>', 'batch size (per device unless data.batchSizeScope is global)', positiveInt('batch-size'))
  .option('--seed <n>', 'random seed', (v) => {
    const n = Number(v);
    if (!Number.isInteger(n)) throw new Error(`--seed: expected an integer, got '${v}'`);
    return n;
  })
  .option('--data <dir>', 'directory holding the Fashion-MNIST IDX files')
  .option('--out <dir>', 'where the runs and report.html go (default runs/compare-<timestamp>)')
  .option('--force', 'write into a non-empty --out directory')
  .option(
    '--slow-device <rank:factor>',
    'make a device a straggler in every run, e.g. 1:3 (repeatable)',
    collectSlowDevice,
    new Map<number, number>(),
  )
  .option('--quiet', 'no progress output')
  .action(async (config: string, opts) => {
    await (await import('./compareCommand.ts')).runCompare(config, opts);
  });

program
  .command('simulate')
  .description(
    "predict every strategy's step time, samples/s, scaling, traffic and staleness on many devices and links (docs/simulator.md)",
  )
  .argument('[config]', 'YAML run configuration (default with --from: RUN_DIR/config.yaml)')
  .option('--devices <list>', 'device counts, e.g. 8,64,512 or 1..1024 (powers of two)', '1,2,4,8,16,32,64')
  .option('--link <list>', 'links as BANDWIDTH:LATENCY, comma-separated, e.g. 10gbit:50us,1gbit:100us', '10gbit:50us')
  .option(
    '--stragglers <list>',
    'none, lognormal:σ, fixed:F@DEVICE, run (with --from), combined with +; several scenarios comma-separated',
    'none',
  )
  .option(
    '--strategies <list>',
    `strategies with options after colons, e.g. bmuf:period=8, pipeline:stages=2, tensor:size=2 (default: ${DEFAULT_SIM_STRATEGIES})`,
  )
  .option(
    '--per-host <n>',
    'devices per host: threads of one process over shared memory, hosts over TCP',
    positiveInt('per-host'),
    1,
  )
  .option(
    '--cores-per-host <n>',
    'cores of each host (default: one for every device); more device threads share them, each computing the longer',
    positiveInt('cores-per-host'),
  )
  .option('--shm <bandwidth:latency>', "shared memory between a process's threads", '16GB/s:5us')
  .option('--host-rate <rate>', "bytes/s one process's TCP ring loop hashes, reduces and forwards, or none", '1.4GB/s')
  .option(
    '--loopback <bandwidth:latency>',
    "how devices in the parameter server's process reach it over loopback TCP (default: the --shm latency and the host rate)",
  )
  .option(
    '--overlap <mode>',
    'gradient buckets and backward: implemented (as paratrain runs them) or ideal',
    'implemented',
  )
  .option(
    '--batch-size <n>',
    "simulate this per-device batch (weak scaling) instead of the config's",
    positiveInt('batch-size'),
  )
  .option('--from <runDir>', "take the compute time (and its variation, --stragglers run) from a run's metrics.jsonl")
  .addOption(
    new Option('--backend <name>', 'kernel backend to time the layers with').choices([
      'auto',
      'js',
      'wasm',
      'native',
      'onednn',
    ]),
  )
  .option('--seq-len <n>', 'frames per sample for a model with variable-length input', positiveInt('seq-len'))
  .option('--steps <n>', 'steps simulated per device', positiveInt('steps'), 200)
  .option(
    '--seed <n>',
    'seed of the straggler draws',
    (v) => {
      const n = Number(v);
      if (!Number.isInteger(n)) throw new Error(`--seed: expected an integer, got '${v}'`);
      return n;
    },
    1,
  )
  .option('--remeasure', 'time the layers again instead of using the cache')
  .option('--report <file>', 'write an HTML report with the scaling curves')
  .option('--json <file>', 'write the predictions as JSON')
  .option('--svg <dir>', 'write every chart as an SVG file into this directory')
  .option('--title <text>', 'title of the report')
  .option('--force', 'overwrite a --report file that is not a simulate report')
  .option('--quiet', 'no progress notes')
  .action(async (config: string | undefined, opts) => (await import('./simulateCommand.ts')).runSimulate(config, opts));

program
  .command('info')
  .description('show the kernel backends found on this machine and which one is chosen, and the shm reduction kernel')
  .action(async () => (await import('./commands.ts')).runInfo());

try {
  await program.parseAsync(process.argv);
} catch (err) {
  const verbose = process.argv.includes('--verbose');
  const message = err instanceof Error ? err.message : String(err);
  process.stderr.write(`paratrain: ${message}\n`);
  if (verbose && err instanceof Error && err.stack) process.stderr.write(`${err.stack}\n`);
  process.exitCode = 1;
  // a failed job may leave sockets open (peers, a rendezvous still listening): do not wait on them
  setTimeout(() => process.exit(1), 2000).unref();
}
