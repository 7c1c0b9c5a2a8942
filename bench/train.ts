/**
 * Samples/s of one mnist-small training step (forward, backward, Adam) per backend and batch size
 * (`--model resnet-small`, or another example of 28×28×1 images, steps that model instead),
 * on one thread, with synthetic data (the data path is not what is measured). Each figure is also
 * given as a fraction of the machine's measured FMA peak (bench/peak.ts, printed first): the
 * step's flops (the convolutions' and dense layers' multiply-adds, forward and backward) times
 * samples/s, over the peak.
 *   npm run bench -- train [--model mnist-small] [--batch 32,64,128] [--seconds 3] [--rounds 6] [--backends wasm,native,onednn] [--js] [--calls]
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

/** One training step of `replica` on a fixed synthetic batch (a new step number each call). */
function trainingStep(replica: Replica, batch: number): () => void {
  const per = 28 * 28;
  const images = new Float32Array(batch * per).map((_, i) => ((i * 2654435761) % 1000) / 1000);
  const labels = Int32Array.from({ length: batch }, (_, i) => i % 10);
  let k = 0;
  return () => {
    replica.model.zeroGrads();
    replica.computeGradients(images, labels, { training: true, seed: 1, step: k++, sampleOffset: 0 }, 1 / batch);
    replica.optimizer.step(replica.model.params, replica.model.grads, 0.001);
  };
}

/** A replica with its synthetic batch, warmed up: `slice(seconds)` runs steps for about that much CPU time and returns samples per CPU second. */
function stepper(replica: Replica, batch: number): { slice(seconds: number): number } {
  const step = trainingStep(replica, batch);
  for (let w = 0; w < 5; w++) step();
  return {
    slice(seconds: number): number {
      const t0 = cpuSeconds();
      let n = 0;
      do {
        step();
        n++;
      } while (cpuSeconds() - t0 < seconds);
      return (n * batch) / (cpuSeconds() - t0);
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

const LABELS: Record<string, string> = { native: 'native (OpenBLAS)', onednn: 'onednn (oneDNN)' };

const loadLine = (when: string) =>
  `load average ${when}: ${loadavg()
    .map((l) => l.toFixed(2))
    .join(', ')} (${cpus().length} cores)`;

export async function main(args: string[]): Promise<void> {
  const batches = option(args, 'batch', '32,64,128').split(',').map(Number);
  const seconds = Number(option(args, 'seconds', '3'));
  const rounds = Math.max(1, Number(option(args, 'rounds', '6')));
  const names = option(args, 'backends', 'wasm,native,onednn').split(',');
  const model = option(args, 'model', 'mnist-small'),
    mnist = model === 'mnist-small';
  const config: RunConfig = loadConfig(new URL(`../examples/${model}.yaml`, import.meta.url).pathname);
  if (config.model.input.join('×') !== '28×28×1')
    throw new Error(
      `bench train --model ${model}: its input is ${config.model.input.join('×')}; the synthetic batch is 28×28×1 images`,
    );
  console.log(peakLine());
  console.log(loadLine('before'));
  let flopsPerSample = 0;
  // every backend and batch gets one slice per round; the backends' order turns each round
  const runs: { name: string; label: string; steppers: ReturnType<typeof stepper>[]; rates: number[][] }[] = [];
  const missing: string[] = [];
  for (const name of names.filter((n) => n !== 'js')) {
    const backend = await tryBackend(name);
    if (!backend) {
      missing.push(name);
      continue;
    }
    const label =
      name === 'wasm' && 'relaxed' in backend && backend.relaxed ? 'wasm (relaxed SIMD)' : (LABELS[name] ?? name);
    const steppers = batches.map((b) => {
      const replica = new Replica(backend, config);
      flopsPerSample = trainingFlopsPerSample(replica);
      return stepper(replica, b);
    });
    runs.push({ name, label, steppers, rates: batches.map(() => []) });
  }
  for (let r = 0; r < rounds; r++) {
    for (let j = 0; j < runs.length; j++) {
      const run = runs[(j + r) % runs.length]!;
      for (const [i, s] of run.steppers.entries()) run.rates[i]!.push(s.slice(seconds / rounds));
    }
  }
  const results = new Map<string, number[]>(runs.map((run) => [run.name, run.rates.map(median)]));
  if (args.includes('--js') || names.includes('js')) {
    const js = await tryBackend('js');
    if (js)
      results.set(
        'js',
        batches.map((b) => stepper(new Replica(js, config), b).slice(Math.min(seconds, 2))),
      );
  }
  console.log(loadLine('after'));

  const rows: string[][] = [['backend', ...batches.map((b) => `batch ${b}`)]];
  for (const name of missing) rows.push([name, ...batches.map(() => 'n/a')]);
  for (const [name, figures] of results) {
    rows.push([runs.find((r) => r.name === name)?.label ?? name, ...figures.map((f) => f.toFixed(0))]);
    const peak = figures.map((f) => ofPeak((f * flopsPerSample) / 1e9));
    if (mnist && peak.every(Boolean)) rows.push(['  of the FMA peak', ...peak]);
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
  console.log(
    `${model} training step (forward + backward + Adam), samples per CPU second on one thread, median of ${rounds} interleaved rounds` +
      (mnist ? `; ${(flopsPerSample / 1e6).toFixed(1)} MFLOP per sample` : ''),
  );
  for (const r of rows) console.log(r.map((c, i) => (i === 0 ? c.padEnd(22) : c.padStart(12))).join(''));
  if (args.includes('--calls')) {
    for (const name of runs.map((r) => r.name)) {
      console.log(`\n${name}, batch ${batches[0]}: where a step goes (--calls)`);
      for (const line of stepBreakdown((await tryBackend(name))!, config, batches[0]!, 200)) console.log(line);
    }
  }
}

/** Where one backend's step goes (`--calls`): ms per step per Backend method, `steps` steps after a warm-up. */
function stepBreakdown(b: Backend, config: RunConfig, batch: number, steps: number): string[] {
  const calls = timeCalls(b);
  const step = trainingStep(new Replica(calls.backend, config), batch);
  for (let w = 0; w < 20; w++) step();
  calls.reset();
  const t0 = performance.now();
  for (let i = 0; i < steps; i++) step();
  return calls.report(steps, performance.now() - t0, 'step');
}

if (import.meta.url === `file://${process.argv[1]}`) await main(process.argv.slice(2));
