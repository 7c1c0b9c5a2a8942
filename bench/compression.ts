/**
 * Bytes per step of hybrid's gradient exchange, plain and compressed (`train.strategy.hybrid.compression`),
 * on the models of examples/alexnet-small.yaml (every layer data-parallel: compression acts on what
 * is all-reduced) and examples/deepspeech-small.yaml, on 2 and 4 devices, over both transports:
 *
 *   shm  training steps on worker threads (train()): the step events' `bytes`, which the shared-memory
 *        transport counts as read from peers + written (hybrid's registered all-reduce reads peers'
 *        gradients in place; a point-to-point message is written into a mailbox and read out of it)
 *   tcp  the strategy's exchange alone, its ranks in this process over loopback, on the model's
 *        tensors with random gradients: the payload bytes each rank sent and received
 *
 * A figure is the median over the steps of what one device moved, and its ratio to plain hybrid's on
 * the same model, device count and transport.
 *
 *   npm run bench -- compression [--steps 4] [--devices 2,4]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../src/config/index.ts';
import type { RunConfig } from '../src/config/runConfig.ts';
import type { StrategySpec } from '../src/parallel/strategies/index.ts';
import { train } from '../src/runtime/run/train.ts';
import type { CompressionSpec } from '../src/parallel/compression/spec.ts';
import { createStrategy } from '../src/parallel/strategies/index.ts';
import { TcpCommunicator } from '../src/comm/tcp/index.ts';
import { buildModel } from '../src/nn/model.ts';
import { jsBackend } from '../src/kernels/js/index.ts';
import type { ReplicaView } from '../src/parallel/strategy.ts';

function option(args: string[], name: string, fallback: string): string {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] ? args[i + 1]! : fallback;
}

const SUBSET = new URL('../data/fashion-mnist-subset/', import.meta.url).pathname;
const MODELS = ['alexnet-small', 'deepspeech-small'] as const;
const KINDS: { name: string; compression?: CompressionSpec }[] = [
  { name: 'hybrid' },
  { name: 'oneBit', compression: { type: 'oneBit' } },
  {
    name: 'powerSGD rank 4',
    compression: { type: 'powerSGD', rank: 4, startStep: 0, warmStart: true, minCompressionRate: 2 },
  },
];

function configFor(
  model: (typeof MODELS)[number],
  devices: number,
  steps: number,
  compression?: CompressionSpec,
): RunConfig {
  const base = loadConfig(new URL(`../examples/${model}.yaml`, import.meta.url).pathname);
  const layers = base.model.layers.map((l) => (l.type === 'dense' ? { ...l, parallel: 'data' as const } : l));
  const strategy: StrategySpec = {
    type: 'hybrid',
    bucketBytes: 4 * 1024 * 1024,
    ...(compression ? { compression } : {}),
  };
  const global = base.data.batchSizeScope === 'global' ? base.data.batchSize : base.data.batchSize * devices;
  return {
    ...base,
    model: { ...base.model, layers },
    data: {
      ...base.data,
      ...(model === 'alexnet-small' ? { dir: SUBSET, testLimit: 100 } : {}),
      trainLimit: steps * global,
    },
    train: { ...base.train, devices, epochs: 1, evalEvery: 0, strategy },
  };
}

/** The median bytes one device moved per step. */
async function bytesPerStep(config: RunConfig): Promise<number> {
  const out = mkdtempSync(join(tmpdir(), 'paratrain-bench-compression-'));
  const bytes: number[] = [];
  try {
    await train(config, {
      out: join(out, 'run'),
      onEvent: (e) => {
        if (e.type === 'step' && e.rank === 0) bytes.push(e.bytes);
      },
    });
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
  bytes.sort((a, b) => a - b);
  return bytes[bytes.length >> 1] ?? 0;
}

/** G TCP ranks of one world in this process, over loopback. */
async function tcpWorld(G: number): Promise<TcpCommunicator[]> {
  // the native ring runs a collective to its end on the calling thread: ranks sharing one thread take the wasm path
  const secret = 'bench-compression',
    nativeDataPath = false;
  let port!: (p: number) => void;
  const known = new Promise<number>((resolve) => {
    port = resolve;
  });
  const first = TcpCommunicator.connect({
    rank: 0,
    worldSize: G,
    masterPort: 0,
    secret,
    nativeDataPath,
    onMasterListening: (a) => port(a.port),
  });
  const masterPort = await known;
  const rest = Array.from({ length: G - 1 }, (_, i) =>
    TcpCommunicator.connect({ rank: i + 1, worldSize: G, masterPort, secret, nativeDataPath }),
  );
  return Promise.all([first, ...rest]);
}

/** The median bytes one rank moved per step over tcp: `steps` updates of `config`'s strategy on random gradients. */
async function tcpBytesPerStep(config: RunConfig, steps: number): Promise<number> {
  const model = buildModel(jsBackend, config.model);
  const n = model.params.length;
  const comms = await tcpWorld(config.train.devices);
  try {
    const replicas = comms.map(
      (): ReplicaView => ({
        params: new Float32Array(n),
        grads: new Float32Array(n),
        state: new Float32Array(1),
        tensors: model.paramEntries,
        localStep() {},
      }),
    );
    const strategies = comms.map((comm) => createStrategy(config.train.strategy, { comm, ps: null, seed: 1 }));
    await Promise.all(strategies.map((s, r) => s.onStart?.(replicas[r]!)));
    comms[0]!.takeStats();
    const bytes: number[] = [];
    for (let step = 0; step < steps; step++) {
      for (const rep of replicas) for (let i = 0; i < n; i++) rep.grads[i] = Math.random() - 0.5;
      const info = { step, epoch: 0, lr: 0, samples: 1 };
      await Promise.all(strategies.map((s, r) => s.applyUpdate!(replicas[r]!, info)));
      bytes.push(comms[0]!.takeStats().bytes);
    }
    bytes.sort((a, b) => a - b);
    return bytes[bytes.length >> 1] ?? 0;
  } finally {
    await Promise.all(comms.map((c) => c.close()));
  }
}

const kb = (b: number) => `${(b / 1024).toFixed(1)} KiB`;

export async function main(args: string[]): Promise<void> {
  const steps = Number(option(args, 'steps', '4'));
  const devices = option(args, 'devices', '2,4').split(',').map(Number);
  console.log(
    `CPU: ${cpus()[0]?.model ?? 'unknown'}, ${cpus().length} logical CPUs, load average ${loadavg()[0]!.toFixed(2)} at the start`,
  );
  console.log(
    `hybrid's gradient exchange per step and device: shm over ${steps} training steps, tcp over ${steps} exchanges`,
  );
  console.log(
    '| model | devices | exchange | shm bytes / step | fewer than hybrid | tcp bytes / step | fewer than hybrid |',
  );
  console.log('| --- | --- | --- | --- | --- | --- | --- |');
  for (const model of MODELS) {
    for (const g of devices) {
      let plain = { shm: 0, tcp: 0 };
      for (const kind of KINDS) {
        const config = configFor(model, g, steps, kind.compression);
        const b = { shm: await bytesPerStep(config), tcp: await tcpBytesPerStep(config, steps) };
        if (!kind.compression) plain = b;
        const ratio = (t: 'shm' | 'tcp') => (kind.compression ? `${(plain[t] / b[t]).toFixed(1)}×` : '');
        console.log(
          `| ${model} | ${g} | ${kind.name} | ${kb(b.shm)} | ${ratio('shm')} | ${kb(b.tcp)} | ${ratio('tcp')} |`,
        );
      }
    }
  }
  console.log(
    "shm: read from peers + written, as the transport counts it (the step events' `bytes`); tcp: payload sent + received",
  );
}
