/**
 * Data-parallel throughput: mnist-small, hybrid strategy, per-device batch 64, on 1 and 2 devices
 * (worker threads), steady-state samples/s from the step events after a warm-up of 1,500 steps.
 * V8 compiles the per-step code on helper threads for the first thousand steps or more (called
 * once a step, the functions cross its tier-up counts one at a time, up to 30 ms of compiling
 * each), and with every core a device those threads take a device's core while the other waits
 * for it: a start-up cost of a run, not its rate. So the default warm-up runs past most of it
 * (scripts/scaling-probe.ts --warmup 10,1500 on a 2-core Zen 4: 2 devices over 1 a median 1.95×
 * after 1,500 steps against 1.87× after 10), and since it is longer than `--steps` + 10 the
 * benchmark also prints steps 10 to 10 + `--steps` of the same runs, the window V8 is still
 * compiling in. Where Debian's python3-torch is installed, PyTorch on 1 process and DDP (gloo, 2
 * processes, 1 thread each, same network and per-rank batch) run in the same benchmark and the
 * ratios are printed.
 * The kernel backend is `auto` (onednn, then native, then wasm: whichever is built) unless
 * --backend names one. Each run trains as many epochs as the data needs for its steps (the shipped
 * Fashion-MNIST subset holds 31 global steps of 2 × 64) and stops gracefully after them, with no
 * evaluation or checkpoint inside the window, timed by the devices' own step times. The device
 * counts take turns for `--rounds` rounds (default 5), so a change of load on the shared machine hits
 * them alike; a cell is the median over the rounds, and the scaling is the median of the rounds' own
 * ratios (each round's G devices over its 1 device). The load average is printed before and after.
 *
 * Each row also prints the job's CPU share: its process's CPU time while the steps were counted over
 * wall time × devices. Unconnected jobs never wait for each other, so there a share under 100% is
 * time the host did not run them (a shared VM's other tenants). A device waiting for another spins
 * up to 1 ms before it sleeps (src/comm/shm/adaptiveSpin.ts), and the spin counts as CPU time: only
 * the longer waits lower a G-device job's share.
 *
 * The machine's own ceiling for G devices is measured in the same rounds: G unconnected 1-device
 * jobs at once, each in its own process (nothing exchanged), their samples/s summed over the
 * window in which all of them were stepping. What a G-device job loses to that ceiling is the
 * framework's (communication, waiting); what the ceiling loses to G × 1 device is the machine's
 * (cores sharing caches, memory bandwidth and clock). Each round also runs the FMA probe
 * (bench/peak.ts coreScaling) on one core and then on G at once for a second each: pure
 * arithmetic's scaling to G cores on this host, where neither memory nor the framework counts.
 *
 *   npm run bench -- throughput [--steps 300] [--warmup 1500] [--rounds 5] [--devices 1,2] [--backend auto|onednn|native|wasm] [--spin µs|adaptive]
 * `--spin` sets the device threads' waits' spin (PARATRAIN_SHM_SPIN, for the side-by-side children too; default:
 * the transport's, learned when every device has a core).
 * (`--one-job` is the side-by-side children's mode: one 1-device job's step times and CPU share as JSON.)
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, applyOverrides } from '../src/config/index.ts';
import type { RunConfig } from '../src/config/runConfig.ts';
import { train } from '../src/runtime/run/train.ts';
import { getBackend } from '../src/kernels/index.ts';
import { spinFromEnv } from '../src/comm/shm/index.ts';
import { torchPython, runPython, TORCH_NET } from './torch.ts';
import { median } from './args.ts';
import { coreScaling } from './peak.ts';

/** Steps left out at the start of every run: past most of V8's compiling of the per-step code (see the header). */
const WARMUP_STEPS = 1500;
/** The first step of the early window (printed when the warm-up is longer), with V8 still compiling. */
const EARLY_FROM = 10;
/** Seconds of each FMA probe run (one core, then G at once) in every round. */
const FMA_SECONDS = 1;

function option(args: string[], name: string, fallback: string): string {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] ? args[i + 1]! : fallback;
}

