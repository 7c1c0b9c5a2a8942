/**
 * The simulator checked on real transport: 2–4 `paratrain train` processes, one per network
 * namespace, joined through a router namespace whose links are shaped (tbf rate) and delayed (a
 * user-space relay: this kernel has no netem; scripts/netns.ts, scripts/net-delay.py). For each
 * process count, link and strategy it measures the link and host 0's loopback through paratrain's
 * own transport (scripts/transport-probe.ts), trains a few dozen steps, reads every process's step
 * events, and prints the measured step time beside the simulator's prediction for the same job:
 * with the compute the simulator times on this machine (`paratrain simulate`'s own measurement,
 * nothing from the run), and with the run's own compute (so only communication and waiting are
 * predicted). Self-contained: it prints the machine and the load average at every measurement.
 *
 *   node --import tsx scripts/emulated-network.ts [--config examples/alexnet-small.yaml]
 *     [--links 100mbit:2ms,50mbit:5ms] [--strategies hybrid,async,bsp,trick] [--processes 2[,3,4]]
 *     [--threads 1] [--batch N] [--steps 20] [--server-steps 60] [--mtu 9000] [--out DIR] [--json FILE]
 *
 * --threads: device threads per process (more than one: the hierarchical allreduce, shared memory
 * inside each process and TCP between them). --batch: the global batch in place of the config's.
 *
 * Needs root, iproute2 (`ip`, `tc`) and /usr/bin/python3; otherwise it says why and exits 0.
 * Everything it makes (namespaces, veths, the TUN device, the relay) is removed at the end, on an
 * error and on Ctrl-C. The processes share this machine's cores: a quiet machine measures the
 * network, a busy one its scheduler too.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import type { ChildProcess } from 'node:child_process';
import { loadConfig, configToYaml, type RunConfig } from '../src/config/index.ts';
import { parseLinks, formatRate, formatDuration } from '../src/simulate/units.ts';
import { parseStrategyChoices, type StrategyChoice } from '../src/simulate/choices.ts';
import { markForTrick, stripMarks } from '../src/simulate/trick.ts';
import { readRunMeasurements, mean, type RunMeasurements } from '../src/simulate/fromRun.ts';
import { buildSetup } from '../src/simulate/setup.ts';
import { simulate, type SimRow } from '../src/simulate/simulate.ts';
import { EmulatedNetwork, namespacesUnavailable } from './netns.ts';
import { calibrate, exited, machineLine, type Calibration } from './emulatedCalibration.ts';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const MAIN = join(REPO, 'src', 'cli', 'main.ts');
/** the shipped Fashion-MNIST subset's training images: runs stay within them */
const SUBSET_IMAGES = 4000;
/** bytes of each bulk message of the transport probe */
const PROBE_BYTES = 4 << 20;

function option(args: string[], name: string, fallback: string): string {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] ? args[i + 1]! : fallback;
}

/** The run's config for one strategy: its model as that strategy runs it, `threads` devices per process, `steps` steps per device. */
function jobConfig(
  base: RunConfig,
  choice: StrategyChoice,
  processes: number,
  threads: number,
  steps: number,
): RunConfig {
  const global =
    base.data.batchSizeScope === 'global' ? base.data.batchSize : base.data.batchSize * processes * threads;
  const samples = Math.min(steps * global, SUBSET_IMAGES);
  return {
    ...base,
    model: choice.kind === 'trick' ? markForTrick(base.model) : stripMarks(base.model),
    data: { ...base.data, trainLimit: samples, testLimit: 100 },
    train: {
      ...base.train,
      devices: threads,
      epochs: Math.max(1, Math.ceil((steps * global) / samples)),
      evalEvery: 0,
      strategy: choice.spec,
    },
  };
}

/** Runs one job of `processes` processes; returns an error text, or null when every process succeeded. */
async function runJob(
  net: EmulatedNetwork,
  configPath: string,
  runDir: string,
  processes: number,
  threads: number,
  children: Set<ChildProcess>,
): Promise<string | null> {
  const env = {
    ...process.env,
    WORLD_SIZE: String(processes),
    LOCAL_RANK: '0',
    MASTER_ADDR: net.address(0),
    MASTER_PORT: '29500',
    PARATRAIN_SECRET: randomBytes(32).toString('hex'),
    PARATRAIN_OFFLINE: '1',
  };
  const procs = Array.from({ length: processes }, (_, p) => {
    const child = net.spawnIn(
      p,
      [
        process.execPath,
        '--import',
        'tsx',
        MAIN,
        'train',
        configPath,
        '--devices',
        String(threads),
        '--out',
        runDir,
        '--force',
        '--quiet',
        '--timeout',
        '120',
      ],
      { ...env, RANK: String(p) },
    );
    children.add(child);
    let err = '';
    child.stderr!.on('data', (d: Buffer) => {
      err = (err + d.toString()).slice(-2000);
    });
    child.stdout!.resume();
    return { child, err: () => err };
  });
  const codes = await Promise.all(procs.map((p) => exited(p.child, 15 * 60_000)));
  for (const p of procs) children.delete(p.child);
  const bad = codes.findIndex((c) => c !== 0);
  return bad < 0
    ? null
    : `process ${bad} exited with ${codes[bad]}: ${procs[bad]!.err().trim().split('\n').slice(-3).join(' | ')}`;
}

