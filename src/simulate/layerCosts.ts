/**
 * What the simulator knows of a model: per layer, its forward and backward time as a function of
 * the batch (t(b) = fixed + perSample·b, fitted to measurements or scaled from a run), where its
 * gradients sit in the flat buffer (gradient buckets), its share of floating-point work (to split
 * a run's measured step over layers), and the optimizer's time per parameter.
 */
import type { Layer } from '../nn/layer.ts';
import { shapeSize, VARIABLE } from '../tensor/shape.ts';

/** Seconds as a function of the batch: fixed + perSample · b (both ≥ 0). */
export interface BatchTime {
  fixed: number;
  perSample: number;
}

/** Seconds of a BatchTime at batch b. */
export const timeAt = (t: BatchTime, batch: number): number => t.fixed + t.perSample * batch;

/** One layer as the simulator sees it. */
export interface LayerCost {
  index: number;
  type: string;
  name: string;
  forward: BatchTime;
  backward: BatchTime;
  /** offset of the layer's first parameter in the flat buffer (−1: none) */
  paramOffset: number;
  /** parameters of the layer, in floats (alignment padding included) */
  paramFloats: number;
  /** per-sample input and output shapes (a variable frame count fixed to --seq-len) */
  inputShape: number[];
  outputShape: number[];
  /** per-sample output elements (the activation a section exchange moves) */
  outputElements: number;
  /** estimated forward floating-point operations per sample (weights the split of a run's time) */
  flopsPerSample: number;
}

/** Everything per model the strategies' timelines need. */
export interface ModelCosts {
  layers: LayerCost[];
  /** the flat parameter (= gradient) buffer, floats */
  paramFloats: number;
  /** non-trained state (BatchNorm statistics), floats */
  stateFloats: number;
  /** one optimizer step, seconds per parameter (the server's update uses it too) */
  optimizerPerFloat: number;
  /** where the numbers came from, for the report */
  source: string;
}

/**
 * The costs of a device that shares its core: `perHost` device threads on `cores` cores each
 * compute perHost/cores times as long as the layers timed on a core of their own (the
 * optimizer's step too); at most one thread a core, as they are.
 */
export function onSharedCores(costs: ModelCosts, perHost: number, cores: number): ModelCosts {
  const factor = perHost / cores;
  if (!(factor > 1)) return costs;
  const slower = (t: BatchTime): BatchTime => ({ fixed: t.fixed * factor, perSample: t.perSample * factor });
  return {
    ...costs,
    layers: costs.layers.map((l) => ({ ...l, forward: slower(l.forward), backward: slower(l.backward) })),
    optimizerPerFloat: costs.optimizerPerFloat * factor,
    source: `${costs.source}; ${perHost} device threads sharing ${cores} core${cores === 1 ? '' : 's'} a host: ${factor.toFixed(2)}× as long`,
  };
}

/** A sequence model's VARIABLE time dimension replaced by `seqLen` (the length timing uses). */
export function fixedShape(shape: readonly number[], seqLen: number | undefined, what: string): number[] {
  if (!shape.includes(VARIABLE)) return [...shape];
  if (seqLen === undefined)
    throw new Error(`${what} has a variable number of frames; give --seq-len T (the frames per sample to simulate)`);
  return shape.map((d) => (d === VARIABLE ? seqLen : d));
}

/**
 * Forward FLOPs per sample of a built layer, roughly: 2 per weight per output position for layers
 * with weights (dense, convolutions, recurrent), plus one per output element.
 */
export function layerFlops(layer: Layer, seqLen?: number): number {
  const out = fixedShape(layer.outputShape, seqLen ?? 1, layer.name);
  const outSize = shapeSize(out);
  const weights = layer.params().reduce((m, p) => Math.max(m, shapeSize(p.shape)), 0);
  if (weights === 0) return outSize;
  const channels = out[out.length - 1] ?? 1;
  const positions = Math.max(1, outSize / Math.max(1, channels));
  return 2 * weights * positions + outSize;
}

/**
 * Splits a measured time per sample over layers in proportion to their FLOPs (forward one share,
 * backward two, the first layer's backward one: it skips the input gradient).
 */
export function splitByFlops(
  layers: readonly { flopsPerSample: number }[],
  secondsPerSample: number,
): { forward: number; backward: number }[] {
  const weight = layers.map((l, i) => ({ f: l.flopsPerSample, b: l.flopsPerSample * (i === 0 ? 1 : 2) }));
  const total = weight.reduce((s, w) => s + w.f + w.b, 0) || 1;
  return weight.map((w) => ({ forward: (secondsPerSample * w.f) / total, backward: (secondsPerSample * w.b) / total }));
}

/** Forward + backward seconds of layers [from, to) at batch b. */
export function computeTime(costs: ModelCosts, batch: number, from = 0, to = costs.layers.length): number {
  let t = 0;
  for (let i = from; i < to; i++) {
    const l = costs.layers[i]!;
    t += timeAt(l.forward, batch) + timeAt(l.backward, batch);
  }
  return t;
}

/** Least-squares line through (batch, seconds) points, clamped to non-negative parts. */
export function fitBatchTime(points: readonly { batch: number; seconds: number }[]): BatchTime {
  if (points.length === 1) return { fixed: 0, perSample: points[0]!.seconds / points[0]!.batch };
  const n = points.length;
  const mx = points.reduce((s, p) => s + p.batch, 0) / n,
    my = points.reduce((s, p) => s + p.seconds, 0) / n;
  const sxx = points.reduce((s, p) => s + (p.batch - mx) ** 2, 0),
    sxy = points.reduce((s, p) => s + (p.batch - mx) * (p.seconds - my), 0);
  let perSample = sxx > 0 ? sxy / sxx : 0;
  let fixed = my - perSample * mx;
  if (perSample < 0) {
    perSample = 0;
    fixed = my;
  }
  if (fixed < 0) {
    fixed = 0;
    perSample = points.reduce((s, p) => s + p.seconds * p.batch, 0) / points.reduce((s, p) => s + p.batch ** 2, 0);
  }
  return { fixed, perSample };
}