/** Counted step events: [the time a device finished the step (ms since the epoch), its samples, the step]. */
type StepTimes = [number, number, number][];

/**
 * A job's step events from step EARLY_FROM (or the warm-up's end, if sooner) to the last counted
 * one, and the share of `devices` cores its process ran on while the counted ones (after the
 * warm-up) came: its CPU time (every thread) over wall time × devices, from the first counted step
 * event to the last that reached the main thread. Below 100% the job's threads were not running
 * part of the time: waiting for each other, or not given a core by the host.
 */
interface JobSteps {
  times: StepTimes;
  cpuShare: number;
}

/** The events of steps [from, from + steps]. */
function stepsFrom(times: StepTimes, from: number, steps: number): StepTimes {
  return times.filter(([, , step]) => step >= from && step <= from + steps);
}

/** Samples/s over [from, to] of the steps finished inside it (the first one opens the window). */
function rateWithin(times: StepTimes, from: number, to: number): number {
  const inside = times.filter(([t]) => t >= from && t <= to);
  if (inside.length < 2) return 0;
  const samples = inside.slice(1).reduce((a, [, n]) => a + n, 0);
  return samples / ((inside.at(-1)![0] - inside[0]![0]) / 1000);
}

/** Samples/s of a job's steps [from, from + steps], from their own first and last events. */
function rateOfSteps(times: StepTimes, from: number, steps: number): number {
  const w = stepsFrom(times, from, steps);
  return rateWithin(w, w[0]![0], w.at(-1)![0]);
}

/**
 * A run's samples/s: steady state (`steps` steps after the warm-up) and, when the warm-up holds
 * them, steps [EARLY_FROM, EARLY_FROM + steps] of the same run.
 */
interface Rates {
  rate: number;
  cpuShare: number;
  early?: number;
}

/** Steady-state samples/s of a paratrain run of `steps` global steps on `devices` devices. */
async function paratrainSamplesPerSecond(
  devices: number,
  steps: number,
  warmup: number,
  batch: number,
  backend: string,
): Promise<Rates> {
  const { times, cpuShare } = await paratrainStepTimes(devices, steps, warmup, batch, backend);
  return {
    rate: rateOfSteps(times, warmup, steps),
    cpuShare,
    ...(hasEarly(steps, warmup) ? { early: rateOfSteps(times, EARLY_FROM, steps) } : {}),
  };
}

/** Whether the warm-up holds the early window whole. */
function hasEarly(steps: number, warmup: number): boolean {
  return EARLY_FROM + steps < warmup;
}

/**
 * The benchmark's job: mnist-small, hybrid, `devices` devices at per-device `batch`, data for
 * `steps` global steps, as many epochs as the data needs (the shipped subset has 4,000 images: 31
 * steps of 2 × 64), and no evaluation or checkpoint until the end; the caller stops it gracefully
 * once its steps are counted. Also scripts/scaling-probe.ts's.
 */
export function throughputJobConfig(devices: number, batch: number, steps: number, backend = 'auto'): RunConfig {
  const base = loadConfig(new URL('../examples/mnist-small.yaml', import.meta.url).pathname);
  const config = applyOverrides(base, { devices, strategy: 'hybrid', epochs: 1000, backend });
  config.data.trainLimit = steps * batch * devices;
  config.data.testLimit = 500;
  config.data.batchSize = batch;
  config.train.evalEvery = 0;
  config.train.checkpointEvery = 0;
  return config;
}

