/**
 * Samples/s of one mnist-small training step (forward, backward, Adam) per backend and batch size
 * (`--model resnet-small`, or another example of 28×28×1 images, steps that model instead),
 * on one thread, with synthetic data (the data path is not what is measured). Each figure is also
 * given as a fraction of the machine's measured FMA peak (bench/peak.ts, printed first): the
 * step's flops (the convolutions' and dense layers' multiply-adds, forward and backward) times
 * samples/s, over the peak.
 *   npm run bench -- train [--model mnist-small] [--batch 32,64,128] [--seconds 3] [--rounds 6] [--backends wasm,native,onednn,webgpu] [--js] [--calls]
 * `--calls` adds, per backend at the first batch size, the ms per step in each Backend method and outside them.
 * With `--model` other than mnist-small there is no share of the peak (the flops are counted for
 * mnist-small's plain conv and dense layers), and a PyTorch row only where bench/torch.ts has the
 * model's twin (resnet-small).
 * The backends are measured interleaved: `--rounds` rounds, each giving every backend (and batch)
 * a slice of seconds/rounds of CPU time, and a figure is samples per CPU second, the median of its
 * slices: on a shared machine CPU time is far less disturbed by other processes than wall time
 * (caches are still shared), and a load that comes and goes falls on every backend alike. On a
 * quiet machine the two agree. The load average is printed before and after. js, the reference (seconds per step), runs on its own after them.
 * Where Debian's python3-torch is installed, the same step in PyTorch (1 thread) runs in the same
 * process tree (its own rounds of CPU time, time.process_time, the median likewise), and the ratios are printed.
 * `webgpu` (in the default list) runs where a GPU adapter opens, its adapter printed (or why not:
 * bench/webgpuColumn.ts), in samples per wall-clock second: the step of a one-device run (Adam on the
 * GPU too), ended by its one read in computeGradientsAsync, so it counts the GPU's finished work.
 */
import { torchPython, runPython, torchNetOf } from './torch.ts';
import { tryBackend } from '../src/kernels/index.ts';
import { Replica } from '../src/runtime/device/replica.ts';
import { loadConfig } from '../src/config/index.ts';
import type { RunConfig } from '../src/config/runConfig.ts';
import type { Backend } from '../src/kernels/backend.ts';
import { Conv2D } from '../src/nn/conv2d.ts';
import { Dense } from '../src/nn/dense.ts';
import { ofPeak, peakLine } from './peak.ts';
import { timeCalls } from './backendCalls.ts';
import { median } from './args.ts';
import { openWebGpuColumn } from './webgpuColumn.ts';
import { cpus, loadavg } from 'node:os';

function option(args: string[], name: string, fallback: string): string {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] ? args[i + 1]! : fallback;
}

