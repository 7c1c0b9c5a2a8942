/**
 * Measuring the model's per-layer compute on this machine: each layer's forward and backward timed
 * alone on one thread with the chosen backend (median of a few repetitions after a warm-up; a
 * convolution and the pool the backend fuses with it timed as one, as the model runs them), at
 * the batch sizes the simulation needs (two when the per-device batch changes with the device
 * count, for the line t(b) = fixed + perSample·b), and one update (the gradient's non-finite check
 * and the optimizer step). Results are cached in $PARATRAIN_CACHE/simulate (else
 * ~/.cache/paratrain/simulate), keyed by the model, optimizer, backend, the build of its kernels,
 * batches, CPU and Node version, so a second simulation starts at once and a rebuilt kernel is
 * timed again.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { cpus, homedir, loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { wasmFileUrl } from '../kernels/wasm/loader.ts';
import { onednnAddonPath } from '../kernels/onednn/addon.ts';
import { nativeAddonPath } from '../kernels/native/addon.ts';
import { getBackend } from '../kernels/index.ts';
import type { Backend } from '../kernels/backend.ts';
import { buildModel, type Sequential } from '../nn/model.ts';
import { passSteps, type PassStep } from '../nn/convPool.ts';
import { createOptimizer } from '../optim/optimizer.ts';
import { allFinite } from '../parallel/nonFinite.ts';
import { Tensor } from '../tensor/tensor.ts';
import { CounterRng } from '../tensor/rng.ts';
import type { ModelSpec } from '../nn/spec.ts';
import type { OptimizerSpec } from '../optim/spec.ts';
import { fitBatchTime, fixedShape, layerFlops, type LayerCost, type ModelCosts } from './layerCosts.ts';

/** What to time: the model, optimizer and backend, at which batch sizes. */
export interface ProfileRequest {
  model: ModelSpec;
  optimizer: OptimizerSpec;
  /** backend name as configured ('auto' picks as training does) */
  backend: string;
  /** per-device batch sizes to time (one or two) */
  batches: number[];
  /** frames per sample for a model with variable-length input */
  seqLen?: number;
  /** timed repetitions per batch size (default 5) */
  repetitions?: number;
  /** ignore and overwrite the cache */
  remeasure?: boolean;
  /** cache directory (default $PARATRAIN_CACHE/simulate or ~/.cache/paratrain/simulate); null: no cache */
  cacheDir?: string | null;
  log?: (message: string) => void;
}

/** The simulate cache, following PARATRAIN_CACHE, then XDG_CACHE_HOME, then ~/.cache. */
export function defaultSimulateCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const root = env.PARATRAIN_CACHE || join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'paratrain');
  return join(root, 'simulate');
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};

/** Parameter offsets and sizes per layer, from the flat layout's entry names (`layers.<i>.…`). */
function paramsByLayer(model: Sequential): Map<number, { offset: number; floats: number }> {
  const out = new Map<number, { offset: number; floats: number }>();
  const entries = [...model.paramEntries].sort((a, b) => a.offset - b.offset);
  entries.forEach((e, k) => {
    const index = Number(/^layers\.(\d+)\./.exec(e.name)?.[1] ?? -1);
    const end = entries[k + 1]?.offset ?? model.params.length;
    const cur = out.get(index);
    if (cur) cur.floats = end - cur.offset;
    else out.set(index, { offset: e.offset, floats: end - e.offset });
  });
  return out;
}