/** The counted step events (after the warm-up) of a paratrain run of `steps` global steps on `devices` devices. */
async function paratrainStepTimes(
  devices: number,
  steps: number,
  warmup: number,
  batch: number,
  backend: string,
): Promise<JobSteps> {
  const config = throughputJobConfig(devices, batch, steps + warmup, backend);
  const out = mkdtempSync(join(tmpdir(), 'paratrain-bench-'));
  const stop = new AbortController();
  const times: StepTimes = [];
  let first: { cpu: NodeJS.CpuUsage; wall: number } | undefined,
    last = first;
  try {
    await train(config, {
      out: join(out, 'run'),
      signal: stop.signal,
      onEvent: (e) => {
        // every device reports each step; the steps a stop lets finish are not counted
        if (e.type !== 'step' || e.step < Math.min(EARLY_FROM, warmup) || e.step > warmup + steps) return;
        // the time the device finished the step (devices send their step events in batches)
        times.push([e.time ?? Date.now(), e.samples, e.step]);
        if (e.step < warmup) return;
        last = { cpu: process.cpuUsage(), wall: performance.now() };
        first ??= last;
        if (e.step === warmup + steps) stop.abort();
      },
    });
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
  const wall = first && last ? last.wall - first.wall : 0;
  const cpuMs = first && last ? (last.cpu.user + last.cpu.system - first.cpu.user - first.cpu.system) / 1000 : 0;
  return { times: times.sort((a, b) => a[0] - b[0]), cpuShare: wall > 0 ? cpuMs / (wall * devices) : NaN };
}

/**
 * G unconnected 1-device jobs at once, each in its own process: their samples/s summed over the
 * window in which every one of them was stepping (from the last one's first counted step to the
 * first one's last), after the warm-up and, when it holds them, in steps [EARLY_FROM, EARLY_FROM + steps].
 * Each child is this script's `throughput --one-job`, at the same fixed batch as the connected runs.
 */
async function sideBySideSamplesPerSecond(g: number, steps: number, warmup: number, backend: string): Promise<Rates> {
  const script = new URL('./main.ts', import.meta.url).pathname;
  const args = [
    '--import',
    'tsx',
    script,
    'throughput',
    '--one-job',
    '--steps',
    String(steps),
    '--warmup',
    String(warmup),
    '--backend',
    backend,
  ];
  const jobs = await Promise.all(
    Array.from(
      { length: g },
      () =>
        new Promise<JobSteps>((resolve, reject) => {
          execFile(process.execPath, args, { maxBuffer: 64 << 20 }, (err, stdout) =>
            err ? reject(err) : resolve(JSON.parse(stdout) as JobSteps),
          );
        }),
    ),
  );
  const summed = (firstStep: number): number => {
    const runs = jobs.map((j) => stepsFrom(j.times, firstStep, steps));
    const from = Math.max(...runs.map((t) => t[0]![0])),
      to = Math.min(...runs.map((t) => t.at(-1)![0]));
    if (to <= from) throw new Error('throughput: the side-by-side jobs did not overlap; raise --steps');
    return runs.reduce((sum, t) => sum + rateWithin(t, from, to), 0);
  };
  return {
    rate: summed(warmup),
    cpuShare: jobs.reduce((a, j) => a + j.cpuShare, 0) / g,
    ...(hasEarly(steps, warmup) ? { early: summed(EARLY_FROM) } : {}),
  };
}

const TORCH_DDP = `${TORCH_NET}
import os, sys, time
import torch.distributed as dist, torch.multiprocessing as mp
def worker(rank, world, batch, steps, warmup, port, out):
    torch.set_num_threads(1)
    os.environ['MASTER_ADDR'] = '127.0.0.1'; os.environ['MASTER_PORT'] = str(port)
    if world > 1: dist.init_process_group('gloo', rank=rank, world_size=world)
    torch.manual_seed(1)
    net = make_net()
    model = torch.nn.parallel.DistributedDataParallel(net) if world > 1 else net
    opt = torch.optim.Adam(model.parameters(), lr=0.001)
    x = torch.rand(batch, 1, 28, 28); y = torch.arange(batch) % 10
    loss_fn = nn.CrossEntropyLoss()
    def step():
        opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()
    for _ in range(warmup): step()
    if world > 1: dist.barrier()
    t0 = time.perf_counter()
    for _ in range(steps): step()
    if world > 1: dist.barrier()
    if rank == 0: out.put(world * batch * steps / (time.perf_counter() - t0))
if __name__ == '__main__':
    world, batch, steps, warmup, port = (int(a) for a in sys.argv[1:6])
    ctx = mp.get_context('spawn'); q = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, world, batch, steps, warmup, port, q)) for r in range(world)]
    for p in procs: p.start()
    print(q.get())
    for p in procs: p.join()
`;

export async function main(args: string[]): Promise<void> {
  const count = (name: string, fallback: string, least: number): number => {
    const v = Number(option(args, name, fallback));
    if (!(Number.isInteger(v) && v >= least))
      throw new Error(`--${name}: an integer ≥ ${least}, got '${option(args, name, fallback)}'`);
    return v;
  };
  const steps = count('steps', '300', 2),
    warmup = count('warmup', String(WARMUP_STEPS), 0),
    rounds = count('rounds', '5', 1);
  const devices = option(args, 'devices', '1,2').split(',').map(Number);
  const spin = option(args, 'spin', '');
  if (spin) {
    process.env.PARATRAIN_SHM_SPIN = spin;
    try {
      spinFromEnv();
    } catch {
      throw new Error(`--spin: a number of µs ≥ 0 or 'adaptive', got '${spin}'`);
    }
  }
  const batch = 64;
  const backend = (await getBackend(option(args, 'backend', 'auto'))).name;
  // a child of sideBySideSamplesPerSecond: one 1-device job's step times, as JSON on stdout
  if (args.includes('--one-job')) {
    process.stdout.write(JSON.stringify(await paratrainStepTimes(1, steps, warmup, batch, backend)));
    return;
  }
  const load = () =>
    `${loadavg()
      .map((l) => l.toFixed(2))
      .join(', ')} (${cpus().length} cores)`;
  console.log(`load average before: ${load()}`);
  const perRound = new Map<number, number[]>(devices.map((g) => [g, []]));
  const side = devices.filter((g) => g > 1);
  const sideRound = new Map<number, number[]>(side.map((g) => [g, []]));
  // the early window's samples/s, per row as `shares`; the FMA probe's scaling to G cores, per G
  const early = new Map<string, number[]>(),
    fma = new Map<number, number[]>(side.map((g) => [g, []])),
    overlaps: number[] = [];
  // the CPU share of each run (JobSteps), per row: devices, or `${g} apart`
  const shares = new Map<string, number[]>();
  const keep = (row: string, r: Rates): number => {
    shares.set(row, [...(shares.get(row) ?? []), r.cpuShare]);
    if (r.early !== undefined) early.set(row, [...(early.get(row) ?? []), r.early]);
    return r.rate;
  };
  for (let r = 0; r < rounds; r++) {
    for (const g of devices)
      perRound.get(g)!.push(keep(String(g), await paratrainSamplesPerSecond(g, steps, warmup, batch, backend)));
    for (const g of side) {
      sideRound.get(g)!.push(keep(`${g} apart`, await sideBySideSamplesPerSecond(g, steps, warmup, backend)));
      const probe = await coreScaling(g, FMA_SECONDS);
      if (probe) {
        fma.get(g)!.push(probe.scaling);
        overlaps.push(probe.overlap);
      }
    }
  }
  const share = (row: string) => `${(100 * median(shares.get(row)!)).toFixed(0)}%`.padStart(11);
  const ours = new Map(devices.map((g) => [g, median(perRound.get(g)!)]));
  // each round's own scaling: G devices against the 1 device measured minutes apart in the same round
  const vsOne = (xs: number[]) => (perRound.has(1) ? median(xs.map((v, r) => v / perRound.get(1)![r]!)) : undefined);
  const scaling = new Map(devices.map((g) => [g, vsOne(perRound.get(g)!)]));
  const torch = new Map<number, number>();
  if (torchPython()) {
    // no JIT to warm up: PyTorch's steady state starts within a few steps
    for (const g of devices)
      torch.set(
        g,
        Number(
          runPython(TORCH_DDP, [
            String(g),
            String(batch),
            String(steps),
            String(Math.min(warmup, EARLY_FROM)),
            String(29500 + g),
          ]),
        ),
      );
  }
  console.log(`load average after: ${load()}`);
  console.log(
    `mnist-small, hybrid, per-device batch ${batch}, ${steps} steps after ${warmup} warm-up steps, ${backend} backend, ` +
      `${rounds} rounds, waits spin ${spin ? `${spin}${spin === 'adaptive' ? '' : ' µs'} (--spin)` : "the transport's default"}; ` +
      `samples/s (median over rounds; vs 1 device: median of the rounds' ratios)`,
  );
  console.log(
    `${'devices'.padEnd(10)}${'paratrain'.padStart(12)}${'vs 1 device'.padStart(13)}${'CPU share'.padStart(11)}${'  rounds'}${torch.size ? `${'pytorch'.padStart(12)}${'paratrain/pytorch'.padStart(19)}` : ''}`,
  );
  for (const g of devices) {
    const p = ours.get(g)!,
      t = torch.get(g),
      k = scaling.get(g);
    const each = perRound
      .get(g)!
      .map((v) => v.toFixed(0))
      .join(' · ');
    console.log(
      `${String(g).padEnd(10)}${p.toFixed(0).padStart(12)}${(k !== undefined ? `${k.toFixed(2)}×` : '').padStart(13)}${share(String(g))}  ${each}` +
        (t ? `${t.toFixed(0).padStart(12)}${`${(p / t).toFixed(2)}×`.padStart(19)}` : ''),
    );
  }
  for (const g of side) {
    const c = sideRound.get(g)!,
      k = vsOne(c),
      mine = median(perRound.get(g)!.map((v, r) => v / c[r]!));
    console.log(
      `${`${g} apart`.padEnd(10)}${median(c).toFixed(0).padStart(12)}${(k !== undefined ? `${k.toFixed(2)}×` : '').padStart(13)}${share(`${g} apart`)}  ${c.map((v) => v.toFixed(0)).join(' · ')}`,
    );
    console.log(
      `  ${g} devices reach ${(100 * mine).toFixed(0)}% of the machine's ceiling for ${g} (median of the rounds' ratios)`,
    );
    const f = fma.get(g)!;
    if (f.length) {
      console.log(
        `pure FMA on ${g} cores at once: ${median(f).toFixed(2)}× one core (median of the rounds: ${f.map((v) => v.toFixed(2)).join(' · ')}; ` +
          `${FMA_SECONDS} s each, all threads running together for at least ${(100 * Math.min(...overlaps)).toFixed(0)}% of it)`,
      );
    }
  }
  if (hasEarly(steps, warmup) && perRound.has(1)) {
    const one = early.get('1')!;
    const vs = (xs: number[]) => `${median(xs.map((v, r) => v / one[r]!)).toFixed(2)}×`;
    console.log(
      `steps ${EARLY_FROM}–${EARLY_FROM + steps} of the same runs, V8 still compiling the per-step code: 1 device ${median(one).toFixed(0)} samples/s; ` +
        devices
          .filter((g) => g > 1)
          .map((g) => `${g} devices ${vs(early.get(String(g))!)}`)
          .join(', ') +
        side
          .map(
            (g) =>
              `, ${g} apart ${vs(early.get(`${g} apart`)!)}; ${g} devices reach ` +
              `${(100 * median(early.get(String(g))!.map((v, r) => v / early.get(`${g} apart`)![r]!))).toFixed(0)}% of it`,
          )
          .join(''),
    );
  }
  console.log(
    `N apart: N unconnected 1-device jobs at once, one process each, summed while all were stepping (the machine's ceiling for N devices)`,
  );
  console.log(
    `CPU share: the job's CPU time (all its threads) while its steps were counted, over wall time × devices (the median over rounds; ` +
      `for N apart the mean of the N jobs): under 100%, its threads were waiting for each other (beyond the spin of up to 1 ms, which counts as CPU) or not given a core by the host`,
  );
  if (!torch.size) console.log('(PyTorch comparison skipped: python3-torch is not installed)');
  console.log(
    `pytorch: 1 device = one process, 1 thread; 2 devices = DDP over gloo, 2 processes, 1 thread each; ${steps} steps after ${Math.min(warmup, EARLY_FROM)} warm-up steps`,
  );
}
