/**
 * Samples/s of one mnist-small training step (forward, backward, Adam) per backend and batch size,
 * on one thread, with synthetic data (the data path is not what is measured). Each figure is also
 * given as a fraction of the machine's measured FMA peak (bench/peak.ts, printed first): the
 * step's flops (the convolutions' and dense layers' multiply-adds, forward and backward) times
 * samples/s, over the peak.
 *   npm run bench -- train [--batch 32,64,128] [--seconds 3]
 * Where Debian's python3-torch is installed, the same step in PyTorch (1 thread) runs in the same
 * process tree, and the ratio is printed.
 */
import { torchPython, runPython, TORCH_NET } from './torch.ts';
import { tryBackend } from '../src/kernels/index.ts';
import { Replica } from '../src/runtime/replica.ts';
import { loadConfig } from '../src/config/index.ts';
import type { RunConfig } from '../src/config/runConfig.ts';
import { Conv2D } from '../src/nn/conv2d.ts';
import { Dense } from '../src/nn/dense.ts';
import { ofPeak, peakLine } from './peak.ts';

function option(args: string[], name: string, fallback: string): string {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] ? args[i + 1]! : fallback;
}

/** Steps per second of the training step, measured for about `seconds` after a warm-up. */
function measure(replica: Replica, batch: number, seconds: number): number {
  const per = 28 * 28;
  const images = new Float32Array(batch * per).map((_, i) => ((i * 2654435761) % 1000) / 1000);
  const labels = Int32Array.from({ length: batch }, (_, i) => i % 10);
  const step = (k: number) => {
    replica.model.zeroGrads();
    replica.computeGradients(images, labels, { training: true, seed: 1, step: k, sampleOffset: 0 }, 1 / batch);
    replica.optimizer.step(replica.model.params, replica.model.grads, 0.001);
  };
  for (let k = 0; k < 5; k++) step(k);
  const t0 = performance.now();
  let n = 0;
  while (performance.now() - t0 < seconds * 1000) step(n++);
  return (n * batch) / ((performance.now() - t0) / 1000);
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

const TORCH_STEP = `${TORCH_NET}
import sys, time
torch.set_num_threads(1)
batch, seconds = int(sys.argv[1]), float(sys.argv[2])
net = make_net()
opt = torch.optim.Adam(net.parameters(), lr=0.001)
x = torch.rand(batch, 1, 28, 28); y = torch.arange(batch) % 10
loss_fn = nn.CrossEntropyLoss()
def step():
    opt.zero_grad(); loss_fn(net(x), y).backward(); opt.step()
for _ in range(5): step()
n, t0 = 0, time.perf_counter()
while time.perf_counter() - t0 < seconds: step(); n += 1
print(n * batch / (time.perf_counter() - t0))
`;

/** PyTorch's samples/s for the same step, or null when python3-torch is not installed. */
function torchSamplesPerSecond(batch: number, seconds: number): number | null {
  return torchPython() ? Number(runPython(TORCH_STEP, [String(batch), String(seconds)])) : null;
}

export async function main(args: string[]): Promise<void> {
  const batches = option(args, 'batch', '32,64,128').split(',').map(Number);
  const seconds = Number(option(args, 'seconds', '3'));
  const config: RunConfig = loadConfig(new URL('../examples/mnist-small.yaml', import.meta.url).pathname);
  console.log(peakLine());
  const rows: string[][] = [['backend', ...batches.map((b) => `batch ${b}`)]];
  const results = new Map<string, number[]>();
  let flopsPerSample = 0;
  // native (OpenBLAS) and onednn are measured when their addons are built; otherwise their rows say n/a.
  for (const name of ['js', 'wasm', 'native', 'onednn']) {
    const backend = await tryBackend(name);
    if (!backend) { rows.push([name, ...batches.map(() => 'n/a')]); continue; }
    const label = name === 'wasm' && 'relaxed' in backend && backend.relaxed ? 'wasm (relaxed SIMD)'
      : name === 'native' ? 'native (OpenBLAS)' : name === 'onednn' ? 'onednn (oneDNN)' : name;
    const figures = batches.map((b) => {
      const replica = new Replica(backend, config);
      flopsPerSample = trainingFlopsPerSample(replica);
      return measure(replica, b, name === 'js' ? Math.min(seconds, 2) : seconds);
    });
    results.set(name, figures);
    rows.push([label, ...figures.map((f) => f.toFixed(0))]);
    const peak = figures.map((f) => ofPeak((f * flopsPerSample) / 1e9));
    if (peak.every(Boolean)) rows.push(['  of the FMA peak', ...peak]);
  }
  const torch = batches.map((b) => torchSamplesPerSecond(b, seconds));
  if (torch.every((t) => t !== null)) {
    rows.push(['pytorch 1 thread', ...torch.map((t) => t!.toFixed(0))]);
    const wasm = results.get('wasm');
    if (wasm) rows.push(['wasm / pytorch', ...wasm.map((w, i) => `${(w / torch[i]!).toFixed(2)}×`)]);
    const native = results.get('native');
    if (native) rows.push(['native / pytorch', ...native.map((w, i) => `${(w / torch[i]!).toFixed(2)}×`)]);
    const onednn = results.get('onednn');
    if (onednn) rows.push(['onednn / pytorch', ...onednn.map((w, i) => `${(w / torch[i]!).toFixed(2)}×`)]);
  } else {
    rows.push(['pytorch', ...batches.map(() => 'not installed')]);
  }
  const wasm = results.get('wasm'), native = results.get('native'), onednn = results.get('onednn');
  if (wasm && native) rows.push(['native / wasm', ...native.map((n, i) => `${(n / wasm[i]!).toFixed(2)}×`)]);
  if (wasm && onednn) rows.push(['onednn / wasm', ...onednn.map((n, i) => `${(n / wasm[i]!).toFixed(2)}×`)]);
  if (native && onednn) rows.push(['onednn / native', ...onednn.map((n, i) => `${(n / native[i]!).toFixed(2)}×`)]);
  console.log(`mnist-small training step (forward + backward + Adam), samples/s on one thread; ${(flopsPerSample / 1e6).toFixed(1)} MFLOP per sample`);
  for (const r of rows) console.log(r.map((c, i) => (i === 0 ? c.padEnd(22) : c.padStart(12))).join(''));
}

if (import.meta.url === `file://${process.argv[1]}`) await main(process.argv.slice(2));