/** CPU seconds this process has run (user + system): less disturbed by other processes than wall time. */
function cpuSeconds(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

/** Wall-clock seconds: a GPU backend's step waits on the GPU, which this process's CPU time does not count. */
const wallSeconds = () => performance.now() / 1000;

/**
 * One training step of `replica` on a fixed synthetic batch (a new step number each call), as the
 * training loop runs it: on a GPU computeGradientsAsync ends by reading the gradients to the host,
 * so a step's time holds the GPU's finished work.
 */
function trainingStep(replica: Replica, batch: number): () => Promise<void> {
  const per = 28 * 28;
  const images = new Float32Array(batch * per).map((_, i) => ((i * 2654435761) % 1000) / 1000);
  const labels = Int32Array.from({ length: batch }, (_, i) => i % 10);
  let k = 0;
  return async () => {
    replica.zeroGrads();
    await replica.computeGradientsAsync(
      images,
      labels,
      { training: true, seed: 1, step: k++, sampleOffset: 0 },
      1 / batch,
    );
    replica.view().localStep(0.001);
  };
}

interface Stepper {
  slice(seconds: number): Promise<number>;
}

/**
 * A replica with its synthetic batch, warmed up: `slice(seconds)` runs steps for about that much
 * time and returns samples per second, by CPU time on a CPU backend and wall time on a GPU.
 */
async function stepper(replica: Replica, batch: number): Promise<Stepper> {
  const step = trainingStep(replica, batch);
  const clock = replica.backend.device ? wallSeconds : cpuSeconds;
  // a GPU's first steps compile its pipelines; later ones are all alike (SwiftShader's are slow)
  for (let w = 0; w < (replica.backend.device ? 2 : 5); w++) await step();
  return {
    async slice(seconds: number): Promise<number> {
      const t0 = clock();
      let n = 0;
      do {
        await step();
        n++;
      } while (clock() - t0 < seconds);
      return (n * batch) / (clock() - t0);
    },
  };
}

/**
 * Flops of one training sample: 2 per multiply-add of each conv and dense layer, three times
 * (forward, weight gradient, input gradient) but twice for the first layer (no input gradient).
 * Pooling, activations, the loss and Adam are memory-bound and not counted.
 */
function trainingFlopsPerSample(replica: Replica): number {
  let flops = 0;
  replica.model.layers.forEach((layer, i) => {
    let macs = 0;
    if (layer instanceof Conv2D) {
      const g = layer.geometry;
      macs = g.OH * g.OW * g.F * g.KH * g.KW * g.C;
    } else if (layer instanceof Dense) {
      macs = layer.inFeatures * layer.units;
    }
    flops += 2 * macs * (i === 0 ? 2 : 3);
  });
  return flops;
}

/** The step in PyTorch; prefixed by the network's source (make_net). */
const TORCH_STEP = `
import sys, time
torch.set_num_threads(1)
batch, seconds, rounds = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
net = make_net()
opt = torch.optim.Adam(net.parameters(), lr=0.001)
x = torch.rand(batch, 1, 28, 28); y = torch.arange(batch) % 10
loss_fn = nn.CrossEntropyLoss()
def step():
    opt.zero_grad(); loss_fn(net(x), y).backward(); opt.step()
for _ in range(5): step()
rates = []
for _ in range(rounds):
    n, t0 = 0, time.process_time()
    while True:
        step(); n += 1
        if time.process_time() - t0 >= seconds / rounds: break
    rates.append(n * batch / (time.process_time() - t0))
print(sorted(rates)[len(rates) // 2])
`;

/** PyTorch's samples/s for the same step (median of its rounds), or null when python3-torch is not installed. */
function torchSamplesPerSecond(net: string, batch: number, seconds: number, rounds: number): number | null {
  return torchPython() ? Number(runPython(net + TORCH_STEP, [String(batch), String(seconds), String(rounds)])) : null;
}

const LABELS: Record<string, string> = {
  native: 'native (OpenBLAS)',
  onednn: 'onednn (oneDNN)',
  webgpu: 'webgpu (wall clock)',
};

const loadLine = (when: string) =>
  `load average ${when}: ${loadavg()
    .map((l) => l.toFixed(2))
    .join(', ')} (${cpus().length} cores)`;

export async function main(args: string[]): Promise<void> {
  const names = option(args, 'backends', 'wasm,native,onednn,webgpu').split(',');
  const model = option(args, 'model', 'mnist-small');
  const config: RunConfig = loadConfig(new URL(`../examples/${model}.yaml`, import.meta.url).pathname);
  if (config.model.input.join('×') !== '28×28×1')
    throw new Error(
      `bench train --model ${model}: its input is ${config.model.input.join('×')}; the synthetic batch is 28×28×1 images`,
    );
  console.log(peakLine());
  const webgpu = names.includes('webgpu') ? await openWebGpuColumn() : null;
  try {
    await measure(args, names, config, webgpu);
  } finally {
    webgpu?.release();
  }
}

/** The table: every backend's rows (webgpu's the backend opened, or none), then PyTorch's and the ratios. */
async function measure(args: string[], names: string[], config: RunConfig, webgpu: Backend | null): Promise<void> {
  const batches = option(args, 'batch', '32,64,128').split(',').map(Number);
  const seconds = Number(option(args, 'seconds', '3'));
  const rounds = Math.max(1, Number(option(args, 'rounds', '6')));
  const model = option(args, 'model', 'mnist-small'),
    mnist = model === 'mnist-small';
  console.log(loadLine('before'));
  let flopsPerSample = 0;
  // every backend and batch gets one slice per round; the backends' order turns each round
  const runs: { name: string; label: string; backend: Backend; steppers: Stepper[]; rates: number[][] }[] = [];
  const missing: string[] = [];
  for (const name of names.filter((n) => n !== 'js')) {
    const backend = name === 'webgpu' ? webgpu : await tryBackend(name);
    if (!backend) {
      // webgpu's line saying why was printed when it did not open
      if (name !== 'webgpu') missing.push(name);
      continue;
    }
    const label =
      name === 'wasm' && 'relaxed' in backend && backend.relaxed ? 'wasm (relaxed SIMD)' : (LABELS[name] ?? name);
    const steppers: Stepper[] = [];
    try {
      for (const b of batches) {
        const replica = new Replica(backend, config, { alone: true });
        flopsPerSample = trainingFlopsPerSample(replica);
        steppers.push(await stepper(replica, b));
      }
    } catch (err) {
      if (!backend.device) throw err;
      // a GPU runs only some layers (the error names the first it does not): its row is left out, saying so
      console.log(`${name}: left out: ${(err as Error).message}`);
      continue;
    }
    runs.push({ name, label, backend, steppers, rates: batches.map(() => []) });
  }
  for (let r = 0; r < rounds; r++) {
    for (let j = 0; j < runs.length; j++) {
      const run = runs[(j + r) % runs.length]!;
      for (const [i, s] of run.steppers.entries()) run.rates[i]!.push(await s.slice(seconds / rounds));
    }
  }
  const results = new Map<string, number[]>(runs.map((run) => [run.name, run.rates.map(median)]));
  if (args.includes('--js') || names.includes('js')) {
    const js = await tryBackend('js');
    if (js) {
      const rates: number[] = [];
      for (const b of batches)
        rates.push(await (await stepper(new Replica(js, config), b)).slice(Math.min(seconds, 2)));
      results.set('js', rates);
    }
  }
  console.log(loadLine('after'));

  const rows: string[][] = [['backend', ...batches.map((b) => `batch ${b}`)]];
  for (const name of missing) rows.push([name, ...batches.map(() => 'n/a')]);
  for (const [name, figures] of results) {
    rows.push([runs.find((r) => r.name === name)?.label ?? name, ...figures.map((f) => f.toFixed(0))]);
    const peak = figures.map((f) => ofPeak((f * flopsPerSample) / 1e9));
    // the peak is the CPU's: no share of it for a GPU
    if (mnist && name !== 'webgpu' && peak.every(Boolean)) rows.push(['  of the FMA peak', ...peak]);
  }
  const ratio = (a: string, b: string, label = `${a} / ${b}`) => {
    const x = results.get(a),
      y = results.get(b);
    if (x && y) rows.push([label, ...x.map((v, i) => `${(v / y[i]!).toFixed(2)}×`)]);
  };
  const net = torchNetOf(model);
  const torch = net ? batches.map((b) => torchSamplesPerSecond(net, b, seconds, rounds)) : [];
  if (!net) {
    rows.push(['pytorch', ...batches.map(() => 'no twin')]);
  } else if (torch.every((t) => t !== null)) {
    results.set('pytorch', torch as number[]);
    rows.push(['pytorch 1 thread', ...torch.map((t) => t!.toFixed(0))]);
    for (const name of ['wasm', 'native', 'onednn']) ratio(name, 'pytorch');
  } else {
    rows.push(['pytorch', ...batches.map(() => 'not installed')]);
  }
  ratio('native', 'wasm');
  ratio('onednn', 'wasm');
  ratio('onednn', 'native');
  const fastestCpu = ['onednn', 'native', 'wasm'].find((n) => results.has(n));
  if (fastestCpu) ratio('webgpu', fastestCpu);
  console.log(
    `${model} training step (forward + backward + Adam), samples per CPU second on one thread, median of ${rounds} interleaved rounds` +
      (mnist ? `; ${(flopsPerSample / 1e6).toFixed(1)} MFLOP per sample` : ''),
  );
  if (results.has('webgpu'))
    console.log(
      'webgpu: samples per wall-clock second, each step as a one-device run takes it, ended by its one read (the GPU has finished it), the interleaved rounds as above',
    );
  for (const r of rows) console.log(r.map((c, i) => (i === 0 ? c.padEnd(22) : c.padStart(12))).join(''));
  if (args.includes('--calls')) {
    for (const { name, backend } of runs) {
      console.log(`\n${name}, batch ${batches[0]}: where a step goes (--calls)`);
      // a GPU's step is far slower on a software adapter, and its calls only record: fewer steps tell as much
      const steps = backend.device ? 20 : 200;
      for (const line of await stepBreakdown(backend, config, batches[0]!, steps)) console.log(line);
    }
  }
}

/** Where one backend's step goes (`--calls`): ms per step per Backend method, `steps` steps after a warm-up. */
async function stepBreakdown(b: Backend, config: RunConfig, batch: number, steps: number): Promise<string[]> {
  const calls = timeCalls(b);
  const step = trainingStep(new Replica(calls.backend, config), batch);
  for (let w = 0; w < Math.min(20, steps); w++) await step();
  calls.reset();
  const t0 = performance.now();
  for (let i = 0; i < steps; i++) await step();
  return calls.report(steps, performance.now() - t0, 'step');
}

if (import.meta.url === `file://${process.argv[1]}`) await main(process.argv.slice(2));