/** Each device's mean step (compute + sync) in the run's steady state, in rank order. */
function deviceSteps(m: RunMeasurements): number[] {
  return m.perDevice.map((steps) => mean(steps));
}

/** One measured job beside its predictions. */
export interface Row {
  processes: number;
  link: string;
  strategy: string;
  load: number;
  calibration: Calibration;
  /** the job's mean step, seconds (lockstep: the step; async: the mean over devices of each device's mean step) */
  measured: number;
  devices: number[];
  /** the simulator with its own compute measurement, and with the run's compute */
  predicted: number;
  predictedDevices?: number[];
  givenCompute: number;
  error: number;
  errorGivenCompute: number;
  bytesMeasured: number;
  bytesPredicted: number;
}

const ms = (s: number) => (s * 1000).toFixed(1);
const pct = (e: number) => `${e >= 0 ? '+' : ''}${(100 * e).toFixed(1)}%`;

export async function main(args: string[]): Promise<void> {
  const why = namespacesUnavailable();
  if (why) {
    console.log(`emulated-network: skipped: network namespaces cannot be made here: ${why}`);
    return;
  }
  const configPath = option(args, 'config', join(REPO, 'examples', 'alexnet-small.yaml'));
  const links = parseLinks(option(args, 'links', '100mbit:2ms,50mbit:5ms'), '--links');
  const processCounts = option(args, 'processes', '2').split(',').map(Number);
  if (!processCounts.every((p) => p >= 2 && p <= 4 && Number.isInteger(p)))
    throw new Error('--processes: 2, 3 or 4, or a list of them (2,4)');
  const threads = Number(option(args, 'threads', '1'));
  if (!(threads >= 1 && threads <= 4 && Number.isInteger(threads)))
    throw new Error('--threads: device threads per process, 1 to 4');
  const steps = Number(option(args, 'steps', '20'));
  if (!(steps >= 10 && Number.isInteger(steps)))
    throw new Error('--steps: an integer of at least 10 (the first few are a warm-up)');
  // a parameter server whose link two or more devices cross: their phases wander over tens of steps
  // (docs/simulator.md, "Why 60 steps"), so a short run measures one stretch of them, not their mean
  const serverSteps = Number(option(args, 'server-steps', '60'));
  if (!(serverSteps >= 10 && Number.isInteger(serverSteps)))
    throw new Error('--server-steps: an integer of at least 10');
  const config = loadConfig(configPath);
  const batch = option(args, 'batch', '');
  if (batch && !(Number(batch) >= 1 && Number.isInteger(Number(batch))))
    throw new Error('--batch: the global batch, a positive integer');
  const base: RunConfig = batch
    ? { ...config, data: { ...config.data, batchSize: Number(batch), batchSizeScope: 'global' } }
    : config;
  const choices = parseStrategyChoices(option(args, 'strategies', 'hybrid,async,bsp,trick'), base);
  const keep = args.includes('--out');
  const out = keep ? option(args, 'out', '') : mkdtempSync(join(tmpdir(), 'paratrain-emulated-'));
  mkdirSync(out, { recursive: true });
  const children = new Set<ChildProcess>();
  let net: EmulatedNetwork | null = null;
  const rows: Row[] = [];
  const cleanup = async () => {
    for (const c of children) c.kill('SIGKILL');
    await net?.destroy();
    if (!keep) rmSync(out, { recursive: true, force: true });
  };
  const onSignal = () => {
    void cleanup().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  console.log(machineLine());
  const warmup = (n: number) => Math.min(5, Math.floor(n / 5));
  console.log(
    `config ${configPath}${batch ? `, global batch ${batch}` : ''}; ${steps} steps per device (the first ${warmup(steps)} a warm-up), async and asynchronous easgd on 3 or more processes ` +
      `${serverSteps} (the first ${warmup(serverSteps)}); MTU ${option(args, 'mtu', '9000')}`,
  );
  try {
    let remeasure = true;
    for (const processes of processCounts) {
      net = new EmulatedNetwork(processes, Number(option(args, 'mtu', '9000')));
      net.create();
      // the strategy column as wide as its longest label ('diloco:period=50')
      const labelWidth = Math.max(9, ...choices.map((c) => c.label.length + 1));
      for (const link of links) {
        await net.shape({ rate: link.beta, delay: link.alpha }, 4 * 3600);
        console.log(
          `\n${processes} processes, ${threads === 1 ? 'one device' : `${threads} devices`} each, link ${link.name} (${formatRate(link.beta)}, ${formatDuration(link.alpha)} one way)`,
        );
        console.log(
          `${'strategy'.padEnd(labelWidth)}${'link α, β (loopback)'.padStart(34)}${'measured'.padStart(10)}${'predicted'.padStart(11)}${'error'.padStart(8)}` +
            `${'| run compute'.padStart(14)}${'error'.padStart(8)}${'MB/step'.padStart(9)}${'pred.'.padStart(7)}${'load'.padStart(6)}`,
        );
        for (const choice of choices) {
          const tag = `${processes}p-${link.name}-${choice.label}`.replace(/[^a-z0-9.]+/gi, '_');
          const cfg = join(out, `${tag}.yaml`),
            dir = join(out, tag);
          const server =
            choice.kind !== 'trick' &&
            (choice.spec.type === 'async' || (choice.spec.type === 'easgd' && choice.spec.mode !== 'sync'));
          const jobSteps = server && processes >= 3 ? serverSteps : steps;
          writeFileSync(cfg, configToYaml(jobConfig(base, choice, processes, threads, jobSteps)));
          const cal = await calibrate(net, PROBE_BYTES);
          const failure = await runJob(net, cfg, dir, processes, threads, children);
          if (failure) {
            console.log(`${choice.label.padEnd(labelWidth)}  failed: ${failure}`);
            continue;
          }
          const measured = readRunMeasurements(dir);
          // the rate of the pattern the strategy moves: a ring sends both ways at once; a parameter server's
          // device pulls, then pushes (the emulated link is not quite full duplex: one relay carries both ways)
          const both =
            choice.kind === 'trick' ||
            !['async', 'sync', 'easgd'].includes(choice.spec.type) ||
            (choice.spec.type === 'easgd' && choice.spec.mode === 'sync');
          const beta = both ? cal.link.betaBoth : cal.link.beta;
          const flags = {
            devices: String(processes * threads),
            strategies: choice.label,
            perHost: threads,
            // the emulated hosts share this machine's cores: more device threads than a host's share take turns
            coresPerHost: Math.max(1, Math.floor(cpus().length / processes)),
            steps: jobSteps,
            link: `${beta * 8}bit:${cal.link.alpha}s`,
            loopback: `${cal.loopback.beta}b/s:${cal.loopback.alpha}s`,
          };
          // the simulator's own compute (timed here once, then cached), and the run's (its median and step-to-step variation)
          const own = simulate((await buildSetup(cfg, { ...flags, remeasure, stragglers: 'none' })).setup)[0]!;
          remeasure = false;
          const given = simulate((await buildSetup(cfg, { ...flags, from: dir, stragglers: 'run' })).setup)[0]!;
          const devices = deviceSteps(measured),
            job = mean(devices);
          const step = (r: SimRow) => r.stepSeconds;
          const row: Row = {
            processes,
            link: link.name,
            strategy: choice.label,
            load: cal.load,
            calibration: cal,
            measured: job,
            devices,
            predicted: step(own),
            givenCompute: step(given),
            error: step(own) / job - 1,
            errorGivenCompute: step(given) / job - 1,
            bytesMeasured: mean(measured.bytes),
            bytesPredicted: own.bytesPerStep,
            ...(own.deviceStepSeconds ? { predictedDevices: own.deviceStepSeconds } : {}),
          };
          rows.push(row);
          const calText = `${formatDuration(cal.link.alpha)}, ${formatRate(beta)}${both ? ' ⇄' : ' →'} (${formatDuration(cal.loopback.alpha)}, ${formatRate(cal.loopback.beta)})`;
          console.log(
            `${row.strategy.padEnd(labelWidth)}${calText.padStart(34)}${ms(row.measured).padStart(10)}${ms(row.predicted).padStart(11)}${pct(row.error).padStart(8)}` +
              `${ms(row.givenCompute).padStart(14)}${pct(row.errorGivenCompute).padStart(8)}${(row.bytesMeasured / 1e6).toFixed(2).padStart(9)}` +
              `${(row.bytesPredicted / 1e6).toFixed(2).padStart(7)}${cal.load.toFixed(1).padStart(6)}`,
          );
          if (row.predictedDevices && devices.length > 1) {
            console.log(
              `${''.padEnd(labelWidth)}  per device, measured ${devices.map(ms).join(' / ')} ms, predicted ${row.predictedDevices.map(ms).join(' / ')} ms (device 0 beside the server)`,
            );
          }
        }
      }
      await net.destroy();
      net = null;
    }
    const json = option(args, 'json', '');
    if (json)
      writeFileSync(
        json,
        JSON.stringify({ machine: machineLine(), config: configPath, steps, threads, rows }, null, 1),
      );
    console.log(
      `\nmeasured: each device's mean (compute + sync) per step after its warm-up, averaged over the devices (async's devices differ: ` +
        `each is shown). predicted: the simulator on the link and loopback as measured through the transport just before the run, with the ` +
        `compute it times on this machine; run compute: the same with the run's own compute (its median, varied step to step as in the run). ` +
        `load: the 1-minute load average then.` +
        (keep ? ` Runs kept in ${out}.` : ''),
    );
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await cleanup();
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main(process.argv.slice(2));