/** Times every layer's forward and backward at `batch`; returns [forward, backward] seconds per layer. */
function timeLayers(
  backend: Backend,
  model: Sequential,
  batch: number,
  seqLen: number | undefined,
  reps: number,
): [number[], number[]] {
  const rng = new CounterRng(7, batch);
  const shape = [batch, ...fixedShape(model.inputShape, seqLen, 'model.input')];
  const input = new Tensor(shape, backend.alloc(shape.reduce((a, b) => a * b, 1)));
  for (let i = 0; i < input.data.length; i++) input.data[i] = rng.next() - 0.5;
  const ctx = { training: true, seed: 1, step: 0, sampleOffset: 0 };
  const fwd: number[][] = model.layers.map(() => []),
    bwd: number[][] = model.layers.map(() => []);
  let dy: Float32Array | null = null;
  // a convolution and the pool the backend fuses with it run as one step, as in Sequential's
  // passes: the step's time is the convolution's, the pool's is 0
  const steps = passSteps(backend, model.layers);
  const record = (times: number[][], step: PassStep, t: number) => {
    times[step.first]!.push(t);
    for (let i = step.first + 1; i <= step.last; i++) times[i]!.push(0);
  };
  for (let r = 0; r <= reps; r++) {
    let h = input;
    for (const step of steps) {
      const t0 = performance.now();
      h = step.forward(h, { ...ctx, step: r });
      if (r > 0) record(fwd, step, performance.now() - t0);
    }
    if (!dy) {
      dy = backend.alloc(h.size);
      for (let k = 0; k < dy.length; k++) dy[k] = (rng.next() - 0.5) * 1e-3;
    }
    let g: Tensor | null = new Tensor(h.shape, dy);
    for (let k = steps.length - 1; k >= 0 && g; k--) {
      const step = steps[k]!;
      const t0 = performance.now();
      g = step.backward(g, step.first > 0);
      if (r > 0) record(bwd, step, performance.now() - t0);
    }
  }
  return [fwd.map((t) => median(t) / 1000), bwd.map((t) => median(t) / 1000)];
}

/**
 * Seconds per parameter of one update of the model's size as a step runs it (median of a few): the
 * pass that checks the gradient for NaN/Inf before it is applied (every strategy makes one,
 * parallel/nonFinite.ts), then the optimizer step.
 */
function timeOptimizer(backend: Backend, spec: OptimizerSpec, floats: number): number {
  const opt = createOptimizer(backend, spec, floats);
  const params = backend.alloc(floats),
    grads = backend.alloc(floats).fill(1e-3);
  const times: number[] = [];
  for (let r = 0; r < 6; r++) {
    const t0 = performance.now();
    if (allFinite(grads)) opt.step(params, grads, 1e-3);
    if (r > 0) times.push(performance.now() - t0);
  }
  return median(times) / 1000 / Math.max(1, floats);
}

/**
 * Size and modification time of the files the backend's kernels come from (the wasm modules,
 * which every backend but js uses for some kernels, and the addon): a rebuilt kernel changes the
 * key, so timings cached before it (a slower pool, say) are not reused.
 */
function kernelBuild(backendName: string): string[] {
  const files = [fileURLToPath(wasmFileUrl('kernels.wasm')), fileURLToPath(wasmFileUrl('kernels-relaxed.wasm'))];
  const addon = backendName === 'onednn' ? onednnAddonPath() : backendName === 'native' ? nativeAddonPath() : null;
  if (addon) files.push(addon);
  return files.map((f) => {
    try {
      const st = statSync(f);
      return `${st.size}:${Math.floor(st.mtimeMs)}`;
    } catch {
      return 'absent';
    }
  });
}

/** The cache file's key for a request on a backend (exported for its test). */
export function profileCacheKey(req: ProfileRequest, backendName: string): string {
  const what = {
    // 2: the update's time includes the non-finite check of the gradient; 3: fused conv+pool pairs timed as one
    v: 3,
    model: req.model,
    optimizer: req.optimizer,
    backend: backendName,
    build: kernelBuild(backendName),
    batches: req.batches,
    seqLen: req.seqLen ?? null,
    reps: req.repetitions ?? 5,
    node: process.version,
    cpu: cpus()[0]?.model ?? '',
    cores: cpus().length,
  };
  return createHash('sha256').update(JSON.stringify(what)).digest('hex').slice(0, 24);
}

/** Per layer: parameters, output size and FLOPs, no times yet; plus the optimizer's time per parameter. */
function structureOf(
  backend: Backend,
  model: Sequential,
  req: Pick<ProfileRequest, 'model' | 'optimizer' | 'seqLen'>,
): ModelCosts {
  const params = paramsByLayer(model);
  const zero = { fixed: 0, perSample: 0 };
  return {
    layers: model.layers.map(
      (layer, i): LayerCost => ({
        index: i,
        type: req.model.layers[i]!.type,
        name: layer.name,
        forward: zero,
        backward: zero,
        paramOffset: params.get(i)?.offset ?? -1,
        paramFloats: params.get(i)?.floats ?? 0,
        inputShape: fixedShape(layer.inputShape, req.seqLen, layer.name),
        outputShape: fixedShape(layer.outputShape, req.seqLen, layer.name),
        outputElements: fixedShape(layer.outputShape, req.seqLen, layer.name).reduce((a, b) => a * b, 1),
        flopsPerSample: layerFlops(layer, req.seqLen),
      }),
    ),
    paramFloats: model.params.length,
    stateFloats: model.state.length,
    optimizerPerFloat: timeOptimizer(backend, req.optimizer, model.params.length),
    source: 'structure only',
  };
}

/** The model's layers without measured times (`--from` fills them from a run). */
export async function modelStructure(
  req: Pick<ProfileRequest, 'model' | 'optimizer' | 'seqLen' | 'backend'>,
): Promise<ModelCosts> {
  const backend = await getBackend(req.backend);
  const model = buildModel(backend, req.model);
  return structureOf(backend, model, req);
}

/** The model's per-layer costs measured on this machine (or read from the cache). */
export async function measureModelCosts(req: ProfileRequest): Promise<ModelCosts> {
  const backend = await getBackend(req.backend);
  const dir = req.cacheDir === undefined ? defaultSimulateCacheDir() : req.cacheDir;
  const file = dir ? join(dir, `profile-${profileCacheKey(req, backend.name)}.json`) : null;
  if (file && !req.remeasure) {
    try {
      const cached = JSON.parse(readFileSync(file, 'utf8')) as ModelCosts;
      return { ...cached, source: `${cached.source} (cached in ${file})` };
    } catch {
      /* not cached yet */
    }
  }
  const reps = req.repetitions ?? 5;
  const model = buildModel(backend, req.model);
  model.initialize(1);
  req.log?.(
    `simulate: timing ${model.layers.length} layers on the ${backend.name} backend at batch ${req.batches.join(' and ')} (cached afterwards)…`,
  );
  const timings = req.batches.map((b) => ({ batch: b, t: timeLayers(backend, model, b, req.seqLen, reps) }));
  // a machine with more runnable threads than cores times the layers slower than they run alone:
  // such a profile serves this simulation but is not kept for the next
  const load = loadavg()[0]!,
    cores = cpus().length,
    busy = load > cores;
  const structure = structureOf(backend, model, req);
  const costs: ModelCosts = {
    ...structure,
    layers: structure.layers.map((l, i) => ({
      ...l,
      forward: fitBatchTime(timings.map((x) => ({ batch: x.batch, seconds: x.t[0][i]! }))),
      backward: fitBatchTime(timings.map((x) => ({ batch: x.batch, seconds: x.t[1][i]! }))),
    })),
    source: `measured on this machine, ${backend.name} backend, one thread, batch ${req.batches.join(' and ')}, load average ${load.toFixed(1)} on ${cores} cores`,
  };
  if (busy)
    req.log?.(
      `simulate: not caching these timings: the load average (${load.toFixed(1)}) was above the ${cores} cores, so layers ran slower than alone; rerun on a quieter machine`,
    );
  if (file && dir && !busy) {
    try {
      mkdirSync(dir, { recursive: true });
      const tmp = `${file}.tmp-${process.pid}`;
      writeFileSync(tmp, JSON.stringify(costs));
      renameSync(tmp, file);
    } catch {
      /* a cache that cannot be written only costs the next run the timing */
    }
  }
  return costs;
}
